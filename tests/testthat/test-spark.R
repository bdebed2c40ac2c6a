test_that("TF_CONFIG from a sparklyr barrier list: one port per task, this task's index", {
  skip_if_no_alexnet()
  barrier <- list(address = c("127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003"), partition = 2L)
  config <- jsonlite::fromJSON(tf_config_from_barrier(barrier))
  expect_equal(config$cluster$worker, c("127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002"))
  expect_equal(config$task$type, "worker")
  expect_equal(config$task$index, 2L)

  hosts <- list(address = c("10.1.0.5:7077", "10.1.0.6:7077"), partition = 0)
  config <- jsonlite::fromJSON(tf_config_from_barrier(hosts, base_port = 9100))
  expect_equal(config$cluster$worker, c("10.1.0.5:9100", "10.1.0.6:9101"))
  expect_equal(config$task$index, 0L)

  # as sparklyr 1.8 hands it to a barrier closure: `address` a list (it was refused as "a list of length 2")
  listed <- list(address = list("10.1.0.5:7077", "10.1.0.6:7077"), partition = 1L)
  config <- jsonlite::fromJSON(tf_config_from_barrier(listed, base_port = 9100))
  expect_equal(config$cluster$worker, c("10.1.0.5:9100", "10.1.0.6:9101"))
  expect_equal(config$task$index, 1L)
})

test_that("a malformed barrier list gets an error that shows the expected shape", {
  expect_error(tf_config_from_barrier(list(partition = 0)), "barrier = TRUE")
  skip_if_no_alexnet()
  expect_error(tf_config_from_barrier(list(address = "h:1", partition = 3)), "0\\.\\.0")
  # what a barrier list is made of, named as it is reached, before the core
  for (partition in list(NA, NA_integer_, 1.5, "1", c(0, 1))) {
    expect_error(tf_config_from_barrier(list(address = c("a:1", "b:2"), partition = partition)),
                 "^`barrier\\$partition` must be a whole number >= 0, not ", class = "alexnet_error")
  }
  for (address in list(c("a:1", NA), 1:2, character(0), "a", list("a:1", 2L), list("a:1", c("b:2", "c:3")))) {
    expect_error(tf_config_from_barrier(list(address = address, partition = 0)),
                 "^`barrier\\$address` must be the \"host:port\" of every task", class = "alexnet_error")
  }
  expect_match(tf_config_from_barrier(list(address = c("a:1", "b:2"), partition = 1L)), "\"index\": 1")
})

test_that("without sparklyr, alexnet_spark_train() says what to install", {
  skip_if(requireNamespace("sparklyr", quietly = TRUE), "sparklyr is installed")
  sc <- structure(list(), class = "spark_connection")
  expect_error(alexnet_spark_train(sc, workers = 2, board = tempdir()),
               "^alexnet_spark_train\\(\\) needs the 'sparklyr' package")
  expect_error(alexnet_spark_evaluate(sc, "model", workers = 2, board = tempdir()),
               "^alexnet_spark_evaluate\\(\\) needs the 'sparklyr' package")
})

# A barrier closure as a Spark task gets it (after sparklyr's serialize() round trip), called with `barrier`.
# A board of two categories of two small images at `dir`/b (the workers fail or stop before training on it).
tiny_board <- function(dir) {
  src <- imagenet_synthetic(file.path(dir, "src"), classes = 2, images_per_class = 2, val_per_class = 0,
                            max_side = 48)
  upload_without_validation(src$path, board = file.path(dir, "b"), workers = 1)
  file.path(dir, "b")
}

run_shipped_closure <- function(task, barrier) {
  closure <- alexnet:::spark_closure(task, NULL)
  unserialize(serialize(closure, NULL))(data.frame(id = 1L), barrier)
}

test_that("a barrier closure given a list that is not a barrier list says what it expects", {
  task <- list(kind = "train", board = "/boards/b", workers = 1L, base_port = 9000L, fetch_workers = 1L)
  expect_error(run_shipped_closure(task, list(partition = 0)),
               "`barrier` must be the barrier list of spark_apply\\(barrier = TRUE\\)")
})

