#' TF_CONFIG from a Spark barrier
#'
#' In a `sparklyr::spark_apply(..., barrier = TRUE)` closure, `barrier` is a list with `address`
#' (the `"host:port"` of every task, in partition order) and `partition` (this task's 0-based
#' index). This builds the TF_CONFIG JSON of that task for `MultiWorkerMirroredStrategy`: worker `i`
#' listens on the host of `address[i]` at port `base_port + i`, so tasks that share a host never
#' collide, and worker 0 is the chief.
#'
#' @param barrier The barrier list of a `spark_apply()` closure, or a list of the same shape.
#' @param base_port The port of worker 0; worker `i` uses `base_port + i`.
#' @returns A JSON string for `Sys.setenv(TF_CONFIG = ...)`.
#' @examples
#' if (alexnet_available()) {
#'   tf_config_from_barrier(list(address = c("10.0.0.1:4040", "10.0.0.2:4040"), partition = 1))
#' }
#' @export
tf_config_from_barrier <- function(barrier, base_port = 8000) {
  if (!is.list(barrier) || is.null(barrier$address) || is.null(barrier$partition)) {
    stop("`barrier` must be the barrier list of spark_apply(barrier = TRUE): ",
         "list(address = <\"host:port\" of every task>, partition = <0-based index>).", call. = FALSE)
  }
  core_function("tf_config_json")(
    as.list(as.character(barrier$address)),
    check_count(barrier$partition, "barrier$partition"),
    base_port = check_count(base_port, "base_port", min = 1L)
  )
}
