# The three levers of faster training from R: precision, image sizes trained in order, and the learning rate
# scaled with the global batch. What R cannot check (a schedule against `epochs`, two arguments that disagree)
# the core checks, before any training; a Spark run checks it on the driver, before any Spark job.

# A partition made by hand from a small synthetic ImageNet: `classes` categories of `per_class` images.
hand_partition <- function(dir, classes = 2, per_class = 4) {
  src <- imagenet_synthetic(file.path(dir, "imagenet"), classes = classes, images_per_class = per_class,
                            val_per_class = 0, max_side = 96)
  images <- list.files(file.path(src$path, "ILSVRC", "Data", "CLS-LOC", "train"), pattern = "\\.JPEG$",
                       recursive = TRUE, full.names = TRUE)
  list(image = images, category = basename(dirname(images)), categories = sort(src$categories))
}

# A partition whose images do not exist: a check that let a bad argument through would stop at the images.
nowhere <- list(image = c("/nowhere/n1/a.JPEG", "/nowhere/n2/b.JPEG"), category = c("n1", "n2"),
                categories = c("n1", "n2"))

test_that("a size schedule that does not fit `epochs`, or disagreeing precisions, stop alexnet_train() first", {
  skip_if_no_alexnet()
  expect_error(alexnet_train(data = nowhere, epochs = 3, image_size = c(64, 96), image_size_epochs = c(1, 1)),
               "`image_size_epochs` = c\\(1, 1\\) does not fit.*adding up to `epochs` \\(3\\)", class = "alexnet_error")
  expect_error(alexnet_train(data = nowhere, epochs = 1, image_size = c(64, 96)),
               "`image_size` has 2 sizes but `epochs` is 1", class = "alexnet_error")
  expect_error(alexnet_train(data = nowhere, epochs = 1, precision = "bfloat16", mixed_precision = TRUE),
               '`mixed_precision` = TRUE means precision "float16", but `precision` is "bfloat16"',
               class = "alexnet_error")
  expect_error(alexnet_train(data = nowhere, epochs = 2, warmup_epochs = 3), "`warmup_epochs` = 3 is more than",
               class = "alexnet_error")
  expect_error(alexnet_train(data = nowhere, epochs = 2, warmup_epochs = 1, lr_scaling = "none"),
               "`warmup_epochs` warms up to the rate scaled", class = "alexnet_error")
})

# alexnet:::sparklyr_api() replaced by `api` until the calling test ends (sparklyr is not installed here).
local_sparklyr <- function(api, env = parent.frame()) {
  ns <- asNamespace("alexnet")
  original <- get("sparklyr_api", envir = ns)
  unlockBinding("sparklyr_api", ns)
  assign("sparklyr_api", function() api, envir = ns)
  withr::defer({
    assign("sparklyr_api", original, envir = ns)
    lockBinding("sparklyr_api", ns)
  }, envir = env)
}

# sparklyr functions whose spark_apply() keeps the task the barrier closure would carry to every worker, and
# stops there (no worker runs).
task_catcher <- function(calls) {
  list(
    spark_context = function(sc) list(connection = sc),
    invoke = function(obj, method, ...) {
      args <- list(...)
      switch(method, getConf = "conf", defaultParallelism = 2L, get = args[[2]])
    },
    sdf_len = function(sc, n, repartition) "sdf",
    spark_apply = function(x, f, ...) {
      calls$task <- environment(unserialize(serialize(f, NULL)))$task
      stop("stopped before the workers start")
    },
    sdf_collect = function(x) x
  )
}