test_that("the training and the evaluation closures run their barrier partition's worker and fail with its error", {
  skip_if_no_alexnet()
  missing <- file.path(withr::local_tempdir(), "no-board")
  barrier <- list(address = c("127.0.0.1:41001", "127.0.0.1:41002"), partition = 1L)
  train <- list(kind = "train", board = missing, workers = 2L, base_port = 9000L, fetch_workers = 1L,
                settings = list(epochs = 1))
  evaluate <- list(kind = "evaluate", board = missing, workers = 2L, fetch_workers = 1L,
                   evaluation = list(model = "/models/none", crops = 1L, batch_size = 8L))
  worker_error <- reticulate::import("alexnet.launch.worker")$WorkerError  # the class itself, not a wrapped call
  # the package's own errors, which say what to change: their words alone
  cases <- list(list(train, "^board folder .*no-board does not exist"),
                list(evaluate, "the model /models/none does not exist"))
  for (case in cases) {
    message <- tryCatch(run_shipped_closure(case[[1]], barrier), error = conditionMessage)
    # the message the driver reads the worker's error from: worker 1 of 2, with its own error
    failure <- worker_error$from_failure(message)
    expect_false(is.null(failure), info = message)
    expect_equal(c(failure$worker, failure$workers), c(1L, 2L))
    expect_match(failure$error, case[[2]], info = case[[1]]$kind)
    expect_true(failure$known, info = case[[1]]$kind)
  }
})

test_that("the Spark R workers are told where alexnet's Python is", {
  env <- alexnet:::spark_worker_env("/venv/bin/python")
  expect_equal(env[c("ALEXNET_PYTHON", "RETICULATE_PYTHON")], list(ALEXNET_PYTHON = "/venv/bin/python",
                                                                   RETICULATE_PYTHON = "/venv/bin/python"))
})

test_that("on an R worker without alexnet, the probe reports it instead of failing to unserialize", {
  skip_if_not_installed("callr")
  probe <- alexnet:::spark_probe_closure("/opt/python/bin/python")
  # a fresh R whose library is only R's own, as on a node where alexnet was never installed
  row <- callr::r(function(probe) {
    loaded <- isNamespaceLoaded("alexnet")  # unserializing the closure did not need alexnet
    assign(".lib.loc", .Library, envir = environment(.libPaths))  # only R's own library, as on a bare node
    c(probe(data.frame(id = 1L)), alexnet_loaded = loaded)
  }, args = list(probe))
  expect_false(row$alexnet_loaded)
  expect_false(row$ok)
  expect_equal(row$python, "/opt/python/bin/python")
  expect_match(row$error, "R package alexnet is not installed")
})

test_that("more workers than Spark task slots is an error before anything is launched", {
  skip_if_no_alexnet()
  calls <- new.env()
  api <- fake_sparklyr(calls, slots = 2L)
  expect_error(alexnet:::spark_train_run(api, "sc", 3, tempdir(), list()), "3 workers need 3 task slots.*use `workers` <= 2")
  expect_null(calls$sdf_len)
  expect_null(calls$spark_apply)
  expect_s3_class(tf_version(), "numeric_version")
})

test_that("an executor whose Python lacks the core fails the probe, which names it and the fix", {
  skip_if_no_alexnet()
  calls <- new.env()
  board <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(board, "src"), classes = 2, images_per_class = 2, val_per_class = 0,
                            max_side = 48)
  upload_without_validation(src$path, board = file.path(board, "b"), workers = 1)
  python <- Sys.which("true")  # an executable that is not a Python with alexnet
  expect_error(
    alexnet:::spark_train_run(fake_sparklyr(calls), "sc", 1, file.path(board, "b"), list(epochs = 1, python = python)),
    paste0("cannot run alexnet on 1 executor.*", python, ".*install_alexnet\\(\\).*ALEXNET_PYTHON")
  )
  expect_null(calls$probe$barrier)
  expect_equal(unname(calls$probe$columns), c("character", "character", "logical", "character"))
  expect_null(calls$spark_apply)
})

