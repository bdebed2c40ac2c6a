#' Errors alexnet raises, by class
#'
#' Every error alexnet raises on purpose is an R condition of class `alexnet_error` (and `error`,
#' `condition`), whose message says what to change. Errors of the Python core arrive in R as such
#' conditions too, with the class of their kind, a message in R's words (`NULL`, `TRUE`, `FALSE`,
#' `c("a", "b")`, R's function names) and without the Python class name, so R code can catch them
#' by kind:
#'
#' ```r
#' tryCatch(imagenet_categories(board = "gs://my-bucket/imagenet"),
#'          alexnet_board_error = function(e) message("no board there: ", conditionMessage(e)))
#' ```
#'
#' | class | raised when | also of class |
#' | --- | --- | --- |
#' | `alexnet_error` | any error below, a bad argument (checked in R before any Python runs) or a state the message says how to fix | |
#' | `alexnet_board_error` | a board or another location that cannot be reached, read or written | `alexnet_error` |
#' | `alexnet_layout_error` | an ImageNet tree that cannot be read (the message names the path) | `alexnet_error` |
#' | `alexnet_integrity_error` | data on a board or in a cache that does not match its SHA-256 or is not a valid zip | `alexnet_error` |
#' | `alexnet_bad_images_error` | more images than `max_bad_fraction` allows cannot be decoded | `alexnet_error` |
#' | `alexnet_child_error` | a child process (a benchmark measurement, a worker) failed; the message ends with the last lines of its log | `alexnet_error` |
#' | `alexnet_worker_error` | a worker of a Spark run failed; the other workers were stopped | `alexnet_cluster_error`, `alexnet_child_error`, `alexnet_error` |
#' | `alexnet_worker_lost_error` | a worker of a multi-worker training stopped answering (its heartbeats stopped, its connection was reset or a collective timed out); the message says what to give and how to resume | `alexnet_cluster_error`, `alexnet_error` |
#' | `alexnet_cluster_error` | a Spark job failed (before a worker reported an error of its own, or a worker's) | `alexnet_error` |
#' | `alexnet_setup_error` | no Python environment with the core is configured, or it cannot be imported: run [install_alexnet()] | `alexnet_error` |
#' | `alexnet_python_error` | an unexpected Python error in the core or a library it uses (the message starts with its Python type) | |
#'
#' Warnings of the core (a file of an archive left out, one of several layouts in a folder left alone, a
#' setting that cannot be used on this machine, ...) arrive as R warnings of class `alexnet_warning` (and
#' `warning`, `condition`), in R's words, when the call returns:
#' `withCallingHandlers(imagenet_upload(...), alexnet_warning = function(w) ...)` sees each of them.
#'
#' A Spark job launched again after a failure (its `retries`) says so at once, with a message, and raises an R
#' warning of class `alexnet_retry` (and `alexnet_warning`, `warning`, `condition`) whose message is the failure and
#' the relaunch, and which carries the failure's fields as an error does (below): a worker's `worker`, `workers` and
#' `log`, a Spark job's `workers` and `spark_message`.
#'
#' The conditions carry `python_class` (the core's class name; absent for errors raised in R);
#' worker errors also carry `worker` and `workers` (0-based index and count) and `log` (where the
#' worker's whole log is kept, or `NULL`); a lost worker's error carries `worker` (the lost worker's index, `NULL`
#' when TensorFlow did not name it) and `kind` (`"heartbeats"`, `"connection"` or `"timeout"`). An `alexnet_python_error` is not an `alexnet_error`: it is
#' a fault, not a state the message can tell how to fix; it carries Python's `traceback`.
#'
#' @name alexnet_errors
#' @aliases alexnet_error alexnet_warning alexnet_retry
#' @examples
#' caught <- tryCatch(alexnet_train(epochs = "ten"), alexnet_error = function(e) conditionMessage(e))
#' caught
NULL

# The R classes of each error class of the core, most specific first; a class not listed here but derived from
# AlexnetError gets the classes of its nearest listed ancestor (a test checks that every class is listed).
core_error_classes <- list(
  AlexnetError = "alexnet_error",
  BoardError = "alexnet_board_error",
  LayoutError = "alexnet_layout_error",
  IntegrityError = "alexnet_integrity_error",
  BadImagesError = "alexnet_bad_images_error",
  ChildError = "alexnet_child_error",
  WorkerError = c("alexnet_worker_error", "alexnet_cluster_error"),
  WorkerLostError = c("alexnet_worker_lost_error", "alexnet_cluster_error"),
  SparkJobError = "alexnet_cluster_error"
)

