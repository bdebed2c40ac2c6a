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
  # The core trains with tf-keras (Keras 2): Keras 3's fit() fails under MultiWorkerMirroredStrategy.
  # Python reads this when TensorFlow is first imported, also by reticulate::import("tensorflow").
  if (!nzchar(Sys.getenv("TF_USE_LEGACY_KERAS"))) Sys.setenv(TF_USE_LEGACY_KERAS = "1")
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
