# What a user sees that nobody acts on stays hidden: TensorFlow's start-up lines (unless ALEXNET_TF_LOGS=1).

tf_version_output <- function(...) {
  out <- file.path(withr::local_tempdir(.local_envir = parent.frame()), "output.txt")
  version <- callr::r(function() {
    library(alexnet)
    as.character(tf_version())
  }, stdout = out, stderr = "2>&1",
  env = c(callr::rcmd_safe_env(), ALEXNET_PYTHON = alexnet_python(), TF_CPP_MIN_LOG_LEVEL = "0", ...))
  list(version = version, output = readLines(out))
}

test_that("tf_version() prints nothing; with ALEXNET_TF_LOGS=1, TensorFlow's own lines show", {
  skip_if_no_alexnet()
  skip_if_not_installed("callr")
  quiet <- tf_version_output()
  expect_match(quiet$version, "^[0-9]+\\.[0-9]+$")
  expect_equal(quiet$output, character())
  noisy <- tf_version_output(ALEXNET_TF_LOGS = "1")
  expect_equal(noisy$version, quiet$version)
  expect_gt(length(noisy$output), 0L)  # this TensorFlow prints start-up lines, which the first run hid
})

test_that("TensorFlow imported by reticulate before any call of the package prints nothing either", {
  skip_if_no_alexnet()
  skip_if_not_installed("callr")
  run <- function(...) {
    out <- file.path(withr::local_tempdir(.local_envir = parent.frame()), "output.txt")
    devices <- callr::r(function() {
      library(alexnet)
      # the original r-tensorflow/alexnet's start, TensorFlow first
      tf <- reticulate::import("tensorflow")
      strategy <- tf$distribute$MirroredStrategy()
      length(tf$config$list_physical_devices())
    }, stdout = out, stderr = "2>&1",
    env = c(callr::rcmd_safe_env(), ALEXNET_PYTHON = alexnet_python(), TF_CPP_MIN_LOG_LEVEL = "0", ...))
    list(devices = devices, output = readLines(out))
  }
  quiet <- run()
  expect_gte(quiet$devices, 1L)
  expect_equal(quiet$output, character())
  noisy <- run(ALEXNET_TF_LOGS = "1")
  expect_true(any(grepl("oneDNN|cuda|InitializeLog", noisy$output)), info = paste(noisy$output, collapse = "\n"))
})
