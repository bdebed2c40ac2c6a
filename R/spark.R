# The Spark jobs' exports, from their arguments to the job's options: alexnet_spark_train(),
# alexnet_spark_evaluate(), tf_config_from_barrier() and tf_version(); the job itself runs in spark-job.R.

# `barrier`, the list spark_apply(barrier = TRUE) hands its closure, with `address` a character vector (sparklyr 1.8
# gives a list of strings); an error unless it has that shape.
barrier_list <- function(barrier) {
  if (!is.list(barrier) || is.null(barrier$address) || is.null(barrier$partition)) {
    alexnet_abort("`barrier` must be the barrier list of spark_apply(barrier = TRUE): ",
                  "list(address = <\"host:port\" of every task>, partition = <0-based index>).")
  }
  if (is.list(barrier$address) &&
      all(vapply(barrier$address, function(a) is.character(a) && length(a) == 1L, logical(1)))) {
    barrier$address <- unlist(barrier$address)
  }
  barrier
}

#' TF_CONFIG from a Spark barrier
#'
#' In a `sparklyr::spark_apply(..., barrier = TRUE)` closure, `barrier` is a list with `address`
#' (the `"host:port"` of every task, in partition order: a list of strings, as sparklyr gives it, or a character
#' vector) and `partition` (this task's 0-based
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
tf_config_from_barrier <- function(barrier) {
  if (missing(barrier)) {
    alexnet_abort("`barrier` is missing: pass the barrier list spark_apply(barrier = TRUE) hands its closure.")
  }
  barrier <- barrier_list(barrier)
  if (!is.character(barrier$address) || !length(barrier$address) || anyNA(barrier$address) ||
      !all(grepl(":[0-9]+$", barrier$address))) {
    alexnet_abort("`barrier$address` must be the \"host:port\" of every task, as spark_apply(barrier = TRUE) gives ",
                  "them, not ", show_value(barrier$address), ".")
  }
  partition <- check_arg(barrier$partition, "barrier$partition", "count>=0")
  args <- checked_args("tf_config_from_barrier", "base_port")
  do.call(core_module("train.cluster")$tf_config_json,
          c(list(as.list(barrier$address), as.integer(partition)), args))
}
# `base_port` with the default of the core's declaration of a Spark job's options (R/launch-options.R)
tf_config_from_barrier <- with_declared(tf_config_from_barrier, declared_formals(launch_options["base_port"]))

