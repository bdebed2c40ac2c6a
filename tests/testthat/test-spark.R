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
})

test_that("a malformed barrier list gets an error that shows the expected shape", {
  expect_error(tf_config_from_barrier(list(partition = 0)), "barrier = TRUE")
  skip_if_no_alexnet()
  expect_error(tf_config_from_barrier(list(address = "h:1", partition = 3)), "0\\.\\.0")
})
