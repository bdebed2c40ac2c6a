# How a Spark job of alexnet runs through sparklyr (see alexnet_spark_train() and alexnet_spark_evaluate() in
# spark.R): the driver's one call into the core (alexnet.launch.r.r_job) with the R functions that launch the
# barrier stage and the executors' probe, the closures that run on the executors, and the workers' rows made into
# the result.

# The driver's part of an evaluation: the one barrier job of the core (alexnet.launch.r.r_job, see
# spark_barrier_run()), of kind "evaluate"; the workers' counts added up, with the launch that succeeded.
spark_evaluate_run <- function(api, sc, workers, board, options = list()) {
  result <- spark_barrier_run(api, sc, "evaluate", workers, board, options)
  new_alexnet_evaluation(c(result$evaluation, list(attempt = result$attempt)))
}

# The sparklyr functions the launcher uses, as a list, so that tests can hand in fakes; `what` is the call that needs
# them.
sparklyr_api <- function(what = "alexnet_spark_train()") {
  if (!requireNamespace("sparklyr", quietly = TRUE)) {
    alexnet_abort(what, " needs the 'sparklyr' package, which is not installed: ",
                  "install.packages(\"sparklyr\"), then connect with sparklyr::spark_connect().")
  }
  names <- c("sdf_len", "spark_apply", "sdf_collect", "spark_context", "invoke")
  stats::setNames(lapply(names, function(name) getExportedValue("sparklyr", name)), names)
}

# Environment variables of the Spark R workers: where alexnet's Python is.
spark_worker_env <- function(python) {
  env <- list(ALEXNET_PROGRESS = "0")
  if (!is.null(python) && nzchar(python)) {
    env$ALEXNET_PYTHON <- python
    env$RETICULATE_PYTHON <- python
  }
  env
}

# The driver's part of a training: one call into the core (alexnet.launch.r.r_job), which makes the checks, runs
# the probe and the barrier stage through the two R functions it is handed, shows progress, retries and adds up
# the evaluation.
spark_train_run <- function(api, sc, workers, board, options = list()) {
  result <- spark_barrier_run(api, sc, "train", workers, board, options)
  spark_train_result(records_to_df(result$rows), result$evaluation)
}

# A barrier job of `kind` ("train", "evaluate") driven by the core: r_job() gets the Spark settings, `launch` (one
# barrier stage whose tasks each run the core's barrier_row(), see spark_closure(), and return the columns the core
# names), `check` (the executors' probe, which the core runs unless the options say `probe = FALSE`) and the job's
# `options` (their `python` is also the R workers' Python, named in their environment); returns what r_job()
# returns (`rows`, `evaluation`, `attempt`).
spark_barrier_run <- function(api, sc, kind, workers, board, options) {
  python <- options[["python"]]
  context <- api$spark_context(sc)
  conf <- api$invoke(context, "getConf")
  setting <- function(key, default) api$invoke(conf, "get", key, default)
  parallelism <- as.integer(api$invoke(context, "defaultParallelism"))
  driver_host <- setting("spark.driver.host", "")
  env <- spark_worker_env(python)
  # a failed stage's error is returned to the core, whole (an R error reaching Python is shortened); so is an
  # interrupt (Ctrl-C), which sparklyr may turn into an error as it cancels the Spark job: not launched again
  launch <- function(task, columns) {
    interrupted <- FALSE
    tryCatch(withCallingHandlers({
      sdf <- api$sdf_len(sc, as.integer(workers), repartition = as.integer(workers))
      applied <- api$spark_apply(sdf, spark_closure(task, python), barrier = TRUE, columns = spark_columns(columns),
                                 packages = FALSE, env = env)
      frame_records(as.data.frame(api$sdf_collect(applied)))
    }, interrupt = function(c) interrupted <<- TRUE),
    interrupt = function(c) list(interrupted = TRUE),
    error = function(e) if (interrupted) list(interrupted = TRUE) else list(failure = conditionMessage(e)))
  }
  check <- function() {
    tasks <- max(as.integer(workers), parallelism)
    sdf <- api$sdf_len(sc, tasks, repartition = tasks)
    applied <- api$spark_apply(sdf, spark_probe_closure(python), columns = spark_probe_columns,
                               packages = FALSE, env = env)
    frame_records(as.data.frame(api$sdf_collect(applied)))
  }
  do.call(core_module("launch.r")$r_job, c(
    list(kind, workers, board, parallelism, setting("spark.task.cpus", "1"),
         setting("spark.dynamicAllocation.enabled", "false"),
         driver_host = if (nzchar(driver_host)) driver_host else NULL,
         launch = launch, check = check, on_retry = retry_warning,
         # a relaunch waits for a lost Spark worker's task slots, as from Python, and says so at once
         parallelism = function() as.integer(api$invoke(context, "defaultParallelism")), setting = setting,
         on_wait = function(text) message("alexnet: ", text)),
    options
  ))
}