test_that("alexnet_spark_train's spark_apply() call and closure run a real one-worker job, with progress, ending with its evaluation", {
  skip_unless_long()
  skip_if_no_alexnet()
  skip_if_not_installed("callr")
  dir <- withr::local_tempdir()
  port <- free_port()
  stderr <- file.path(dir, "stderr.txt")
  out <- callr::r(function(dir, port, fake_sparklyr) {
    library(alexnet)
    src <- imagenet_synthetic(file.path(dir, "src"), classes = 2, images_per_class = 8, val_per_class = 3,
                              max_side = 64)
    board <- file.path(dir, "board")
    imagenet_upload(src$path, board = board, workers = 2)
    calls <- new.env()
    model_dir <- file.path(dir, "model")
    result <- alexnet:::spark_train_run(
      fake_sparklyr(calls, driver_host = "127.0.0.1"), "fake-connection", 1, board,
      list(epochs = 2, batch_size = 4, image_size = 64, dense_units = 16, base_port = port,
           cache_dir = file.path(dir, "cache"), progress = TRUE, evaluate = TRUE, model_dir = model_dir,
           model_pin = "alexnet", python = alexnet_python())
    )
    pinned <- alexnet_model(board, "alexnet", cache_dir = file.path(dir, "models"))
    versions <- reticulate::import("alexnet.storage.board")$open_board(board)$pins$pin_versions("alexnet",
                                                                                                as_df = FALSE)
    alone <- alexnet_evaluate(model_dir, board = board, cache_dir = file.path(dir, "alone"))
    # the saved model scored again by the evaluation job: two barrier tasks (run one after the other here), whose
    # first launch fails as a lost task does and is launched again whole
    again <- new.env()
    api <- fake_sparklyr(again, address = c("127.0.0.1:41001", "127.0.0.1:41002"))
    apply <- api$spark_apply
    api$spark_apply <- function(x, f, ...) {
      if (isTRUE(list(...)$barrier) && is.null(again$failed)) {
        again$failed <- TRUE
        stop("Job aborted due to stage failure: a barrier task was lost", call. = FALSE)
      }
      apply(x, f, ...)
    }
    warnings <- character()
    split <- withCallingHandlers(
      alexnet:::spark_evaluate_run(api, "sc", 2, board, list(model = model_dir, cache_dir = file.path(dir, "split"),
                                                             retries = 1, timeout = 300, probe = FALSE)),
      alexnet_retry = function(w) {
        warnings <<- c(warnings, conditionMessage(w))
        invokeRestart("muffleWarning")
      }
    )
    list(result = result, printed = utils::capture.output(print(result)), calls = as.list(calls),
         categories = src$categories, python = alexnet_python(), alone = unclass(alone), split = unclass(split),
         warnings = warnings, evaluation_columns = names(again$spark_apply$columns), launches = again$launches,
         card = jsonlite::fromJSON(file.path(model_dir, "alexnet-model.json")),
         pinned = unclass(pinned), versions = length(versions))
  }, args = list(dir, port, fake_sparklyr), stderr = stderr,
  env = c(callr::rcmd_safe_env(), ALEXNET_PROGRESS = "0"))

  calls <- out$calls
  expect_equal(calls$sdf_len[[1]], list(sc = "fake-connection", n = 2L, repartition = 2L))  # the probe
  expect_equal(calls$sdf_len[[2]], list(sc = "fake-connection", n = 1L, repartition = 1L))
  expect_null(calls$probe$barrier)
  apply <- calls$spark_apply
  expect_true(apply$barrier)
  expect_false(apply$packages)
  expect_equal(apply$env$ALEXNET_PYTHON, out$python)
  expect_equal(apply$env$RETICULATE_PYTHON, out$python)
  expect_equal(unname(apply$columns[c("worker", "loss", "chief", "history", "eval_images", "eval_protocol")]),
               c("integer", "numeric", "logical", "character", "integer", "character"))

  result <- out$result
  expect_equal(nrow(result), 1L)
  expect_equal(names(result), c(names(apply$columns), "attempt"))
  expect_equal(result$attempt, 1L)
  expect_equal(result$worker, 0L)
  expect_true(result$chief)
  expect_equal(result$tf_address, paste0("127.0.0.1:", port))
  expect_equal(sort(strsplit(result$categories, ",")[[1]]), sort(out$categories))
  expect_equal(result$epochs, 2L)
  expect_true(is.finite(result$loss))
  history <- result$history[[1]]
  expect_s3_class(history, "alexnet_history")
  expect_equal(history$params$strategy, "multi_worker")
  expect_equal(history$params$workers, 1L)
  expect_equal(history$weights_sha256, result$weights_sha256)
  # the chief's progress reached the driver while it trained, and its evaluation's
  shown <- readLines(stderr)
  expect_true(any(grepl("epoch 2/2", shown)), info = paste(shown, collapse = "\n"))
  expect_true(any(grepl("alexnet: evaluation, worker 0 of 1: 6/6 images", shown, fixed = TRUE)),
              info = paste(shown, collapse = "\n"))

  # the evaluation the job ended with: the counts of alexnet_evaluate() of the saved model, on one machine
  evaluation <- result$evaluation
  expect_s3_class(evaluation, "alexnet_evaluation")
  for (key in c("images", "top1_correct", "top5_correct", "top1_accuracy", "top5_accuracy", "protocol", "crops")) {
    expect_equal(evaluation[[key]], out$alone[[key]], label = key)
  }
  expect_equal(evaluation$images, 6L)
  expect_equal(result$eval_images, 6L)
  expect_equal(out$card$evaluation$top1_correct, out$alone$top1_correct)
  # the model pin: one version, written after the evaluation, whose card holds it (as the card beside the model)
  expect_equal(out$versions, 1L)
  expect_equal(out$pinned$evaluation$top1_correct, out$alone$top1_correct)
  expect_equal(evaluation$model_pin$version, out$pinned$version)
  expect_true(any(grepl("^Evaluation of the model on every validation image", out$printed)))
  expect_true(any(grepl("^Top-1 accuracy", out$printed)))
  expect_null(as.data.frame(result)$evaluation)

  # the same model over the evaluation job of two tasks: the same counts, after one retry with its R warning
  split <- out$split
  for (key in c("images", "top1_correct", "top5_correct", "top1_accuracy", "top5_accuracy")) {
    expect_equal(split[[key]], out$alone[[key]], label = key)
  }
  expect_equal(split$attempt, 2L)
  expect_equal(nrow(split$workers), 2L)
  expect_equal(sum(split$workers$images), 6L)
  expect_equal(out$launches, 2L)  # the second launch: two barrier tasks
  expect_equal(out$evaluation_columns[1:3], c("worker", "workers", "images"))
  expect_length(out$warnings, 1L)
  expect_match(out$warnings, "^The Spark job of 2 worker\\(s\\) failed before a worker reported an error")
  expect_match(out$warnings, "Launching the 2 workers again, scoring every image again (retry 1 of 1).", fixed = TRUE)

  # and an evaluation past its timeout stops, saying so (the R launcher bounds each task's worker)
  expect_error(
    alexnet:::spark_evaluate_run(fake_sparklyr(new.env(), address = c("127.0.0.1:1", "127.0.0.1:2"),
                                               driver_host = "127.0.0.1"), "sc", 2,
                                 file.path(dir, "board"), list(model = file.path(dir, "model"), timeout = 1,
                                                               probe = FALSE)),
    "Worker 0 of 2 failed: TimeoutError: it did not finish within timeout = 1 s"
  )
})

