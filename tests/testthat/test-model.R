# After training, from R: the model as a pin, evaluated on the board's validation images, used to name photos.

test_that("the evaluation a model's card records reads back as an alexnet_evaluation", {
  # as the card of a Spark job's model with `evaluate = TRUE` holds it: counts, without the per-class tables
  card <- list(name = "alexnet", num_classes = 4L, class_ids = paste0("n0", 1:4),
               evaluation = list(images = 40L, top1_correct = 11L, top5_correct = 40L, top1_accuracy = 0.275,
                                 top5_accuracy = 1, top_k = 4L, crops = 1L, protocol = "centre crop",
                                 image_size = 64L, bad_images = list()))
  model <- alexnet:::new_alexnet_model(card)
  expect_s3_class(model$evaluation, "alexnet_evaluation")  # it was a bare list, printed as one
  expect_identical(model$evaluation$bad_images, character())
  expect_output(print(model$evaluation), "Top-1 accuracy .* of 40 images")
})

test_that("a card's count of bad images is said as that count, 0 as none", {
  # the card of a Spark job's model records how many bad images its evaluation left out, not which
  evaluation <- list(images = 40L, top1_correct = 11L, top5_correct = 40L, top1_accuracy = 0.275, top5_accuracy = 1,
                     top_k = 4L, crops = 1L, protocol = "centre crop", image_size = 64L, bad_images = 0L)
  none <- alexnet:::new_alexnet_model(list(name = "alexnet", num_classes = 4L, evaluation = evaluation))
  expect_identical(none$evaluation$bad_images, 0L)
  expect_identical(capture.output(print(none$evaluation))[[2]], "centre crop; 64 pixels")
  evaluation$bad_images <- 3L
  three <- alexnet:::new_alexnet_model(list(name = "alexnet", num_classes = 4L, evaluation = evaluation))
  expect_identical(capture.output(print(three$evaluation))[[2]], "centre crop; 64 pixels; 3 bad images left out")
})

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
  # the same counts class by class, as data frames
  expect_s3_class(whole$per_class, "data.frame")
  expect_equal(whole$per_class$id, sort(src$categories))
  expect_equal(sum(whole$per_class$images), whole$images)
  expect_equal(sum(whole$per_class$top1_correct), whole$top1_correct)
  expect_equal(sum(whole$confusions$images), whole$images - whole$top1_correct)
  expect_documented(c(names(whole$per_class), names(whole$confusions)), "alexnet_evaluate")
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
  # used where its file is missing (as on a Spark worker's machine): fetched again into the cache_dir it was read with
  expect_equal(normalizePath(model$cache_dir), normalizePath(file.path(dir, "models")))
  unlink(model$path)
  expect_equal(alexnet_predict(model, data$val_image[1:2], top = 2)$id, named$id)
  expect_true(file.exists(model$path))
  # a folder stands for its image files, in the order of their names
  photos <- file.path(dir, "photos")
  dir.create(photos)
  file.copy(data$val_image[1:2], file.path(photos, c("b.jpg", "a.JPEG")))
  writeLines("not an image", file.path(photos, "notes.txt"))
  from_folder <- alexnet_predict(model, photos, top = 2)
  expect_equal(from_folder$image, rep(file.path(photos, c("a.JPEG", "b.jpg")), each = 2))
  expect_equal(from_folder$id, named$id[c(3, 4, 1, 2)])
  expect_equal(from_folder$probability, named$probability[c(3, 4, 1, 2)], tolerance = 1e-5)
  # the values of an inner layer, a row per image named by it; the logits' softmax is the prediction
  features <- alexnet_features(model, photos)
  expect_true(is.matrix(features) && is.double(features))
  expect_equal(dim(features), c(2L, 32L))  # dense_units = 32
  expect_equal(rownames(features), file.path(photos, c("a.JPEG", "b.jpg")))
  expect_equal(attr(features, "layer"), "fc2")
  expect_true(all(features >= 0))  # after fc2's ReLU
  logits <- alexnet_features(model, photos, layer = "logits", batch_size = 1)
  expect_equal(dim(logits), c(2L, 3L))
  probabilities <- exp(logits) / rowSums(exp(logits))
  # a model trained in bfloat16 (where the machine measured it faster) gives its logits to bfloat16's precision
  expect_equal(apply(probabilities, 1, max, simplify = TRUE), from_folder$probability[c(1, 3)],
               tolerance = 1e-3, ignore_attr = TRUE)
  expect_equal(model$class_ids[apply(logits, 1, which.max)], from_folder$id[c(1, 3)])
  expect_equal(ncol(alexnet_features(model, data$val_image[1], layer = "flatten")), 9216L)
  expect_error(alexnet_features(model, photos, layer = "conv9"), "`layer` must be one of", class = "alexnet_error")
  expect_error(alexnet_features(model, file.path(dir, "no-such.jpg")), "no features were computed.*no-such\\.jpg",
               class = "alexnet_error")
  # the first convolution's filters, as pictures and as a PNG grid
  filters <- alexnet_filters(model, path = file.path(dir, "drawn", "conv1.png"))
  expect_s3_class(filters, "alexnet_filters")
  expect_documented(names(filters), "alexnet_filters")
  expect_equal(dim(filters$kernels), c(96L, 11L, 11L, 3L))
  expect_equal(filters$size, c(11L, 11L))
  expect_equal(range(filters$kernels[7, , , ]), c(0, 1))  # each filter scaled to its own range
  expect_equal(dim(filters$image), c(467L, 699L, 3L))    # 12 x 8 tiles of 55 pixels, 3 apart
  # the first tile, 3 pixels in, is the first filter: its top-left weight a 5-pixel square
  expect_equal(filters$image[4:8, 4:8, 2], matrix(round(filters$kernels[1, 1, 1, 2] * 255), 5, 5))
  expect_equal(filters$image[62:66, 4:8, 1], matrix(round(filters$kernels[13, 1, 1, 1] * 255), 5, 5))  # row 2
  expect_true(file.exists(file.path(dir, "drawn", "conv1.png")))
  expect_output(print(filters), "conv1: 96 filters of 11x11 pixels, each scaled to its own range; drawn to ")
  grDevices::pdf(file.path(dir, "filters.pdf"))
  drawn <- plot(model, main = "first layer", col.main = "grey30")
  grDevices::dev.off()
  expect_equal(drawn$kernels, filters$kernels)
  expect_null(alexnet_filters(model)$path)
  expect_error(alexnet_filters(model, path = file.path(dir, "conv1.jpg")), "does not end in \\.png",
               class = "alexnet_error")

  # exported for serving without alexnet, and carried by a new version of its pin
  served <- alexnet_export(model, file.path(dir, "served"), top = 2, board = board)
  expect_s3_class(served, "alexnet_export")
  expect_equal(served$format, "savedmodel")
  expect_true(all(file.exists(file.path(dir, "served", c("saved_model.pb", "alexnet-model.json")))))
  expect_equal(served$files[[length(served$files)]], "alexnet-model.json")
  expect_equal(served$signatures$serving_default$inputs$images, "string[?]")
  expect_equal(served$signatures$pixels$inputs$pixels, "float32[?,64,64,3]")
  expect_equal(served$pin$name, "alexnet")
  expect_output(print(served), "SavedModel export of alexnet@.*: 3 classes, images of 64 pixels, top 2")
  expect_output(print(served), "Signature serving_default: images string\\[\\?\\] -> ")
  expect_documented(names(served), "alexnet_export")
  expect_error(alexnet_export(model, file.path(dir, "served")), "exists and is not empty", class = "alexnet_error")
  expect_error(alexnet_export(model, file.path(dir, "x"), top = 0.5), "top", class = "alexnet_error")
  carried <- alexnet_model(board, "alexnet", cache_dir = file.path(dir, "models"), export = TRUE)
  expect_equal(carried$version, served$pin$version)
  expect_equal(carried$formats, c("keras", "savedmodel"))
  expect_true(file.exists(file.path(carried$export_path, "saved_model.pb")))
  expect_output(print(carried), "Carries its savedmodel export, here at")
  expect_documented(c("formats", "export_path"), "alexnet_model")
})