#' Train AlexNet across a Spark cluster
#'
#' Runs one Spark barrier task per worker through `sparklyr::spark_apply(barrier = TRUE)`. Task `k`
#' fetches partition `k` of `workers` from `board`, sets TF_CONFIG from the barrier addresses (see
#' [tf_config_from_barrier()]) and trains with `MultiWorkerMirroredStrategy`, so the workers train one
#' model in step, each on its own share of the categories. Every cluster node needs R with alexnet
#' and a Python environment with the core at the same path (`python`, passed to the Spark R workers in
#' their environment): run [install_alexnet()] on every node.
#'
#' The driver makes one call into the core, which checks first: more workers than Spark task slots (a
#' barrier stage starts all its tasks at once, or waits), than categories on the board, a board that
#' cannot be read, a training argument [alexnet_train()] does not take, a `checkpoint_dir` or
#' `model_dir` that cannot be written, or checkpoints in `checkpoint_dir` that every worker would refuse to
#' resume (of another checkpoint format, written for another model, or trained on other classes than the
#' board's, told by the history and the model card beside them) are errors before anything starts, in the words
#' the workers would use. With `probe`, a short Spark job then
#' checks that every R worker finds alexnet and a Python that imports the core and TensorFlow, and names the
#' executors that do not. While the workers train, the chief's progress (epoch, step, loss, accuracy, images per
#' second) is shown here. When one task fails, Spark stops the others; the error leads with the worker's own
#' Python error and says where its whole log is (the task hands it to the driver through the monitor that shows
#' the progress, as sparklyr's own error says only that an R worker failed: with `progress = FALSE`, only that is
#' said). An interrupt (Ctrl-C) cancels the Spark job and stops with an error that says so, without a relaunch;
#' the workers, whose R processes a cancelled sparklyr job leaves running, stop once the driver no longer answers
#' them (within a minute). With `retries`, the barrier stage is launched again, and training
#' resumes from the last checkpoint in `checkpoint_dir`.
#'
#' With `evaluate = TRUE`, the same job ends with the model's evaluation: after the last epoch each worker scores
#' the validation images of its partition with the model it holds (`crops` as asked), and the driver adds the
#' counts. Every category is in one partition, so the result equals [alexnet_evaluate()] of the saved model on
#' one machine over every validation image of the board, without a second job that loads the model again on every
#' worker. The workers add their counts among themselves before the model is saved, so the chief writes the model
#' card (`model_dir`'s `alexnet-model.json`) and, with `model_pin`, the pin's one new version once, with the
#' evaluation in the card: `alexnet_model(board, model_pin)$evaluation` reads it back.
#'
#' GPUs: a task launched from R cannot tell which GPUs Spark assigned it (`spark.task.resource.gpu.amount`):
#' sparklyr's barrier list carries only the tasks' addresses and the partition, and neither its R worker nor the
#' Python that worker starts sees Spark's task context. Every worker then computes on every GPU of its node, so two
#' tasks on one node would share them: run one task a node (one executor a node, with
#' `spark.executor.resource.gpu.amount` equal to `spark.task.resource.gpu.amount`), or one task an executor on
#' executors that see only their own GPUs (YARN and Kubernetes containers can isolate them). The Python launcher
#' (`alexnet.alexnet_spark_train()`, `alexnet spark-train`) reads each task's GPUs and holds its worker to them.
#'
#' @param sc A `sparklyr` connection (`sparklyr::spark_connect()`).
#' @param workers Number of workers, one barrier task each.
#' @param board The board every worker reads its partition from (see [imagenet_categories()]); `NULL` for
#'   the default. With `model_pin`, the model is pinned there too, unless `model_board` names another.
#' @param ... Arguments for [alexnet_train()] on every worker: `epochs`, `batch_size` (per worker
#'   without GPUs, per GPU with them), `image_size` (one size, or several trained in order, with
#'   `image_size_epochs`), `learning_rate`, `lr_scaling`, `warmup_epochs`, `precision`,
#'   `checkpoint_dir` and `model_dir` (`gs://` or `s3://` storage every node reaches),
#'   `checkpoint_every`, `collective_timeout` (seconds a worker waits for the others), ... See
#'   "Faster training" in [alexnet_train()]: `learning_rate` is the rate for a global batch of 128,
#'   and the global batch is `workers` times `batch_size` (times the GPUs of each), so 16 workers of
#'   batch 32 train at 0.01 * 512 / 128 = 0.04 after a 5-epoch warm-up unless `lr_scaling = "none"`;
#'   `precision = NULL` lets each worker's hardware choose (keep the nodes alike, or name it). The
#'   size schedule and the precision are checked here, before any Spark job.
#' @eval declared_params(training_job_options)
#' @eval declared_params(launch_options, launch_defaults)
#' @details The job's options (`evaluate`, `crops`, then the launch options from `base_port` to `probe`) are
#'   declared once in the core (`alexnet.launch.options`), as [alexnet_spark_evaluate()]'s launch options are; from
#'   R, `python` defaults to the Python alexnet uses here ([alexnet_python()]). They come after `...`, so they are
#'   named in full.
#'
#' When a launch fails and `retries` allow another, the failure and the relaunch are said at once (a message,
#' `alexnet: Worker 1 of 2 failed: ...`), and raised as an R warning of class `alexnet_retry` (and
#' `alexnet_warning`) that carries the worker's error: its `worker`, `workers` and `log`, as [alexnet_errors] says. After a lost Spark worker, the relaunch first waits for
#' the application's task slots to return (as long as Spark waits for a barrier stage's), with a message as it starts
#' and ends.
#'
#' @returns An `alexnet_spark_run`: a data frame with one row per worker (`worker`, `address` (its Spark task's),
#'   `tf_address` (the host and port its TensorFlow listened at, which the printed lines give), `chief`,
#'   `categories`, `train_images`, `steps`, `epochs`, final `loss`, `accuracy` and `val_accuracy`,
#'   `images_per_second` (`NaN` when no step ran), `weights_sha256`, the chief's `model_path`, `model_pin`
#'   (`NAME@VERSION`) and `model_board` (where it saved and published the model, `""` on the other workers),
#'   `log` (`host:path`, where the worker's log is kept on its host: see `ALEXNET_LOG_DIR`), `attempt`, ...),
#'   whose `history` column is a list of each worker's [alexnet_history][alexnet_history]. With
#'   `evaluate = TRUE`, `$evaluation` is the [alexnet_evaluation][alexnet_evaluate] of the model over every
#'   validation image of the board (with `workers`, one row per worker, and `model_pin`, the pin version that
#'   records it), and the rows have each worker's share (`eval_images`, `eval_top1_correct`, ...). It prints one
#'   line per worker (ending with where its log is), that nothing was left to train when the run was called again
#'   on checkpoints whose epochs were all trained (as the chief's history says where it resumed), whether every
#'   worker holds the same weights, the digest of the chief's (`Weights: sha256 ...`), the chief's
#'   `Communication: ...` (its history's `params$communication_advice`), `Model: ...` and `Model pin: ...`, and
#'   the evaluation; `as.data.frame()` gives the rows without the `history` column.
#' @examples
#' \dontrun{
#' sc <- sparklyr::spark_connect(master = "yarn")
#' run <- alexnet_spark_train(sc, workers = 16, board = "gs://my-bucket/imagenet", epochs = 10,
#'                            checkpoint_dir = "gs://my-bucket/runs/1", model_pin = "alexnet", retries = 2,
#'                            evaluate = TRUE, crops = 10)
#' run$evaluation
#' }
#' @export
alexnet_spark_train <- function(sc, workers, board = NULL, ...) {
  args <- checked_args("alexnet_spark_train", names(formals()))
  options <- spark_job_options(args)
  spark_train_run(sparklyr_api(), sc, args$workers, args[["board"]], options)
}
# the job's options of the core's declaration, after `...` (see with_declared())
alexnet_spark_train <- with_declared(alexnet_spark_train, c(declared_formals(training_job_options),
                                                            declared_formals(launch_options, launch_defaults)),
                                     after_dots = TRUE)