test_that("a worker's failure leads with its own Python error and says where its log is", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  tiny_board(dir)
  calls <- new.env()
  # a cache folder that is a file: the driver does not write there, the worker does, and fails
  writeLines("not a folder", file.path(dir, "cache"))
  # sparklyr's error of the stage says only that an R worker failed: the worker's own error reaches the driver
  # through the monitor the driver listens with (at spark.driver.host, as Spark sets it)
  error <- tryCatch(
    alexnet:::spark_train_run(fake_sparklyr(calls, driver_host = "127.0.0.1"), "sc", 1, file.path(dir, "b"),
                              list(epochs = 1, image_size = 64, cache_dir = file.path(dir, "cache"), probe = FALSE)),
    error = identity
  )
  expect_match(calls$task_errors, "<<alexnet-worker-error>>", fixed = TRUE)  # what the task stopped with
  expect_s3_class(error, c("alexnet_worker_error", "alexnet_cluster_error", "alexnet_child_error", "alexnet_error"))
  expect_equal(error$worker, 0L)
  expect_equal(error$workers, 1L)
  log <- error$log
  error <- conditionMessage(error)
  expect_match(error, paste0("\nFull log: ", log), fixed = TRUE)
  # the package's own error, which says what to change: its words alone, without its type and traceback
  expect_match(error, "^Worker 0 of 1 failed: `cache_dir` = .*is a file, not a folder: give a folder")
  expect_no_match(error, "Last lines of its log", fixed = TRUE)
  expect_match(error, "\nFull log: ", fixed = TRUE)
  expect_no_match(error, "<<alexnet-worker-error>>", fixed = TRUE)

  # without the monitor (progress = FALSE) the driver has only sparklyr's words, and says so; Spark's whole message
  # is the error's field (the log at DEBUG level it named showed nothing in R)
  error <- tryCatch(
    alexnet:::spark_train_run(fake_sparklyr(new.env(), driver_host = "127.0.0.1"), "sc", 1, file.path(dir, "b"),
                              list(epochs = 1, image_size = 64, cache_dir = file.path(dir, "cache"), probe = FALSE,
                                   progress = FALSE)),
    error = identity
  )
  expect_match(conditionMessage(error),
               "^The Spark job of 1 worker\\(s\\) failed before a worker reported an error: .*sparklyr worker")
  expect_match(conditionMessage(error), "(Spark's whole message is the error's `spark_message`: ", fixed = TRUE)
  expect_match(error$spark_message, "Job aborted due to stage failure: .*sparklyr worker rscript failure")
})

