# The options of the data stage, of which of a board's images an evaluation scores, of a prediction and an export,
# and of the model pin read reach R from the core's declarations
# (R/data-options.R, R/model-options.R, generated from python/alexnet/data/options.py and
# python/alexnet/model/options.py): each one is a formal of the function that takes it, with the declared kind and
# default, documented there, and a bad value of it stops the call before anything is written or read. The walk is
# over the declarations, so an option added to one of them alone is covered. (Python's side:
# python/tests/test_declared_options.py.)
data_users <- function() {
  list(imagenet_synthetic = alexnet:::synthetic_options, imagenet_upload = alexnet:::upload_options,
       imagenet_partition = c(alexnet:::partition_options, alexnet:::fetch_options), alexnet_predict = alexnet:::predict_options,
       alexnet_features = alexnet:::features_options,
       alexnet_export = alexnet:::export_options, alexnet_evaluate = alexnet:::board_images_options,
       alexnet_model = alexnet:::model_pin_options)
}

test_that("every option of the data stage is a formal of its function, with its declared default, kind and docs", {
  expect_declared_formals(data_users())
  # the arguments keep their places, so that calls by position still work
  expect_identical(names(formals(imagenet_synthetic)),
                   c("dest", "classes", "images_per_class", "val_per_class", "seed", "quirks", "max_side", "layout", "..."))
  expect_identical(names(formals(imagenet_upload))[1:8],
                   c("source", "board", "workers", "min_images", "resize", "quality", "keep_versions", "scratch"))
  expect_identical(names(formals(imagenet_partition))[1:6],
                   c("partition", "total", "board", "cache_dir", "workers", "verify"))
  expect_identical(names(formals(alexnet_predict)), c("model", "images", "top", "batch_size", "skip_bad", "..."))
  expect_identical(names(formals(alexnet_features)), c("model", "images", "layer", "batch_size", "skip_bad", "..."))
  expect_identical(names(formals(alexnet_export))[1:4], c("model", "path", "format", "top"))
  expect_identical(names(formals(alexnet_evaluate)),
                   c("model", "data", "board", "crops", "batch_size", "parallel", "image_size", "partition", "total",
                     "cache_dir", "fetch_workers", "..."))
  expect_identical(names(formals(alexnet_model)), c("board", "name", "version", "cache_dir", "export", "..."))
  expect_identical(names(formals(imagenet_validation))[1:3], c("board", "partition", "total"))
})

test_that("every function R shares with Python takes the same arguments by position, in the same order", {
  skip_if_no_alexnet()
  core <- reticulate::import("alexnet")
  positional <- reticulate::py_eval(paste(
    "lambda f: [p.name for p in __import__('inspect').signature(f).parameters.values()",
    "if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] if __import__('inspect').isfunction(f) else None"))
  compared <- 0L
  for (fun in intersect(getNamespaceExports("alexnet"), core$`__all__`)) {
    python <- positional(core[[fun]])
    if (is.null(python)) next
    python <- as.character(unlist(python))
    python[python == "spark"] <- "sc"  # a Spark connection, by the name sparklyr gives it
    expect_identical(as.character(names(formals(getExportedValue("alexnet", fun))))[seq_along(python)], python,
                     label = fun)
    compared <- compared + 1L
  }
  expect_gt(compared, 15L)
})

test_that("a misspelt argument of a data function is offered the function's own arguments too", {
  skip_if_no_alexnet()
  expect_error(imagenet_partition(0, 2, bord = tempfile()),
               "^imagenet_partition\\(\\) does not take `bord` \\(did you mean `board`\\?\\): .* Its arguments are: partition, total, board, ",
               class = "alexnet_error")
})

test_that("R checks the data options it can before any call into the core", {
  expect_error(imagenet_upload("src", retries = -1), "`retries` must be a whole number >= 0, not -1",
               class = "alexnet_error")
  expect_error(imagenet_partition(validation = NA), "`validation` must be TRUE or FALSE, not NA",
               class = "alexnet_error")
  # which partition is declared too (alexnet.data.options.PartitionOptions): its least values are checked here
  expect_error(imagenet_partition(tempfile(), partition = 0, total = 0),
               "^`total` must be a whole number >= 1, not 0: how many partitions", class = "alexnet_error")
  expect_error(imagenet_partition(-1, 2, board = tempfile()), "^`partition` must be a whole number >= 0, not -1",
               class = "alexnet_error")
  expect_error(imagenet_synthetic("dest", layout = "tarball"), "`layout` must be one of \"kaggle\", .* not \"tarball\"",
               class = "alexnet_error")
})

