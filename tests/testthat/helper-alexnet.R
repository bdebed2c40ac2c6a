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

# A test kept out of `make test` for time skips unless ALEXNET_TESTS=long, which `make test-long` sets (CI runs it
# after `make test`); testthat.R then runs only the files that call this.
skip_unless_long <- function() {
  skip_if_not(long_run(), "kept out of make test for time: make test-long runs it")
}

long_run <- function() identical(Sys.getenv("ALEXNET_TESTS"), "long")

# Whether a test's code is kept out of `make test` (it calls skip_unless_long()).
kept_out_of_make_test <- function(code) any(grepl("skip_unless_long()", deparse(code), fixed = TRUE))

# testthat's test_that(), except under `make test-long`: there the files holding a test kept out of `make test` run,
# and their other tests, which `make test` ran, skip instead of running a second time.
test_that <- function(desc, code) {
  code <- substitute(code)
  if (long_run() && !kept_out_of_make_test(code)) code <- quote({
    skip("make test runs it")
  })
  eval(bquote(testthat::test_that(.(desc), .(code))), parent.frame())
}

# pip's downloads from PyPI (setuptools to build the core, the dependencies) can be cut by the network, which no
# test here checks: `f()` is called again, `attempts` times in all, `pause` seconds later, when its error (or a
# child process's error under it) says that the network failed; any other error fails at once.
retry_on_network <- function(f, attempts = 3L, pause = 5) {
  network <- paste("ReadTimeoutError|Read timed out|ConnectTimeoutError|NewConnectionError|Connection reset",
                   "IncompleteRead|ProtocolError|name resolution", sep = "|")
  for (attempt in seq_len(attempts)) {
    result <- tryCatch(list(value = f()), error = function(e) {
      said <- paste(conditionMessage(e), if (inherits(e$parent, "condition")) conditionMessage(e$parent))
      if (attempt < attempts && grepl(network, said)) NULL else stop(e)
    })
    if (!is.null(result)) return(result$value)
    Sys.sleep(pause)
  }
}

# imagenet_upload(...) of a source without validation images, which warns that the board gets none (the tests
# that need no validation images upload such sources).
upload_without_validation <- function(...) {
  expect_warning(report <- imagenet_upload(...), "gave no validation images", class = "alexnet_warning")
  invisible(report)
}