test_that("an interrupt (Ctrl-C) of the Spark job stops alexnet_spark_train(), saying so, and is not launched again", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  tiny_board(dir)
  calls <- new.env()
  api <- fake_sparklyr(calls, driver_host = "127.0.0.1")
  api$spark_apply <- function(x, f, ...) {
    calls$launches <- c(calls$launches, 1L)
    # the interrupt reaches sparklyr as it waits for the job, which it cancels on its way out (on.exit), and an
    # error of its own may follow
    on.exit(calls$cancelled <- TRUE)
    signalCondition(structure(class = c("interrupt", "condition"), list(message = "", call = NULL)))
    stop("Unknown exception occurred", call. = FALSE)
  }
  error <- tryCatch(
    alexnet:::spark_train_run(api, "sc", 1, file.path(dir, "b"), list(epochs = 1, retries = 2, probe = FALSE)),
    error = identity
  )
  expect_s3_class(error, "alexnet_error")
  expect_match(conditionMessage(error), "^Interrupted: the Spark job was cancelled, and its workers stop once they find ")
  expect_equal(calls$launches, 1L)  # it was launched again, as after a failed worker, with retries
  expect_true(calls$cancelled)
})

test_that("a misspelt training argument stops alexnet_spark_train() on the driver, before any Spark job", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  tiny_board(dir)
  calls <- new.env()
  expect_error(
    alexnet:::spark_train_run(fake_sparklyr(calls), "sc", 1, file.path(dir, "b"), list(epoch = 1)),
    "does not take `epoch` \\(did you mean `epochs`\\?\\)"
  )
  expect_null(calls$sdf_len)  # neither the probe nor the barrier stage ran
  expect_null(calls$spark_apply)
})

test_that("checkpoints trained on other classes than the board's stop alexnet_spark_train() on the driver", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  ids <- imagenet_categories(tiny_board(dir))$id
  checkpoints <- file.path(dir, "ckpt")
  dir.create(checkpoints)
  # the history the checkpoints' run wrote, of the board's two classes in the other order; the checkpoint itself
  # is not read on the driver (here it is not one)
  history <- list(format = 1L, settings = list(num_classes = 2L, data = list(class_ids = rev(ids))))
  writeLines(jsonlite::toJSON(history, auto_unbox = TRUE), file.path(checkpoints, "alexnet-history.json"))
  writeLines("not a checkpoint", file.path(checkpoints, "ckpt-2.index"))
  writeLines("nor its data", file.path(checkpoints, "ckpt-2.data-00000-of-00001"))
  calls <- new.env()
  expect_error(
    alexnet:::spark_train_run(fake_sparklyr(calls), "sc", 1, file.path(dir, "b"),
                              list(epochs = 1, checkpoint_dir = checkpoints)),
    paste0("^The checkpoints in ", checkpoints, " were trained on other classes than this data's: 2 of their 2 ",
           "outputs would stand for another class \\(label 0: ", ids[[2]], " then, ", ids[[1]], " now; label 1: ",
           ids[[1]], " then, ", ids[[2]], " now\\)"),
    class = "alexnet_error"
  )
  expect_null(calls$sdf_len)  # neither the probe nor the barrier stage ran
  expect_null(calls$spark_apply)
})

