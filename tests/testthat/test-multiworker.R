# The seed's stand-alone MultiWorkerMirroredStrategy snippet: the same code in two R sessions, each
# with its own `partition` and the TF_CONFIG it writes, training together over 127.0.0.1.

test_that("the original r-tensorflow/alexnet's stand-alone multi-worker snippet trains in two R sessions", {
  skip_unless_long()
  skip_if_no_alexnet()
  skip_if_not_installed("callr")
  skip_if_not_installed("jsonlite")
  dir <- withr::local_tempdir()
  board <- file.path(dir, "board")
  callr::r(function(dir, board) {
    src <- alexnet::imagenet_synthetic(file.path(dir, "src"), classes = 16, images_per_class = 4,
                                       val_per_class = 0, max_side = 64)
    alexnet::imagenet_upload(src$path, board = board, workers = 4)
  }, args = list(dir = dir, board = board), env = c(callr::rcmd_safe_env(), ALEXNET_PROGRESS = "0"))
  ports <- free_port()
  ports <- c(ports, free_port(taken = ports))
  addresses <- paste0("127.0.0.1:", ports)

  # seed lines 173-187 as a script run on each machine, with tf <- reticulate::import("tensorflow") for
  # library(tensorflow), the board named, the addresses of this machine (the seed says to adjust them)
  # and `partition` from the command line (the seed says it must change on each machine). Its
  # MultiWorkerMirroredStrategy(cross_device_ops = ...) is run as written, then without the argument
  # that no TensorFlow release has had (2.0-2.3: tf.distribute.experimental, `communication`; 2.4 on:
  # `cluster_resolver`, `communication_options`).
  script <- file.path(dir, "worker.R")
  writeLines(c(
    "args <- commandArgs(trailingOnly = TRUE)",
    "board <- args[1]; addresses <- strsplit(args[2], ',')[[1]]",
    "library(alexnet)",
    "tf <- reticulate::import('tensorflow')",
    "",
    "partition <- as.integer(args[3])",
    "Sys.setenv(TF_CONFIG = jsonlite::toJSON(list(",
    "    cluster = list(",
    "        worker = addresses",
    "    ),",
    "    task = list(type = 'worker', index = partition)",
    "), auto_unbox = TRUE))",
    "",
    "refused <- tryCatch(tf$distribute$MultiWorkerMirroredStrategy(",
    "  cross_device_ops = tf$distribute$ReductionToOneDevice()), error = conditionMessage)",
    "strategy <- tf$distribute$MultiWorkerMirroredStrategy()",
    "",
    "history <- alexnet::imagenet_partition(partition = partition, board = board) %>%",
    "  alexnet::alexnet_train(strategy = strategy, parallel = 6)",
    "",
    "saveRDS(list(refused = refused, accuracy = history$metrics$accuracy, params = history$params,",
    "             weights = history$weights_sha256), args[4])"
  ), script)
  # each machine fetches into a cache of its own (the default cache folder is under XDG_CACHE_HOME); the
  # sessions inherit this one's environment ("current": its library paths and configuration) and its Python
  rscript <- file.path(R.home("bin"), "Rscript")
  sessions <- lapply(0:1, function(partition) {
    out <- file.path(dir, paste0("result-", partition, ".rds"))
    env <- c("current", callr::rcmd_safe_env(), ALEXNET_PYTHON = alexnet_python(), ALEXNET_PROGRESS = "0",
             TF_CPP_MIN_LOG_LEVEL = "2",
             XDG_CACHE_HOME = file.path(dir, paste0("cache", partition)))
    process <- processx::process$new(
      rscript, c(script, board, paste(addresses, collapse = ","), partition, out),
      env = env, stdout = file.path(dir, paste0("log-", partition, ".txt")), stderr = "2>&1"
    )
    list(process = process, out = out, log = file.path(dir, paste0("log-", partition, ".txt")))
  })
  on.exit(for (s in sessions) s$process$kill(), add = TRUE)
  for (s in sessions) s$process$wait(timeout = 600 * 1000)
  results <- lapply(sessions, function(s) {
    if (!file.exists(s$out)) stop("a worker failed:\n", paste(tail(readLines(s$log), 30), collapse = "\n"))
    readRDS(s$out)
  })

  for (partition in 0:1) {
    out <- results[[partition + 1L]]
    expect_match(out$refused, "cross_device_ops")
    expect_length(out$accuracy, 2L)  # the default two epochs
    expect_true(all(out$accuracy >= 0 & out$accuracy <= 1))
    expect_equal(out$params$strategy, "multi_worker")
    expect_equal(out$params$workers, 2L)
    expect_equal(out$params$train_images, 4L)  # partition `partition` of the default 16: one category
  }
  # trained together: both sessions end with the same weights
  expect_equal(results[[1]]$weights, results[[2]]$weights)
})