# The core calls this when a launch failed and it launches again, with the failure and what follows and the
# failure's fields (a worker's `worker`, `workers`, `log`): said at once, as the command line logs it (R holds a
# warning back until the call returns), then an R warning of class `alexnet_retry` carrying the fields (the core's
# log of it does not reach an R console).
retry_warning <- function(message, fields = list()) {
  text <- paste(message, collapse = "\n")
  message("alexnet: ", text)
  whole_messages()
  warning(structure(class = c("alexnet_retry", "alexnet_warning", "warning", "condition"),
                    c(list(message = text, call = NULL), fields)))
  invisible(NULL)
}

# The columns of a worker's row as spark_apply() wants them (R types), from the core's names and Python types.
spark_columns <- function(columns) {
  types <- unlist(columns)
  r_types <- c(int = "integer", float = "numeric", str = "character", bool = "logical")
  stats::setNames(unname(r_types[types]), names(types))
}

spark_probe_columns <- c(host = "character", python = "character", ok = "logical", error = "character")

# The rows of a data frame as a list of records (named lists), as the core takes them.
frame_records <- function(frame) {
  lapply(seq_len(nrow(frame)), function(i) as.list(frame[i, , drop = FALSE]))
}

# The barrier closure of every job, whatever its kind: all it needs travels in its environment (the core's task,
# which names its kind, and the Python), and the work is spark_task() of the alexnet installed on the worker.
spark_closure <- function(task, python) {
  force(task)
  force(python)
  function(df, barrier) {
    spark_task(barrier, task, python)
  }
}

# One barrier task: point reticulate at alexnet's Python, then the core's barrier_row(addresses, partition, task),
# which runs the task's kind of work in a fresh Python process; a one-row data frame with its columns, or the
# worker's error.
spark_task <- function(barrier, task, python) {
  barrier <- barrier_list(barrier)
  if (!is.null(python) && nzchar(python)) {
    Sys.setenv(ALEXNET_PYTHON = python, RETICULATE_PYTHON = python)
  }
  if (!nzchar(Sys.getenv("ALEXNET_PROGRESS"))) Sys.setenv(ALEXNET_PROGRESS = "0")
  row <- core_module("launch.r")$barrier_row(as.list(as.character(barrier$address)), barrier$partition, task)
  if (!is.null(row$failure)) alexnet_abort(row$failure)  # the worker's error, whole, for the driver
  row[] <- lapply(row, function(value) if (is.null(value)) NA else value)
  as.data.frame(row, stringsAsFactors = FALSE)
}

# The probe closure runs on executors that may lack alexnet, so it refers to nothing of alexnet's
# namespace (which could not be unserialized there): its environment holds only `python`.
spark_probe_closure <- function(python = NULL) {
  probe <- function(df) {
    host <- Sys.info()[["nodename"]]
    shown <- if (is.null(python)) "" else python
    failed <- function(error) data.frame(host = host, python = shown, ok = FALSE, error = error)
    if (!requireNamespace("alexnet", quietly = TRUE)) {
      return(failed(paste0("the R package alexnet is not installed in the R library of this worker (",
                           paste(.libPaths(), collapse = ", "), ")")))
    }
    row <- utils::getFromNamespace("spark_probe_row", "alexnet")
    tryCatch(row(python), error = function(e) failed(conditionMessage(e)))
  }
  environment(probe) <- list2env(list(python = python), parent = baseenv())
  probe
}

# What the probe checks on a worker once alexnet is found: that `python` (the Python a worker's process
# will run) imports the core and TensorFlow, started with the environment a worker's process gets (without
# R's library path). Reticulate finds alexnet's Python through the environment spark_apply() gives the R
# workers.
spark_probe_row <- function(python = NULL) {
  environ <- core_module("child", convert = FALSE)$python_environment()
  row <- core_module("launch.probe_task")$check_python(python, environ = environ)
  data.frame(host = as.character(row$host), python = as.character(row$python), ok = isTRUE(row$ok),
             error = if (is.null(row$error)) "" else as.character(row$error), stringsAsFactors = FALSE)
}

# Rows collected from the workers, in worker order, with each history parsed; with the job's evaluation (or NULL).
spark_train_result <- function(frame, evaluation = NULL) {
  frame <- frame[order(frame$worker), , drop = FALSE]
  rownames(frame) <- NULL
  json <- reticulate::import("json", convert = TRUE)
  frame$history <- lapply(frame$history, function(text) new_alexnet_history(simplify_py(json$loads(text))))
  new_alexnet_spark_run(frame, if (!is.null(evaluation)) new_alexnet_evaluation(evaluation))
}