test_that("a worker still running after `timeout` seconds is stopped, and the error says so", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  tiny_board(dir)
  expect_error(
    alexnet:::spark_train_run(fake_sparklyr(new.env(), driver_host = "127.0.0.1"), "sc", 1, file.path(dir, "b"),
                              list(epochs = 1, image_size = 64, timeout = 1, cache_dir = file.path(dir, "cache"),
                                   probe = FALSE)),
    "Worker 0 of 1 failed: TimeoutError: .*within timeout = 1 s"
  )
})

test_that("the original r-tensorflow/alexnet's spark_apply() closure runs with reticulate::import('tensorflow')", {
  skip_unless_long()
  skip_if_no_alexnet()
  skip_if_not_installed("callr")
  skip_if_not_installed("jsonlite")
  # the closure puts worker 0 on port 8001 (8000 + seq_along(address))
  probe <- tryCatch(serverSocket(8001), error = function(e) NULL)
  skip_if(is.null(probe), "port 8001 is in use")
  close(probe)
  dir <- withr::local_tempdir()
  out <- callr::r(function(dir) {
    library(alexnet)  # on a Spark worker: attach alexnet, for tf_version() and %>%
    src <- imagenet_synthetic(file.path(dir, "src"), classes = 16, images_per_class = 4, val_per_class = 0,
                              max_side = 64)
    board <- file.path(dir, "board")
    imagenet_upload(src$path, board = board, workers = 4)

    # the closure of the seed, with tf <- reticulate::import("tensorflow") for library(tensorflow)
    f <- function(df, barrier) {
      tf <- reticulate::import("tensorflow")

      Sys.setenv(TF_CONFIG = jsonlite::toJSON(list(
        cluster = list(
          worker = paste(
            gsub(":[0-9]+$", "", barrier$address),
            8000 + seq_along(barrier$address), sep = ":")),
        task = list(type = 'worker', index = barrier$partition)
      ), auto_unbox = TRUE))

      if (is.null(tf_version())) install_tensorflow()

      strategy <- tf$distribute$MultiWorkerMirroredStrategy()

      result <- alexnet::imagenet_partition(partition = barrier$partition, board = board) %>%
        alexnet::alexnet_train(strategy = strategy, epochs = 10, parallel = 6)

      result$metrics$accuracy
    }
    accuracy <- f(data.frame(id = 1L), list(address = "127.0.0.1:45678", partition = 0L))
    # what TensorFlow saw: the TF_CONFIG set with Sys.setenv() after Python had started
    list(accuracy = accuracy, r = Sys.getenv("TF_CONFIG"),
         python = reticulate::import("os")$environ$get("TF_CONFIG"))
  }, args = list(dir),
  env = c(callr::rcmd_safe_env(), ALEXNET_PROGRESS = "0", XDG_CACHE_HOME = file.path(dir, "cache")))
  expect_length(out$accuracy, 10L)
  expect_true(all(out$accuracy >= 0 & out$accuracy <= 1))
  # TensorFlow saw the closure's TF_CONFIG, its one worker as a list (jsonlite writes a bare string)
  expect_equal(out$python, out$r)
  seen <- jsonlite::fromJSON(out$python, simplifyVector = FALSE)
  expect_equal(seen$cluster$worker, list("127.0.0.1:8001"))
  expect_equal(seen$task$index, 0L)
})

