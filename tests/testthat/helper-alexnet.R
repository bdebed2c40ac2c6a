# Tests that need the Python core skip when it is missing, except under `make test`, which sets
# ALEXNET_REQUIRE_PYTHON=1 so that a broken environment fails instead of skipping.
skip_if_no_alexnet <- function() {
  if (alexnet_available()) return(invisible(TRUE))
  if (identical(Sys.getenv("ALEXNET_REQUIRE_PYTHON"), "1")) {
    stop("The Python core is required (ALEXNET_REQUIRE_PYTHON=1) but not available: ",
         tryCatch({ alexnet:::alexnet_core(); "" }, error = conditionMessage))
  }
  skip("the Python core of alexnet is not available")
}

# Runs `code` (with `args`) in a fresh R process with the given environment, so that Python state (which
# reticulate cannot reset) starts from nothing.
run_fresh_r <- function(code, env = character(), args = list()) {
  skip_if_not_installed("callr")
  callr::r(code, args = args, env = c(callr::rcmd_safe_env(), env), show = FALSE)
}

# Every name in `fields` appears, quoted as code, on the installed help page `topic`: what a function returns is
# documented.
expect_documented <- function(fields, topic) {
  db <- tools::Rd_db("alexnet")
  rd <- db[[paste0(topic, ".Rd")]]
  testthat::expect_false(is.null(rd), info = topic)
  text <- paste(utils::capture.output(tools::Rd2txt(rd, options = list(underline_titles = FALSE))), collapse = " ")
  text <- gsub("\\s+", " ", text)
  missing <- fields[!vapply(fields, function(f) grepl(paste0("['`\u2018]", f, "['`\u2019]"), text), logical(1))]
  testthat::expect(length(missing) == 0L,
                   sprintf("?%s does not document %s", topic, paste(missing, collapse = ", ")))
}
