#' alexnet: train AlexNet on ImageNet from a bucket, on one machine or a Spark cluster
#'
#' Repartition ImageNet into one zip per category on a pins board ([imagenet_upload()]), fetch a
#' worker's balanced share of the categories ([imagenet_partition()]), train AlexNet
#' ([alexnet_train()]) with the default, mirrored or multi-worker mirrored strategy. The work is done by a Python core reached through reticulate and
#' imported on first use; run [install_alexnet()] once to create its environment.
#'
#' @section Progress bars, warnings and errors:
#' Long work (an upload, a fetch, the check of the images before training, an evaluation, a prediction) draws
#' progress bars on standard error from the Python core. They are not R messages, so `suppressMessages()` leaves
#' them: `Sys.setenv(ALEXNET_PROGRESS = "0")` turns them off (variables set in R reach Python after each top-level
#' call). Keras' lines during training follow `alexnet_train(verbose = )`: 0 none, 1 a progress bar where bars are
#' drawn on a terminal (else one line per epoch), 2 one line per epoch. What the core warns of (images left out, a
#' setting that does nothing here) arrives as R warnings of class `alexnet_warning`, and its errors as R errors of
#' the classes in [alexnet_errors].
#'
#' @section Environment variables:
#' `library(alexnet)` sets the variables of the core's `tensorflow.env` that are not set already, so that
#' TensorFlow started later in the session (by alexnet, or by `reticulate::import("tensorflow")`) starts with them:
#' `TF_USE_LEGACY_KERAS=1` (`tf.keras` is then Keras 2, tf-keras, in this session), TensorFlow's log level, its BFC
#' allocator and glibc's malloc settings (`ALEXNET_MALLOC`). Unloading the package unsets those it set, as long as
#' Python has not started.
#'
#' @keywords internal
"_PACKAGE"

.onLoad <- function(libname, pkgname) {
  # The environment TensorFlow starts in (tf-keras for tf.keras, its C++ log quiet, its BFC allocator, glibc's
  # malloc settings that the core makes when imported), declared once in the core's tensorflow.env, which says why
  # each. Set before Python starts, so that it holds also for TensorFlow imported and used before the core, by
  # reticulate::import("tensorflow") or library(tensorflow).
  .alexnet$environment_set <- set_tensorflow_environment(tensorflow_env_file(pkgname))
  # Only a preference, so that a later reticulate::import("tensorflow") in this session picks the
  # environment that has the core; no Python is started here.
  python <- tryCatch(alexnet_python(), error = function(e) NULL)
  if (!is.null(python) && !reticulate::py_available(initialize = FALSE)) {
    try(reticulate::use_python(python, required = FALSE), silent = TRUE)
  }
  # environment variables set in R reach Python after each top-level call (see sync_environment_callback)
  if (environment_callback %in% getTaskCallbackNames()) removeTaskCallback(environment_callback)
  addTaskCallback(sync_environment_callback, name = environment_callback)
  # TensorFlow's start-up lines left out also when it is imported before the core, as Python starts
  if (reticulate::py_available(initialize = FALSE)) filter_tensorflow_import()
  else setHook("reticulate.onPyInit", filter_tensorflow_import, action = "append")
  invisible()
}

.onUnload <- function(libpath) {
  if (environment_callback %in% getTaskCallbackNames()) removeTaskCallback(environment_callback)
  hooks <- getHook("reticulate.onPyInit")
  setHook("reticulate.onPyInit", Filter(function(hook) !identical(hook, filter_tensorflow_import), hooks), "replace")
  # the variables .onLoad set (and nobody changed since) go again, unless Python started with them
  set <- .alexnet$environment_set
  if (length(set) && !reticulate::py_available(initialize = FALSE)) {
    unchanged <- names(set)[Sys.getenv(names(set)) == set]
    if (length(unchanged)) Sys.unsetenv(unchanged)
  }
}

environment_callback <- "alexnet-environment"

# TensorFlow's first import in this session, wherever it comes from (`reticulate::import("tensorflow")` or
# library(tensorflow) before any call of the package), without the start-up lines nobody acts on, as the core's own
# import: the core's finder put before Python's, when the Python that runs has the core; nothing otherwise.
filter_tensorflow_import <- function() {
  try(reticulate::import("alexnet.tfimport")$filter_tensorflow_import(), silent = TRUE)
  invisible()
}

# The core's tensorflow.env as installed with `package` ("" when it is not).
tensorflow_env_file <- function(package = "alexnet") {
  system.file("python", "alexnet", "tensorflow.env", package = package)
}

# The variables of the core's tensorflow.env (one NAME=value a line, `#` comments): a named character vector.
tensorflow_environment <- function(file = tensorflow_env_file()) {
  if (!nzchar(file) || !file.exists(file)) return(stats::setNames(character(), character()))
  lines <- trimws(readLines(file, warn = FALSE))
  lines <- lines[nzchar(lines) & !startsWith(lines, "#")]
  stats::setNames(sub("^[^=]*=", "", lines), sub("=.*$", "", lines))
}

# Sets each variable of `file` that is not set already, or set empty (a user's choice wins; the core reads an empty
# one alike); those it set, invisibly.
set_tensorflow_environment <- function(file = tensorflow_env_file()) {
  values <- tensorflow_environment(file)
  unset <- values[!nzchar(Sys.getenv(names(values)))]
  if (length(unset)) do.call(Sys.setenv, as.list(unset))
  invisible(unset)
}

#' Pipe operator
#'
#' Re-exported from magrittr, so that `imagenet_partition(0) %>% alexnet_train()` works after
#' `library(alexnet)`.
#'
#' @name %>%
#' @rdname pipe
#' @keywords internal
#' @importFrom magrittr %>%
#' @usage lhs \%>\% rhs
#' @param lhs A value or the magrittr placeholder.
#' @param rhs A function call using the magrittr semantics.
#' @returns The result of calling `rhs(lhs)`.
#' @export
NULL
