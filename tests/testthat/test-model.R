# After training, from R: the model as a pin, evaluated on the board's validation images, used to name photos.

test_that("a model trained with model_pin is read back, evaluated and names images, from R", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "imagenet"), classes = 3, images_per_class = 8,
                            val_per_class = 2, max_side = 96)
  board <- file.path(dir, "board")
  imagenet_upload(src$path, board = board, workers = 2)
  data <- imagenet_partition(partition = 0, total = 1, board = board, cache_dir = file.path(dir, "cache"))
  history <- alexnet_train(data = data, epochs = 1, batch_size = 4, image_size = 64, parallel = 2, verbose = 0,
                           dense_units = 32, model_dir = file.path(dir, "model"), model_pin = "alexnet")
  expect_equal(history$model_pin$name, "alexnet")

  model <- alexnet_model(board, "alexnet", cache_dir = file.path(dir, "models"))
  expect_s3_class(model, "alexnet_model")
  expect_equal(model$version, history$model_pin$version)
  expect_equal(model$class_ids, sort(src$categories))
  expect_equal(model$image_size, 64L)
  expect_output(print(model), "alexnet")

  whole <- alexnet_evaluate(model, board = board, cache_dir = file.path(dir, "val"))
  expect_s3_class(whole, "alexnet_evaluation")
  expect_equal(whole$images, 6L)
  expect_equal(whole$top1_accuracy, whole$top1_correct / whole$images)
  expect_equal(whole$top_k, 3L)
  expect_equal(whole$top5_correct, 6L)  # top-3 of 3 classes holds every label
  expect_output(print(whole), "Top-1 accuracy .* of 6 images")
  expect_documented(names(model), "alexnet_model")
  expect_documented(names(whole), "alexnet_evaluate")
  # the partition's validation images are the board's here; the saved model_dir gives the same counts
  same <- alexnet_evaluate(file.path(dir, "model"), data = data)
  expect_equal(same$top1_correct, whole$top1_correct)
  ten <- alexnet_evaluate(model, data = data, crops = 10)
  expect_equal(ten$crops, 10L)
  expect_equal(ten$images, 6L)
  # scored 32 pixels above the size it trained at: the model takes every size
  bigger <- alexnet_evaluate(model, data = data, image_size = 96)
  expect_equal(bigger$image_size, 96L)
  expect_equal(bigger$images, 6L)
  expect_error(alexnet_evaluate(model, data = data, image_size = 2.5), "image_size", class = "alexnet_error")

  named <- alexnet_predict(model, data$val_image[1:2], top = 2)
  expect_s3_class(named, "data.frame")
  expect_equal(nrow(named), 4L)
  expect_equal(named$rank, c(1L, 2L, 1L, 2L))
  expect_documented(names(named), "alexnet_predict")
  expect_true(all(named$id %in% src$categories))
  expect_true(all(diff(named$probability[1:2]) <= 0))
  expect_error(alexnet_predict(model, file.path(dir, "no-such.jpg")), "no-such\\.jpg")
})