test_that("a relaunch after a lost Spark worker waits for its task slots, saying so as it waits", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  tiny_board(dir)
  spark <- alexnet:::core_module("launch.spark")
  poll <- spark$SLOTS_POLL
  spark$SLOTS_POLL <- 0.01
  withr::defer(spark$SLOTS_POLL <- poll)
  # the application's defaultParallelism at each look: 2 when the job is planned, 1 after the lost worker, then 2
  parallelism <- c(2L, 1L, 1L, 2L)
  looks <- 0L
  launches <- 0L
  looked_before <- integer()
  api <- fake_sparklyr(new.env())
  invoke <- api$invoke
  api$invoke <- function(obj, method, ...) {
    if (identical(method, "defaultParallelism")) {
      looks <<- looks + 1L
      return(parallelism[[min(looks, length(parallelism))]])
    }
    invoke(obj, method, ...)
  }
  api$spark_apply <- function(x, f, ...) {
    launches <<- launches + 1L
    looked_before <<- c(looked_before, looks)
    if (launches == 1L) stop("Job aborted: ExecutorLostFailure (executor 1 exited)", call. = FALSE)
    data.frame(worker = 0:1, workers = 2L, loss = 1.5, history = '{"params": {}, "metrics": {"loss": [1.5]}}')
  }
  said <- character()
  result <- withCallingHandlers(
    alexnet:::spark_train_run(api, "sc", 2, file.path(dir, "b"), list(retries = 1, epochs = 1, probe = FALSE,
                                                                        progress = FALSE)),
    alexnet_retry = function(w) invokeRestart("muffleWarning"),
    message = function(m) {
      said <<- c(said, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  )
  expect_equal(result$attempt, c(2L, 2L))
  expect_equal(looked_before, c(1L, 4L))  # relaunched once the slots were back
  expect_length(said, 3L)
  # the failure and the relaunch, said at once, then the wait before it
  expect_match(said[[1]], "^alexnet: The Spark job of 2 worker\\(s\\) failed .*\nLaunching the 2 workers again")
  expect_match(said[[2]], paste0("^alexnet: Before launching the 2 workers again, waiting up to 600 s for 2 task ",
                                 "slots: the Spark application has 1 now"))
  expect_match(said[[3]], "^alexnet: The Spark application has 2 task slots again, after [0-9]+ s\\.")
})

test_that("a failed launch and the retry are said at once, then reach R as a warning with the worker's error", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  tiny_board(dir)
  # the first launch fails as a worker's task does; the second returns the worker's row
  failure <- alexnet:::core_module("launch.worker")$WorkerError(0L, 1L, "OSError: lost", list(), -9L,
                                                                "node7:/tmp/alexnet-logs/w0.log")$task_failure()
  launches <- 0L
  api <- fake_sparklyr(new.env())
  api$spark_apply <- function(x, f, ...) {
    launches <<- launches + 1L
    if (launches == 1L) stop(failure, call. = FALSE)
    data.frame(worker = 0L, workers = 1L, loss = 1.5, history = '{"params": {}, "metrics": {"loss": [1.5]}}')
  }
  # what was said, in order: a message is shown as it is raised, a warning when the call returns (R holds it back)
  said <- list()
  result <- withCallingHandlers(
    alexnet:::spark_train_run(api, "sc", 1, file.path(dir, "b"), list(retries = 2, epochs = 1, probe = FALSE)),
    warning = function(w) {
      said[[length(said) + 1L]] <<- w
      invokeRestart("muffleWarning")
    },
    message = function(m) {
      said[[length(said) + 1L]] <<- m
      invokeRestart("muffleMessage")
    }
  )
  expect_equal(launches, 2L)
  warnings <- Filter(function(c) inherits(c, "warning"), said)
  expect_length(warnings, 1L)
  expect_s3_class(warnings[[1]], "alexnet_retry")
  expect_s3_class(warnings[[1]], "alexnet_warning")  # caught with the core's other warnings
  message <- conditionMessage(warnings[[1]])
  expect_match(message, "^Worker 0 of 1 failed: OSError: lost\nFull log: node7:/tmp/alexnet-logs/w0.log\n")
  expect_match(message, "Launching the 1 workers again, starting afresh (no checkpoint_dir) (retry 1 of 2).",
               fixed = TRUE)
  # the worker's error, as its error would carry it
  expect_identical(warnings[[1]][c("worker", "workers", "log")],
                   list(worker = 0L, workers = 1L, log = "node7:/tmp/alexnet-logs/w0.log"))
  # said at once, before the warning: the same text as an `alexnet:` line
  shown <- Filter(function(c) inherits(c, "message") && grepl("failed: OSError: lost", conditionMessage(c)), said)
  expect_length(shown, 1L)
  expect_identical(conditionMessage(shown[[1]]), paste0("alexnet: ", message, "\n"))
  at <- function(found) which(vapply(said, function(c) identical(c, found[[1]]), NA))
  expect_lt(at(shown), at(warnings))
  expect_s3_class(result, "alexnet_spark_run")
  expect_equal(result$attempt, 2L)
  expect_equal(result$history[[1]]$metrics$loss, 1.5)
})