# A free TCP port on this host, not one of `taken`: below Linux's ephemeral range (32768 on), where an outgoing
# connection could take the port before a worker listens on it.
free_port <- function(taken = integer()) {
  for (attempt in 1:50) {
    port <- sample(setdiff(10000:32000, taken), 1L)
    socket <- tryCatch(serverSocket(port), error = function(e) NULL)
    if (!is.null(socket)) {
      close(socket)
      return(port)
    }
  }
  skip("no free port found")
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

# Every name in `arguments` has an item of its own among the arguments of the installed help page `topic`.
expect_arguments_documented <- function(arguments, topic) {
  rd <- tools::Rd_db("alexnet")[[paste0(topic, ".Rd")]]
  items <- unlist(strsplit(tools:::.Rd_get_argument_names(rd), ",\\s*"))
  missing <- setdiff(arguments, items)
  testthat::expect(length(missing) == 0L, sprintf("?%s has no argument %s", topic, paste(missing, collapse = ", ")))
}

# Every option of the declared tables in `users` (a list: function name -> a table generated from the core's
# declarations) is a formal of that function, with its declared default (R's own where `defaults` names one) and
# kind, and is documented in its help.
expect_declared_formals <- function(users, defaults = list()) {
  for (fun in names(users)) {
    formals <- formals(getExportedValue("alexnet", fun))
    for (name in names(users[[fun]])) {
      label <- paste0(fun, "(", name, ")")
      testthat::expect_true(name %in% names(formals), label = label)
      default <- if (name %in% names(defaults)) defaults[[name]] else users[[fun]][[name]]$default
      testthat::expect_identical(formals[[name]], default, label = label)
      testthat::expect_identical(unname(alexnet:::argument_kinds[[fun]][name]), users[[fun]][[name]]$kind,
                                 label = label)
    }
    expect_arguments_documented(names(users[[fun]]), fun)
  }
}

# A value of a declared setting (a row of a table generated from the core's declarations: R/settings.R,
# R/bench-settings.R) that the declaration refuses, NULL where every value of its type is taken.
bad_setting <- function(setting) {
  kind <- sub("\\?$", "", setting$kind)
  least <- if (grepl(">=", kind, fixed = TRUE)) as.numeric(sub("^.*>=", "", kind)) else NULL
  base <- sub(">=.*$", "", kind)
  switch(base,
    count = if (!is.null(least)) least - 1 else 1.5,
    counts = c(if (is.null(least)) -1 else least - 1),
    number = -1,
    choice = "nonsense",
    location = "",
    string = "",
    strings = if (!is.null(setting$choices)) "nonsense",
    numbers = c(5, -2),
    NULL
  )
}

# A bad value of every setting of `table` (bad_setting()) given to `fun` with `args` stops it with an alexnet_error
# naming the setting; `after(name, args)` runs after each. How many were tried.
expect_settings_refused <- function(fun, table, args = list(), after = function(name, args) NULL) {
  tried <- 0L
  for (name in names(table)) {
    bad <- bad_setting(table[[name]])
    if (is.null(bad)) next
    given <- args
    given[[name]] <- bad
    error <- tryCatch({
      do.call(fun, given)
      NULL
    }, error = identity)
    expect_s3_class(error, "alexnet_error")
    expect_match(conditionMessage(error), paste0("`", name, "`"), fixed = TRUE, label = name)
    after(name, given)
    tried <- tried + 1L
  }
  tried
}

# Printed `lines` have no stray spaces: none at a line's end, none before a closing bracket, a comma or a semicolon
# (what cat() leaves between its arguments when a separator is not wanted).
expect_tidy_lines <- function(lines) {
  stray <- grep(" $| [),;]", lines, value = TRUE)
  testthat::expect(length(stray) == 0L, paste("stray spaces in:", paste0("'", stray, "'", collapse = ", ")))
}

# An untrained AlexNet of `classes` classes at 64 pixels, saved with its card in `dir`, and two photos beside it.
tiny_model_and_photos <- function(dir, classes = 3L) {
  alexnet:::alexnet_core()
  reticulate::py_run_string(paste(
    "def _alexnet_tiny_model(folder, classes):",
    "    from pathlib import Path",
    "    import numpy as np",
    "    from PIL import Image",
    "    from alexnet.model.card import CARD_FILE, ModelCard, now",
    "    from alexnet.model.network import build_alexnet",
    "    from alexnet.tfimport import keras",
    "    keras.utils.set_random_seed(1)",
    "    model = Path(folder) / 'model'",
    "    model.mkdir(parents=True)",
    "    build_alexnet(classes, image_size=64, dense_units=16).save(model / 'alexnet.keras')",
    "    card = ModelCard(image_size=64, num_classes=classes, class_ids=[f'n0000000{i}' for i in range(classes)],",
    "                     class_names=[f'class {i}' for i in range(classes)], epochs=1, created=now())",
    "    (model / CARD_FILE).write_text(card.to_json())",
    "    rng = np.random.default_rng(0)",
    "    photos = [str(Path(folder) / f'photo{i}.jpg') for i in range(2)]",
    "    for photo in photos:",
    "        Image.fromarray(rng.integers(0, 256, (80, 90, 3), dtype=np.uint8)).save(photo, 'JPEG')",
    "    return {'model': str(model), 'photos': photos}",
    sep = "\n"), convert = FALSE)
  made <- reticulate::import_main()[["_alexnet_tiny_model"]](dir, as.integer(classes))
  list(model = made$model, photos = as.character(unlist(made$photos)))
}

# A synthetic ImageNet of `classes` categories in `dir`, uploaded to a folder board there, and its one partition
# fetched: the `data` alexnet_train() takes, with the board it came from and the source (`src`).
small_partition <- function(dir, classes = 2L, images_per_class = 4L, max_side = 64L) {
  src <- imagenet_synthetic(file.path(dir, "imagenet"), classes = classes, images_per_class = images_per_class,
                            val_per_class = 1, max_side = max_side)
  board <- file.path(dir, "board")
  imagenet_upload(src$path, board = board)
  list(src = src, board = board,
       data = imagenet_partition(partition = 0, total = 1, board = board, cache_dir = file.path(dir, "cache")))
}
