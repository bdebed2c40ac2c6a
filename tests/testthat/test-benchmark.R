# alexnet_benchmark() from R: the stages come back as a data frame, the files are written, it prints.

test_that("alexnet_benchmark() runs from R on a partition and returns a table of stages", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "imagenet"), classes = 2, images_per_class = 4,
                            val_per_class = 0, max_side = 120)
  board <- file.path(dir, "board")
  imagenet_upload(src$path, board = board, workers = 2)
  data <- imagenet_partition(partition = 0, total = 1, board = board, cache_dir = file.path(dir, "cache"))

  result <- alexnet_benchmark(data, stages = c("decode", "io", "synthetic"), images = 8, batch_size = 4,
                              image_size = 64, cores = 1, seconds = 0, dense_units = 16,
                              model_steps = 1, output_dir = file.path(dir, "out"))
  expect_s3_class(result, "alexnet_benchmark")
  expect_s3_class(result$stages, "data.frame")
  expect_setequal(paste(result$stages$stage, result$stages$cores),
                  c("decode 1", "io 1", paste("synthetic", result$machine$cores)))
  expect_true(all(result$stages$images_per_second > 0))
  expect_true(all(!is.na(result$stages$peak_rss_mb[result$stages$stage != "synthetic"])))
  expect_equal(result$data$images, 8L)
  expect_true(file.exists(result$json))
  expect_true(file.exists(result$png))
  saved <- jsonlite::fromJSON(result$json)
  expect_equal(saved$summary$ratios$io_vs_decode_per_core$value,
               result$summary$ratios$io_vs_decode_per_core$value)
  expect_output(print.alexnet_benchmark(result), "AlexNet benchmark: 8 images")
  expect_output(print.alexnet_benchmark(result), "io on 1 core / decode on 1 core: [0-9.]+x, target 1x")
})

test_that("alexnet_benchmark() checks its arguments before starting", {
  expect_error(alexnet_benchmark(list(label = 1)), "`data\\$image` is missing or empty")
  expect_error(alexnet_benchmark(stages = 3), "`stages` must be strings without NA or NULL, not 3",
               class = "alexnet_error")
  skip_if_no_alexnet()
  expect_error(alexnet_benchmark(stages = "nope"), "Unknown stage")
  expect_error(alexnet_benchmark(images = 0), "images")
  expect_error(alexnet_benchmark(seconds = -1), "seconds")
})