#' Evaluate a trained AlexNet across a Spark cluster
#'
#' The same barrier job as [alexnet_spark_train()]: one Spark barrier task per worker, each evaluating the model
#' on its share of the board's validation images; the counts are added up into one evaluation, equal to
#' [alexnet_evaluate()] on one machine. The same care too: every check before any Spark job, the executors'
#' probe, each worker's progress shown here, `timeout`, and `retries` (an evaluation is idempotent: a failed one
#' is launched again whole, said at once and with an R warning of class `alexnet_retry` that carries the worker's
#' error, as [alexnet_spark_train()] says).
#' To evaluate a model as its training ends, in the training's own job, use
#' `alexnet_spark_train(..., evaluate = TRUE)`. On GPUs, see [alexnet_spark_train()]: from R, every worker
#' computes on every GPU of its node.
#'
#' @param sc A `sparklyr` connection (`sparklyr::spark_connect()`).
#' @param model An [alexnet_model()], or the location of a saved model every worker reaches.
#' @param workers Number of workers, one barrier task each.
#' @param board The board whose validation images are evaluated, read only (see [imagenet_categories()]);
#'   `NULL` for the default.
#' @eval declared_params(evaluation_options)
#' @eval declared_params(launch_options, launch_defaults)
#' @param ... Nothing: a name given there is refused, naming the nearest argument.
#' @details Its options are named like [alexnet_spark_train()]'s: the options of an evaluation (`crops` to
#'   `image_size`, as [alexnet_evaluate()] takes them), then the launch options every Spark job takes (`base_port`
#'   to `probe`), all declared once in the core (`alexnet.model.options`, `alexnet.launch.options`). From R,
#'   `python` defaults to the Python alexnet uses here ([alexnet_python()]).
#' @returns An `alexnet_evaluation` (see [alexnet_evaluate()]) whose `workers` is a data frame with one row per worker
#'   (its `seconds` that worker's scoring, its `log` (`host:path`, see `ALEXNET_LOG_DIR`) where the worker's log is
#'   kept), `images_per_second` the workers' own (the images over the slowest worker's `seconds`), `seconds` the Spark
#'   stage's (with the fetch and the model's load), and `attempt` the launch that succeeded (1 for the first). It prints
#'   as [alexnet_evaluate()]'s, after a line naming the model scored, the Spark workers and the attempt.
#' @examples
#' \dontrun{
#' sc <- sparklyr::spark_connect(master = "yarn")
#' model <- alexnet_model(board = "gs://my-bucket/imagenet")
#' alexnet_spark_evaluate(sc, model, workers = 16, board = "gs://my-bucket/imagenet", crops = 10)
#' }
#' @export
alexnet_spark_evaluate <- function(sc, model, workers, board = NULL, ...) {
  args <- checked_args("alexnet_spark_evaluate", names(formals()), others = FALSE)
  if (missing(sc)) sc_missing()
  if (missing(model)) model_missing("the location of a saved model")
  options <- spark_job_options(args)
  spark_evaluate_run(sparklyr_api("alexnet_spark_evaluate()"), sc, args$workers, args[["board"]], options)
}
# the options of an evaluation, then the launch options, from the core's declarations
alexnet_spark_evaluate <- with_declared(alexnet_spark_evaluate, c(declared_formals(evaluation_options),
                                                                  declared_formals(launch_options, launch_defaults)))