test_that("R's pins downloads a model pin's alexnet.keras from a folder board, as README says", {
  skip_if_no_alexnet()
  skip_if_not_installed("pins")
  dir <- withr::local_tempdir()
  made <- tiny_model_and_photos(dir)
  keras_file <- file.path(made$model, "alexnet.keras")
  # pinned as training pins its model (model_pin = "alexnet"): the core's publish_model(), with the model's card
  card_file <- file.path(made$model, "alexnet-model.json")
  card_text <- paste(readLines(card_file, warn = FALSE), collapse = "\n")
  card <- reticulate::import("alexnet.model.card")$ModelCard$from_json(card_text, card_file)
  board <- file.path(dir, "board")
  logger <- reticulate::import("logging")$getLogger("alexnet.model.publishing")  # not told that the board is a new one
  level <- logger$level
  logger$setLevel(40L)
  withr::defer(logger$setLevel(level))
  published <- reticulate::import("alexnet.model.publishing")$publish_model(board, "alexnet", keras_file, card)
  # README: `pins::pin_download(pins::board_folder(board), "alexnet")` for a folder board
  path <- pins::pin_download(pins::board_folder(board), "alexnet")
  expect_equal(basename(path), "alexnet.keras")
  expect_equal(unname(tools::md5sum(path)), unname(tools::md5sum(keras_file)))
  # the version pins reads is the one published, with the card as its metadata
  meta <- pins::pin_meta(pins::board_folder(board), "alexnet")
  expect_equal(meta$local$version, published$version)
  expect_equal(meta$user$kind, "model")
  expect_equal(unlist(meta$user$class_ids), unlist(jsonlite::read_json(card_file)$class_ids))
  expect_equal(meta$user$bytes, file.size(keras_file))
})

