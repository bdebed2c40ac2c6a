fake_history <- function() {
  structure(list(
    params = list(epochs = 3L, batch_size = 32L, strategy = "default", replicas = 1L),
    metrics = list(loss = c(2.3, 1.9, 1.5), accuracy = c(0.1, 0.3, 0.5),
                   val_loss = c(2.2, 2.0, 1.7), val_accuracy = c(0.15, 0.3, 0.45))
  ), class = "alexnet_history")
}

test_that("as.data.frame() gives one row per epoch and metric, split by data set", {
  df <- as.data.frame(fake_history())
  expect_equal(nrow(df), 12L)
  expect_setequal(unique(df$metric), c("loss", "accuracy"))
  expect_equal(df$value[df$metric == "accuracy" & df$data == "validation"], c(0.15, 0.3, 0.45))
  expect_equal(df$epoch[df$metric == "loss" & df$data == "training"], 1:3)
})

test_that("print() shows the epochs and the last values", {
  out <- capture.output(print(fake_history()))
  expect_match(out[1], "3 epochs")
  expect_true(any(grepl("val_accuracy = 0.45", out, fixed = TRUE)))
})

# The pixels of `history` plotted into a 600 x 600 PNG, and where each series' colour is.
plotted <- function(history, ...) {
  file <- withr::local_tempfile(fileext = ".png")
  grDevices::png(file, width = 600, height = 600)
  plot(history, ...)
  grDevices::dev.off()
  image <- png::readPNG(file)
  near <- function(hex) {
    rgb <- grDevices::col2rgb(hex)[, 1] / 255
    abs(image[, , 1] - rgb[[1]]) < 0.03 & abs(image[, , 2] - rgb[[2]]) < 0.03 & abs(image[, , 3] - rgb[[3]]) < 0.03
  }
  list(dim = dim(image)[1:2], training = which(rowSums(near("#1b6ca8")) > 0),
       validation = which(rowSums(near("#d1495b")) > 0))
}

test_that("plot() draws one panel per metric, stacked, with training and validation curves", {
  skip_if_not_installed("png")
  both <- plotted(fake_history())
  expect_equal(both$dim, c(600L, 600L))
  # two metrics: curves of both data sets in the top panel (loss) and in the bottom one (accuracy)
  for (rows in both[c("training", "validation")]) {
    expect_true(any(rows < 300) && any(rows > 300))
  }
  one <- plotted(fake_history(), metrics = "loss")  # one panel: the curves fill the height
  expect_gt(diff(range(one$training)), diff(range(both$training[both$training < 300])))
})

test_that("plot() draws no validation curve for a history without validation", {
  skip_if_not_installed("png")
  history <- fake_history()
  history$metrics <- history$metrics[c("loss", "accuracy")]
  drawn <- plotted(history)
  expect_gt(length(drawn$training), 0L)
  expect_length(drawn$validation, 0L)
})

test_that("plot() names the metrics a history has when asked for another", {
  expect_error(plot(fake_history(), metrics = "top9"), "No metric 'top9'.*'loss', 'accuracy'")
})