test_that("a bad value of every data option is refused, naming it, before anything is written or read", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  dest <- file.path(dir, "synthetic")
  board <- file.path(dir, "board")
  untouched <- function(name, args) expect_false(file.exists(dest) || file.exists(board), label = name)
  tried <- expect_settings_refused(function(...) imagenet_synthetic(dest, ...), alexnet:::synthetic_options,
                                   after = untouched) +
    expect_settings_refused(function(...) imagenet_upload(file.path(dir, "no-source"), board = board, ...),
                            alexnet:::upload_options, after = untouched) +
    expect_settings_refused(function(...) imagenet_partition(0, 2, board = board, ...), alexnet:::fetch_options,
                            after = untouched) +
    expect_settings_refused(function(...) imagenet_partition(board = board, ...), alexnet:::partition_options,
                            after = untouched) +
    expect_settings_refused(function(...) alexnet_predict(file.path(dir, "no-model"), "cat.jpg", ...),
                            alexnet:::predict_options, after = untouched) +
    expect_settings_refused(function(...) alexnet_features(file.path(dir, "no-model"), "cat.jpg", ...),
                            alexnet:::features_options, after = untouched) +
    expect_settings_refused(function(...) alexnet_export(file.path(dir, "no-model"), dest, ...),
                            alexnet:::export_options, after = untouched) +
    expect_settings_refused(function(...) alexnet_evaluate(file.path(dir, "no-model"), board = board, ...),
                            alexnet:::board_images_options, after = untouched) +
    expect_settings_refused(function(...) alexnet_model(board, ...), alexnet:::model_pin_options, after = untouched)
  expect_gt(tried, 24L)
})

test_that("a partition past its total is refused by the core, before the board is read", {
  skip_if_no_alexnet()
  board <- tempfile("board-")
  expect_error(imagenet_partition(2, 2, board = board),
               "`partition` must be in 0\\.\\.1 \\(0-based, with total = 2\\), not 2", class = "alexnet_error")
  expect_false(file.exists(board))
})

test_that("a name the data functions do not take is refused with the closest option", {
  skip_if_no_alexnet()
  # (R itself completes a prefix of a formal: `work` is `workers`)
  expect_error(imagenet_partition(0, 2, board = tempfile(), verfy = TRUE),
               "does not take `verfy` \\(did you mean `verify`\\?\\)", class = "alexnet_error")
  expect_error(imagenet_upload(tempfile(), board = tempfile(), qualty = 80),
               "does not take `qualty` \\(did you mean `quality`\\?\\)", class = "alexnet_error")
  expect_error(alexnet_predict(tempfile(), "cat.jpg", batchsize = 2),
               "does not take `batchsize` \\(did you mean `batch_size`\\?\\)", class = "alexnet_error")
  expect_error(alexnet_features(tempfile(), "cat.jpg", layr = "fc1"),
               "does not take `layr` \\(did you mean `layer`\\?\\)", class = "alexnet_error")
  expect_error(alexnet_evaluate(tempfile(), board = tempfile(), fetch_wokers = 2),
               "does not take `fetch_wokers` \\(did you mean `fetch_workers`\\?\\)", class = "alexnet_error")
  # the functions that take nothing in `...` refuse a name there in R, alike, before any Python
  expect_error(alexnet_model(tempfile(), cahce_dir = tempfile()),
               "^alexnet_model\\(\\) does not take `cahce_dir` \\(did you mean `cache_dir`\\?\\)",
               class = "alexnet_error")
})

test_that("a function taking nothing in `...` names what it was given there, with the nearest argument", {
  expect_error(imagenet_synthetic(tempfile(), clases = 2),
               paste0("^imagenet_synthetic\\(\\) does not take `clases` \\(did you mean `classes`\\?\\): fix the name, ",
                      "or leave it out\\. Its arguments are: dest, classes, "), class = "alexnet_error")
  expect_error(alexnet_filters("model", pth = "a.png"), "does not take `pth` \\(did you mean `path`\\?\\)",
               class = "alexnet_error")
  expect_error(imagenet_categories(bord = tempfile()), "does not take `bord` \\(did you mean `board`\\?\\)",
               class = "alexnet_error")
  expect_error(alexnet_spark_evaluate(NULL, "model", 2, crps = 1), "does not take `crps` \\(did you mean `crops`\\?\\)",
               class = "alexnet_error")
  expect_error(imagenet_categories(tempfile(), 3, zzzzzz = 1),
               "does not take an argument without a name, `zzzzzz`: ", class = "alexnet_error")
})