test_that("a run starts from a model pin, on categories of its own, and trains only from train_from", {
  skip_unless_long()
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  made <- small_partition(dir, images_per_class = 6, max_side = 96)
  src <- made$src
  board <- made$board
  data <- made$data
  alexnet_train(data = data, epochs = 1, batch_size = 4, image_size = 64, verbose = 0, dense_units = 32,
                model_pin = "base")
  base <- alexnet_model(board, "base", cache_dir = file.path(dir, "models"))
  # photos of one of the base's categories and of one of their own, a folder each
  photos <- file.path(dir, "photos")
  train <- file.path(src$path, "ILSVRC", "Data", "CLS-LOC", "train")
  dir.create(file.path(photos, "roses"), recursive = TRUE)
  file.copy(file.path(train, src$categories[[1]]), photos, recursive = TRUE)
  file.copy(list.files(file.path(train, src$categories[[2]]), full.names = TRUE), file.path(photos, "roses"))
  own <- file.path(dir, "own")
  uploaded <- imagenet_upload(photos, board = own, val_share = 0.25)  # a validation set held out of the folders
  expect_gt(uploaded$val_images, 1L)
  mine <- imagenet_partition(partition = 0, total = 1, board = own, cache_dir = file.path(dir, "cache-own"))
  history <- alexnet_train(data = mine, epochs = 1, batch_size = 4, image_size = 64, verbose = 0, dense_units = 32,
                           initial_model = base, train_from = "fc1", model_dir = file.path(dir, "tuned"))
  started <- history$params$started_from
  expect_equal(started$model, paste0("base@", base$version))
  expect_equal(c(started$classes_kept, started$classes_new), c(1L, 1L))
  expect_equal(unlist(started$layers), c("conv1", "conv2", "conv3", "conv4", "conv5", "fc1", "fc2"))
  expect_equal(history$params$train_from, "fc1")
  expect_equal(history$params$val_images, uploaded$val_images)  # every held-out image validated each epoch
  expect_output(print(history), paste0("Started from base@", base$version, ": its weights in every layer, of the ",
                                       "last one for 1 of 2 classes; the layers from fc1 on learning"))
  # the first convolution is the base's, filter for filter
  expect_identical(alexnet_filters(file.path(dir, "tuned"))$kernels, alexnet_filters(base)$kernels)
  tuned <- jsonlite::read_json(file.path(dir, "tuned", "alexnet-model.json"))
  expect_equal(unlist(tuned$class_ids), sort(c(src$categories[[1]], "roses")))
  expect_equal(tuned$initial_model, paste0("base@", base$version))
  pinned <- alexnet_train(data = mine, epochs = 1, batch_size = 4, image_size = 64, verbose = 0, dense_units = 32,
                          initial_model = file.path(dir, "tuned"), train_from = "logits", model_pin = "tuned")
  expect_equal(pinned$params$started_from$classes_kept, 2L)  # the same classes: every weight taken
  expect_output(print(alexnet_model(own, "tuned")), paste0("Trained 1 epoch from ", file.path(dir, "tuned")))
  expect_error(alexnet_train(data = mine, train_from = "fc1"), "`initial_model` as a model_dir or a model pin",
               class = "alexnet_error")
  expect_error(alexnet_train(data = mine, initial_model = 3), "`initial_model` must be one string or an object",
               class = "alexnet_error")
})
