#' alexnet: train AlexNet on ImageNet from a bucket, on one machine or a Spark cluster
#'
#' Repartition ImageNet into one zip per category on a pins board ([imagenet_upload()]), fetch a
#' worker's balanced share of the categories ([imagenet_partition()]), train AlexNet
#' ([alexnet_train()]) with the default, mirrored or multi-worker mirrored strategy. The work is done by a Python core reached through reticulate and
#' imported on first use; run [install_alexnet()] once to create its environment.
#'
#' @keywords internal
"_PACKAGE"

.onLoad <- function(libname, pkgname) {
  # The environment TensorFlow starts in (tf-keras for tf.keras, its C++ log quiet, its BFC allocator, glibc's
  # malloc settings that the core makes when imported), declared once in the core's tensorflow.env, which says why
  # each. Set before Python starts, so that it holds also for TensorFlow imported and used before the core, by
  # reticulate::import("tensorflow") or library(tensorflow).
  set_tensorflow_environment(tensorflow_env_file(pkgname))
  # Only a preference, so that a later reticulate::import("tensorflow") in this session picks the
  # environment that has the core; no Python is started here.
  python <- tryCatch(alexnet_python(), error = function(e) NULL)
  if (!is.null(python) && !reticulate::py_available(initialize = FALSE)) {
    try(reticulate::use_python(python, required = FALSE), silent = TRUE)
  }
  # environment variables set in R reach Python after each top-level call (see sync_environment_callback)
  if (environment_callback %in% getTaskCallbackNames()) removeTaskCallback(environment_callback)
  addTaskCallback(sync_environment_callback, name = environment_callback)
  invisible()
}

.onUnload <- function(libpath) {
  if (environment_callback %in% getTaskCallbackNames()) removeTaskCallback(environment_callback)
}

environment_callback <- "alexnet-environment"

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

# Sets each variable of `file` that is not set already (a user's choice wins); those it set, invisibly.
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