#' TensorFlow version of alexnet's Python environment
#'
#' Like `tensorflow::tf_version()`, for code that imports TensorFlow with
#' `reticulate::import("tensorflow")` instead of attaching the 'tensorflow' R package (as the
#' `spark_apply()` closure of the original r-tensorflow/alexnet does): the major and minor version of
#' the TensorFlow that alexnet's Python environment imports, or `NULL` when there is none. It prints
#' nothing (TensorFlow's start-up lines are hidden unless `ALEXNET_TF_LOGS=1`) and has no other effect.
#'
#' `TF_CONFIG` set with `Sys.setenv()` reaches TensorFlow at the next call into alexnet (this one
#' included) and after each top-level call, so a strategy created after `tf_version()`, or on a line of
#' its own, sees it.
#'
#' @returns A [numeric_version], or `NULL`.
#' @examples
#' tf_version()
#' @export
tf_version <- function() {
  tryCatch({
    # through the core, which imports TensorFlow without its start-up lines; else TensorFlow itself
    version <- tryCatch(core_module("tfimport")$tf$`__version__`, error = function(e) NULL)
    if (is.null(version)) {
      use_alexnet_python()
      version <- reticulate::import("tensorflow")$`__version__`
    }
    numeric_version(sub("^([0-9]+\\.[0-9]+).*$", "\\1", version))
  }, error = function(e) NULL)
}

# The options of a Spark job as spark_barrier_run() takes them: the job's checked `args` but `sc`, `workers` and
# `board` (taken apart), and `python`, the workers' Python, also where the caller left it out: R's default
# (launch_defaults: the Python alexnet uses here), not the core's. `env` is the frame of the job's exported
# function.
spark_job_options <- function(args, env = parent.frame()) {
  # the connection and the workers every Spark job needs, said alike by each
  if (eval(quote(missing(sc)), env)) sc_missing()
  if (eval(quote(missing(workers)), env)) {
    alexnet_abort("`workers` is missing: give the number of workers, one barrier task each.")
  }
  python <- check_arg(formal_value("python", env), "python", "location?")
  c(args[setdiff(names(args), c("sc", "workers", "board", "python"))], list(python = python))
}

# The error of a Spark job called without its connection; with how to install sparklyr where it is not.
sc_missing <- function() {
  installed <- requireNamespace("sparklyr", quietly = TRUE)
  alexnet_abort("`sc` is missing: pass the connection sparklyr::spark_connect(...) returns",
                if (installed) "." else " (the 'sparklyr' package, which is not installed: install.packages(\"sparklyr\")).")
}
