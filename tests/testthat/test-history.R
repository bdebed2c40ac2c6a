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

test_that("plot() draws one panel per metric", {
  file <- withr::local_tempfile(fileext = ".png")
  grDevices::png(file, width = 600, height = 600)
  plot(fake_history())
  grDevices::dev.off()
  expect_gt(file.size(file), 2000)
  expect_error(plot(fake_history(), metrics = "top9"), "No metric 'top9'")
})
