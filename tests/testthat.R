library(testthat)
library(alexnet)

test_check("alexnet")