# An error condition of `classes` (then `error`, `condition`) with `message` and the fields in `...`, raised.
alexnet_condition <- function(message, classes = "alexnet_error", ...) {
  whole_messages()
  stop(structure(class = unique(c(classes, "error", "condition")),
                 list(message = message, call = NULL, ...)))
}

# R prints an error or a warning cut at `warning.length` characters (1000 by default): the core's messages (a list
# of bad images, the advice on a slow link) are said whole, up to R's most, while the caller's condition is raised.
whole_messages <- function(frame = parent.frame()) {
  old <- options(warning.length = 8170L)
  do.call(on.exit, list(substitute(options(old), list(old = old)), add = TRUE), envir = frame)
}

# A Python callable of the core as an R function whose Python errors are raised as alexnet's R conditions: it is
# called through the core's r_call(), which returns an exception (a CallFailure) instead of raising it, so that
# its class and whole message reach R whatever reticulate does with Python errors.
core_callable <- function(fn, convert = TRUE) {
  force(fn)
  force(convert)
  function(...) {
    caller <- core_caller(convert)
    if (is.null(caller)) {  # a core older than r_call(): its errors are alexnet_python_error
      return(with_core_errors(if (is.function(fn)) fn(...) else reticulate::py_call(fn, ...)))
    }
    result <- with_core_errors(caller(fn, ...))
    core_warnings()
    if (inherits(result, "alexnet.errors.CallFailure")) alexnet_core_error(result)
    result
  }
}

# The warnings the core logged during its calls (see core_callable()), raised as R warnings of class
# `alexnet_warning`, in R's words; nothing for a core that does not keep them.
core_warnings <- function() {
  taken <- core_errors_function("r_warnings")
  if (is.null(taken)) return(invisible())
  whole_messages()
  for (message in unlist(taken())) {
    warning(structure(class = c("alexnet_warning", "warning", "condition"),
                      list(message = r_words(message), call = NULL)))
  }
  invisible()
}

# The core's r_call(), converting its results to R (or not); NULL for a core without it.
core_caller <- function(convert = TRUE) core_errors_function("r_call", convert)

# The function `name` of the core's alexnet.errors, converting its results to R (or not), looked up once; NULL for
# a core without it.
core_errors_function <- function(name, convert = TRUE) {
  key <- if (convert) name else paste0(name, "_py")
  if (is.null(.alexnet[[key]])) {
    errors <- reticulate::import("alexnet.errors", convert = convert)
    .alexnet[[key]] <- if (reticulate::py_has_attr(errors, name)) errors[[name]] else FALSE
  }
  if (isFALSE(.alexnet[[key]])) NULL else .alexnet[[key]]
}

# A module of the core whose functions, reached with `$` or `[[`, raise alexnet's R conditions (see
# core_callable()); attributes that are not callable come back as they are.
core_proxy <- function(module, convert = TRUE) {
  structure(list(module = module, convert = convert), class = "alexnet_core_module")
}

#' @export
`$.alexnet_core_module` <- function(x, name) {
  module <- .subset2(x, "module")
  value <- with_core_errors(reticulate::py_get_attr(module, name))
  if (reticulate::py_has_attr(value, "__call__") && !inherits(value, "python.builtin.module")) {
    return(core_callable(value, .subset2(x, "convert")))
  }
  module[[name]]
}

#' @export
`[[.alexnet_core_module` <- function(x, i, ...) {
  `$.alexnet_core_module`(x, i)
}

# `expr`, a step on the way into the core (an import, an attribute), whose Python error, if any, is raised as an
# `alexnet_python_error` (with the Python class name first, as reticulate gives it). Errors raised in R pass
# through unchanged.
with_core_errors <- function(expr) {
  tryCatch(expr, error = function(e) {
    if (inherits(e, c("alexnet_error", "alexnet_python_error")) || !python_error(e)) stop(e)
    alexnet_condition(trimws(conditionMessage(e)), "alexnet_python_error")
  })
}

# Did R error `e` come from Python? (py_last_error() keeps the last Python error ever raised: its message must
# be the start of `e`'s.)
python_error <- function(e) {
  last <- tryCatch(reticulate::py_last_error(), error = function(e2) NULL)
  value <- if (is.null(last)) NULL else last$value
  is.character(value) && length(value) == 1L && grepl(substr(trimws(value), 1L, 40L), conditionMessage(e),
                                                      fixed = TRUE)
}