test_that("alexnet_spark_train() checks the size schedule on the driver, before any Spark job", {
  skip_if_no_alexnet()
  calls <- new.env()
  local_sparklyr(task_catcher(calls))
  sc <- structure(list(), class = "spark_connection")
  expect_error(alexnet_spark_train(sc, workers = 1, board = "/nowhere/board", epochs = 2, image_size = c(64, 96),
                                   image_size_epochs = c(2, 1)),
               "`image_size_epochs` = c\\(2, 1\\) does not fit.*`epochs` \\(2\\)\\.", class = "alexnet_error")
  expect_error(alexnet_spark_train(sc, workers = 1, board = "/nowhere/board", image_size = c(64, 96, 128)),
               "`image_size` has 3 sizes but `epochs` is 2", class = "alexnet_error")  # alexnet_train()'s 2 epochs
  expect_error(alexnet_spark_train(sc, workers = 1, board = "/nowhere/board", epochs = 4, image_size_epochs = c(2, 2)),
               "one whole number >= 1 per size of `image_size` \\(1\\)", class = "alexnet_error")  # one size: 224
  expect_error(alexnet_spark_train(sc, workers = 1, board = "/nowhere/board", precision = "float32",
                                   mixed_precision = TRUE), "`mixed_precision` = TRUE means", class = "alexnet_error")
  expect_null(calls$task)
})

test_that("alexnet_spark_train() hands the new training arguments to every worker's task", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "src"), classes = 2, images_per_class = 2, val_per_class = 0,
                            max_side = 48)
  upload_without_validation(src$path, board = file.path(dir, "b"), workers = 1)
  calls <- new.env()
  local_sparklyr(task_catcher(calls))
  sc <- structure(list(), class = "spark_connection")
  expect_error(alexnet_spark_train(sc, workers = 2, board = file.path(dir, "b"), probe = FALSE, progress = FALSE,
                                   epochs = 5, image_size = c(64, 80, 96), image_size_epochs = c(1, 2, 2),
                                   precision = "BFloat16", lr_scaling = "linear", warmup_epochs = 2,
                                   learning_rate = 0.02),
               "stopped before the workers start")
  args <- calls$task$settings
  expect_equal(unlist(args$image_size), c(64, 80, 96))
  expect_equal(unlist(args$image_size_epochs), c(1, 2, 2))
  expect_equal(args[c("precision", "lr_scaling", "warmup_epochs", "learning_rate", "epochs")],
               list(precision = "bfloat16", lr_scaling = "linear", warmup_epochs = 2L, learning_rate = 0.02,
                    epochs = 5L))
  # what a worker makes of the task after its trip through R: the typed settings the driver checked
  task <- reticulate::import("alexnet.launch.task", convert = FALSE)$Task$from_dict(calls$task)
  sizes <- reticulate::py_to_r(task$settings$sizes)
  expect_identical(list(unlist(sizes$sizes), unlist(sizes$epochs)), list(c(64L, 80L, 96L), c(1L, 2L, 2L)))
})

test_that("a run over two image sizes from R records each epoch's size, its rate and its precision", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  data <- hand_partition(dir)
  history <- alexnet_train(data = data, batch_size = 4, epochs = 2, image_size = c(64, 96), dense_units = 16,
                           parallel = 2, verbose = 0, model_dir = file.path(dir, "model"))
  expect_identical(history$schedule$image_size, c(64L, 96L))
  expect_length(history$schedule$learning_rate, 2L)
  # the rate for a global batch of 4, scaled linearly from 0.01 for 128, without warm-up (the factor is below 2),
  # then straight down to zero at the last of the 4 steps (the default linear schedule): each epoch records the
  # rate of its last step
  peak <- 0.01 * 4 / 128
  expect_equal(history$schedule$learning_rate, c(peak * 2 / 3, 0), tolerance = 1e-6)
  expect_false(any(c("image_size", "learning_rate") %in% names(history$metrics)))
  expect_true(history$params$precision %in% c("float32", "bfloat16", "float16"))
  expect_match(history$params$precision_reason, "^(auto|measured)")
  expect_equal(unlist(history$params$image_size), c(64, 96))
  out <- capture.output(print(history))
  # the peak, at the first step, is at no epoch's end: said beside the rates of the epochs' ends
  expect_true(any(grepl(paste0("Schedule: image size 64 -> 96, learning rate 0.000208 -> 0 at the epochs' ends ",
                               "(peak 0.000313), precision ",
                               history$params$precision, " ("), out, fixed = TRUE)), info = out)
  expect_false("image_size" %in% summary(history)$metric)
})