test_that("on a real local[2] connection, the barrier list is what fake_sparklyr() hands in, and slots are checked", {
  skip_if_no_alexnet()
  home <- skip_if_no_spark_home()
  sc <- sparklyr::spark_connect(master = "local[2]", spark_home = home)
  on.exit(sparklyr::spark_disconnect(sc), add = TRUE)
  sdf <- sparklyr::sdf_len(sc, 2L, repartition = 2L)
  tasks <- sparklyr::spark_apply(sdf, function(df, barrier) {
    data.frame(partition = as.integer(barrier$partition), address = paste(unlist(barrier$address), collapse = " "),
               listed = is.list(barrier$address), config = alexnet::tf_config_from_barrier(barrier))
  }, barrier = TRUE, columns = c(partition = "integer", address = "character", listed = "logical",
                                 config = "character"), packages = FALSE)
  tasks <- as.data.frame(sparklyr::sdf_collect(tasks))
  # the list the closure is handed, as fake_sparklyr() hands it: `address` a list, which TF_CONFIG is made from
  handed <- fake_sparklyr(new.env())$spark_apply("sdf", function(df, barrier) {
    data.frame(listed = is.list(barrier$address))
  }, barrier = TRUE)
  expect_identical(tasks$listed, rep(handed$listed, 2L))
  inside <- lapply(tasks$config, jsonlite::fromJSON)
  expect_setequal(vapply(inside, function(config) config$task$index, integer(1)), 0:1)
  expect_setequal(tasks$partition, 0:1)
  addresses <- strsplit(tasks$address[[1]], " ")[[1]]
  expect_length(addresses, 2L)
  expect_match(addresses, "^[^:]+:[0-9]+$")
  expect_identical(tasks$address[[2]], tasks$address[[1]])  # every task sees every task's address
  config <- jsonlite::fromJSON(tf_config_from_barrier(list(address = addresses, partition = tasks$partition[[2]])))
  expect_identical(config$task$index, tasks$partition[[2]])
  expect_length(config$cluster$worker, 2L)
  # the slot check reads local[2]'s parallelism from the connection, before any job
  expect_error(alexnet_spark_train(sc, workers = 3, board = tempdir(), probe = FALSE),
               "3 workers need 3 task slots.*use `workers` <= 2")
})

# The options of a Spark job and of an evaluation reach R from the core's declarations (R/launch-options.R,
# R/model-options.R, generated from them): each one is a formal, with the declared kind and default, of every
# function that takes it, documented there, and a bad value of it stops the job on the driver, before any Spark job.
# The walk is over the declarations, so an option added to one of them alone is covered. (Python's side:
# python/tests/test_launch_options.py.)
declared_users <- function() {
  list(alexnet_spark_train = c(alexnet:::training_job_options, alexnet:::launch_options),
       alexnet_spark_evaluate = c(alexnet:::evaluation_options, alexnet:::launch_options),
       alexnet_evaluate = c(alexnet:::evaluation_options, alexnet:::board_images_options),
       tf_config_from_barrier = alexnet:::launch_options["base_port"])
}

test_that("every declared option is a formal of the functions that take it, with its default, kind and docs", {
  expect_declared_formals(declared_users(), defaults = list(python = quote(alexnet_python())))
  # a training's options are named in full, after `...`: `cache` (a training setting) is never `cache_dir`
  train <- names(formals(alexnet_spark_train))
  expect_true(all(match(names(alexnet:::launch_options), train) > match("...", train)))
})

test_that("tf_config_from_barrier()'s `base_port` defaults to the core's, and says so in its usage", {
  skip_if_no_alexnet()
  expect_equal(formals(tf_config_from_barrier)$base_port, alexnet:::core_module("train.cluster")$DEFAULT_BASE_PORT)
  config <- jsonlite::fromJSON(tf_config_from_barrier(list(address = c("a:1", "b:2"), partition = 1L)))
  expect_identical(config$cluster$worker, c("a:8000", "b:8001"))
})

test_that("a bad value of every declared option stops the Spark job on the driver, naming it", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  board <- tiny_board(dir)
  calls <- new.env()
  jobs <- list(
    train = function(...) alexnet:::spark_train_run(fake_sparklyr(calls), "sc", 1, board, list(...)),
    evaluate = function(...) alexnet:::spark_evaluate_run(fake_sparklyr(calls), "sc", 1, board,
                                                           list(model = file.path(dir, "model"), ...)))
  tried <- expect_settings_refused(jobs$train, c(alexnet:::training_job_options, alexnet:::launch_options)) +
    expect_settings_refused(jobs$evaluate, c(alexnet:::evaluation_options, alexnet:::launch_options))
  expect_gt(tried, 10L)
  expect_null(calls$sdf_len)  # neither the probe nor a barrier stage ran
})