# Raises the R condition for a CallFailure of the core: the R classes of its kind and its message in R's words
# for the core's own errors, `alexnet_python_error` with the Python class name first for any other.
alexnet_core_error <- function(failure) {
  get <- function(name) reticulate::py_to_r(reticulate::py_get_attr(failure, name))
  lineage <- unlist(get("classes"))
  message <- get("message")
  known <- intersect(lineage, names(core_error_classes))
  if (!length(known)) {
    alexnet_condition(paste0(lineage[[1]], ": ", message), "alexnet_python_error", python_class = lineage[[1]],
                      traceback = get("traceback"))
  }
  classes <- unique(c(unlist(core_error_classes[known], use.names = FALSE), "alexnet_error"))
  do.call(alexnet_condition, c(list(r_words(message), classes, python_class = lineage[[1]]), get("fields")))
}

# A message of the core in R's words: NULL, TRUE, FALSE, strings in double quotes, c(...) for Python lists, `$`
# for an entry of a list (the core's data["image"] is data$image), and R's names for what only Python has.
r_words <- function(text) {
  swaps <- c(
    # messages written for both front ends ("TRUE/True"): R's half
    "\\bTRUE/True\\b" = "TRUE", "\\bFALSE/False\\b" = "FALSE", "\\bNULL/None\\b" = "NULL",
    "\\bNone\\b(?! of\\b)" = "NULL", "\\bTrue\\b" = "TRUE", "\\bFalse\\b" = "FALSE",
    "\\btf_config_json\\([^()]*\\)" = "tf_config_from_barrier(barrier)",
    "\\btf_config_json\\b" = "tf_config_from_barrier",
    # an entry of an argument, as the core names it (alexnet.checks.entry): data["image"]
    "(?<![\\w$.])([A-Za-z_]\\w*)\\[\"([A-Za-z_]\\w*)\"\\]" = "\\1$\\2",
    # logged where R shows nothing: a Spark job's whole message is the error's field instead
    "\\(Spark's whole message is logged at DEBUG level: logging\\.getLogger\\('alexnet'\\)\\.setLevel\\('DEBUG'\\)\\)" =
      "(Spark's whole message is the error's `spark_message`: tryCatch(..., error = function(e) e$spark_message))",
    "logging\\.getLogger\\('alexnet'\\)\\.setLevel\\('DEBUG'\\)" =
      "reticulate::import(\"logging\")$getLogger(\"alexnet\")$setLevel(\"DEBUG\")",
    # the kind of a value given, as Python names it (`type(x).__name__`) after "a"/"an": R's
    "\\ba dict/list\\b" = "a list", "\\ba dict\\b" = "a named list", "\\ba str\\b" = "a string",
    "\\ba float\\b" = "a number", "\\ban int\\b" = "a whole number", "\\ba bool\\b" = "a logical",
    "\\ba DataFrame\\b" = "a data frame", "\\ba NoneType\\b" = "NULL"
  )
  for (pattern in names(swaps)) text <- gsub(pattern, swaps[[pattern]], text, perl = TRUE)
  # Python lists of strings or numbers: c(...); empty ones: character(0)
  item <- "(?:'[^'\\n]*'|-?[0-9][0-9.e+-]*|TRUE|FALSE|NULL)"
  # (not an index or a Spark master's cores: no word or bracket just before it, `local[3]`, `x[0]`)
  text <- gsub(paste0("(?<![\\w\\]])\\[(", item, "(?:, ", item, ")*)\\]"), "c(\\1)", text, perl = TRUE)
  text <- gsub("(?<![\\w\\]])\\[\\]", "character(0)", text, perl = TRUE)
  # whole numbers a Python float wrote (c(1.0, 2.0)): as R prints them, c(1, 2)
  vectors <- gregexpr("\\bc\\([^()]*\\)", text, perl = TRUE)
  regmatches(text, vectors) <- lapply(regmatches(text, vectors), function(found) {
    gsub("(?<![\\w.])(-?[0-9]+)\\.0(?=[,)])", "\\1", found, perl = TRUE)
  })
  # 'quoted' Python strings (not apostrophes: no letter before the opening quote, no space inside)
  gsub("(?<![\\w'])'([^'\\s]*)'(?![\\w])", "\"\\1\"", text, perl = TRUE)
}
