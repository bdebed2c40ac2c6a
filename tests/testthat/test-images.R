# Images given to alexnet_predict() and alexnet_features() as paths or as encoded bytes, the features' column
# names, and the plot of an evaluation.

test_that("encoded images are given as raw vectors, alone or in a list with paths, and pixels are refused", {
  skip_if_no_alexnet()
  made <- tiny_model_and_photos(withr::local_tempdir())
  photo <- made$photos[[1]]
  bytes <- readBin(photo, "raw", file.size(photo))
  by_path <- alexnet_predict(made$model, photo, top = 2)
  by_bytes <- alexnet_predict(made$model, bytes, top = 2)
  expect_equal(by_bytes$image, rep("<bytes 0>", 2))
  expect_equal(by_bytes$id, by_path$id)
  expect_equal(by_bytes$probability, by_path$probability, tolerance = 1e-5)
  mixed <- alexnet_predict(made$model, list(made$photos[[2]], bytes), top = 1)
  expect_equal(mixed$image, c(made$photos[[2]], "<bytes 1>"))
  expect_equal(mixed$id[[2]], by_path$id[[1]])
  features <- alexnet_features(made$model, list(bytes, photo), layer = "logits")
  expect_equal(rownames(features), c("<bytes 0>", photo))
  expect_equal(unname(features[1, ]), unname(features[2, ]), tolerance = 1e-5)
  # the pixels an image holds are no image: encoded images are
  pixels <- array(0L, c(8L, 8L, 3L))
  expect_error(alexnet_predict(made$model, pixels),
               paste0("^`images` must be paths, locations or folders of images \\(a character vector\\), or encoded ",
                      "images \\(a raw vector, or a list of raw vectors and paths\\), not an integer vector of length ",
                      "192; to give pixels, encode them first, e\\.g\\. png::writePNG\\(pixels / 255\\)"),
               class = "alexnet_error")
  expect_error(alexnet_features(made$model, list(photo, 1)), "^`images` must be paths.*not a list of length 2\\.$",
               class = "alexnet_error")
  expect_error(alexnet_predict(made$model, NA_character_), "^`images` must be paths", class = "alexnet_error")
  # names, as sapply() gives them, are dropped: the values are the images (they reached Python as a dict's keys)
  named <- alexnet_predict(made$model, sapply(made$photos, identity), top = 1)
  expect_equal(named$image, made$photos)
  expect_equal(alexnet_predict(made$model, list(first = bytes), top = 2)$id, by_path$id)
  # and a partition's paths named after other paths are scored by their values, not their names
  given <- list(val_image = made$photos, val_category = c("n00000000", "n00000001"))
  plain <- alexnet_evaluate(made$model, data = given)
  given$val_image <- stats::setNames(made$photos, rev(made$photos))
  renamed <- alexnet_evaluate(made$model, data = given)
  expect_equal(renamed$top1_correct, plain$top1_correct)
  expect_equal(renamed$top5_correct, plain$top5_correct)
  given$val_image <- stats::setNames(made$photos, c("a", "b"))
  expect_equal(alexnet_evaluate(made$model, data = given)$images, 2L)
})

test_that("the columns of features are named as the command line names them (the core's `columns`)", {
  skip_if_no_alexnet()
  made <- tiny_model_and_photos(withr::local_tempdir())
  fc2 <- alexnet_features(made$model, made$photos)
  expect_equal(colnames(fc2), paste0("fc2_", 1:16))
  expect_equal(rownames(fc2), made$photos)
  logits <- alexnet_features(made$model, made$photos, layer = "logits")
  expect_equal(colnames(logits), sprintf("n0000000%d", 0:2))  # the model's classes, by WordNet id
  # a matrix that prints short: its size, layer and corner (4096 columns printed megabytes)
  expect_s3_class(fc2, "alexnet_features")
  expect_true(is.matrix(fc2) && is.numeric(fc2))
  out <- capture.output(print(fc2))
  expect_match(out[1], paste0("^AlexNet features: ", length(made$photos), " images x 16 values of layer fc2$"))
  expect_lt(sum(nchar(out)), 1000)
  expect_equal(dim(as.matrix(dist(fc2))), rep(length(made$photos), 2))
})

# An evaluation as alexnet_evaluate() returns it, of six classes, two of them at a top-1 accuracy of 0 and two at 1.
evaluation_of_six <- function() {
  per_class <- data.frame(index = 0:5, id = sprintf("n0000000%d", 0:5),
                          name = c("tench, Tinca tinca", "goldfish, Carassius auratus", "great white shark",
                                   "tiger shark, Galeocerdo cuvieri", "hammerhead", "electric ray"),
                          images = 2L, top1_correct = c(0L, 0L, 1L, 1L, 2L, 2L), top5_correct = c(1L, 2L, 2L, 2L, 2L, 2L))
  per_class$top1_accuracy <- per_class$top1_correct / per_class$images
  per_class$top5_accuracy <- per_class$top5_correct / per_class$images
  structure(list(images = 12L, top1_correct = 6L, top5_correct = 11L, top1_accuracy = 0.5, top5_accuracy = 11 / 12,
                 top_k = 5L, num_classes = 6L, per_class = per_class), class = "alexnet_evaluation")
}

test_that("plot() of an evaluation writes the names of classes at 0 and at 1 towards the inside of the plot", {
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  expect_no_warning(ranked <- plot(evaluation_of_six(), top = 6))
  expect_equal(ranked$top1_accuracy, c(0, 0, 0.5, 0.5, 1, 1))
  # the names as text() drew them (the plot's display list): label, point, angle and horizontal adjustment
  names <- c("tench", "goldfish", "great white shark", "tiger shark", "hammerhead", "electric ray")
  texts <- Filter(function(item) identical(item[[2]][[1]]$name, "C_text"), grDevices::recordPlot()[[1]])
  drawn <- do.call(rbind, lapply(texts, function(item) {
    args <- item[[2]][-1]
    data.frame(label = trimws(args[[2]]), x = args[[1]]$x, y = args[[1]]$y,
               srt = args$srt %||% NA_real_, adj = args[[3]][1] %||% NA_real_)
  }))
  drawn <- drawn[drawn$label %in% names, ]
  expect_equal(drawn$label, names)  # in rank order, each at its point
  expect_equal(drawn$x, 1:6)
  expect_equal(drawn$y, ranked$top1_accuracy)
  # each name runs from its point towards the middle: up from 0, down from 1, rightwards on the left half
  runs <- ifelse(drawn$adj == 0, 1, ifelse(drawn$adj == 1, -1, NA))  # a name ending at its point runs back from it
  dx <- runs * cos(drawn$srt * pi / 180)
  dy <- runs * sin(drawn$srt * pi / 180)
  expect_equal(sign(dx), c(1, 1, 1, -1, -1, -1))
  expect_equal(sign(dy), c(1, 1, 1, 1, -1, -1))
})
