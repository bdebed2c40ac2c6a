# The results of the data functions and of a Spark run print a few lines, and stay the lists (and data frame)
# they were: `$`, `[[`, nrow(), and a partition still trains. Built here by hand: no Python needed.

synthetic_result <- function() {
  alexnet:::new_alexnet_imagenet(list(
    path = "/data/imagenet", classes = 3L, images = 30L, val_images = 6L, bytes = 1234567,
    categories = c("n01440764", "n01443537", "n01484850"),
    quirks = list(cmyk = "/data/imagenet/a.JPEG", grayscale = "/data/imagenet/b.JPEG", empty = "/data/imagenet/e.JPEG")
  ))
}

upload_result <- function() {
  alexnet:::new_alexnet_upload(list(
    board = "/boards/imagenet", source = "/data/imagenet", layout = "kaggle", categories = 3L,
    uploaded = c("n01440764", "n01443537"), skipped = "n01484850", excluded = list(),
    images = 28L, val_images = 6L, bytes = 2500000, uploaded_bytes = 1700000, seconds = 2.34, mb_per_s = 0.726,
    bad_images = data.frame(category = c("n01440764", "n01440764"), split = "train",
                            file = c("/data/imagenet/t.JPEG", "/data/imagenet/e.JPEG"),
                            reason = c("truncated or corrupt", "empty file")),
    pruned_versions = 0L
  ))
}

partition_result <- function() {
  alexnet:::new_alexnet_partition(list(
    image = c("/cache/n01/a.JPEG", "/cache/n01/b.JPEG", "/cache/n02/c.JPEG"), category = c("n01", "n01", "n02"),
    categories = c("n01", "n02"), label = c(0L, 0L, 2L), num_classes = 4L, val_image = "/cache/n02/v.JPEG",
    val_label = 2L, val_category = "n02", partition = 0L, total = 2L, partition_sizes = c(3L, 4L),
    board = "/boards/imagenet", cache_dir = "/cache", downloaded_bytes = 1000, seconds = 0.1
  ))
}

spark_result <- function() {
  history <- structure(list(params = list(), metrics = list(loss = c(2, 1.5))), class = "alexnet_history")
  frame <- data.frame(worker = c(1L, 0L), workers = 2L, address = c("10.0.0.2:4040", "10.0.0.1:4040"),
                      chief = c(FALSE, TRUE), categories = c("n03,n04", "n01,n02"), train_images = c(40L, 42L),
                      epochs = 2L, loss = c(1.51, 1.4987), accuracy = c(0.4, 0.45), val_accuracy = NA_real_,
                      images_per_second = c(12.34, 12.5), weights_sha256 = "abc", attempt = 2L)
  frame$history <- list(history, history)
  alexnet:::new_alexnet_spark_run(frame[order(frame$worker), ])
}

test_that("a synthetic ImageNet, an upload and a partition print what was done, how much and where", {
  expect_snapshot(print(synthetic_result()))
  expect_snapshot(print(upload_result()))
  expect_snapshot(print(partition_result()))
  expect_tidy_lines(capture.output(print(synthetic_result()), print(upload_result()), print(partition_result())))
  expect_output(print(upload_result()), "2 bad images left out \\(see \\$bad_images\\)")
  # validation images added to a category already there (its training images uploaded before) are said
  added <- upload_result()
  added$val_uploaded <- c("n01440764", "n01484850")
  expect_output(print(added), "\\(2 uploaded, 1 already there, validation images of 1 added\\)")
  expect_output(print(partition_result()), "Partition 0 of 2 \\(0-based\\): 2 categories of 4, 3 training images")
})

test_that("a board's URL prints without its password", {
  secret <- partition_result()
  secret$board <- "https://alice:Sup3rS3cret@boards.example.org/imagenet"
  out <- capture.output(print(secret))
  expect_false(any(grepl("Sup3rS3cret", out, fixed = TRUE)))
  expect_true(any(grepl("From board https://alice:***@boards.example.org/imagenet, cache /cache", out, fixed = TRUE)))
})

test_that("a Spark run prints one line per worker, not the nested histories", {
  expect_snapshot(print(spark_result()))
  expect_tidy_lines(capture.output(print(spark_result())))
  out <- capture.output(print(spark_result()))
  expect_length(out, 5L)
  expect_identical(out[4:5], c("Every worker holds the same weights", "Weights: sha256 abc"))
  expect_match(out[[2]], "^  worker 0 \\(chief\\) at 10.0.0.1:4040: 2 categories, 42 images, 2 epochs, loss 1.499")
  expect_no_match(paste(out, collapse = "\n"), "params|metrics")
})

test_that("a Spark run's worker lines give where each worker's TensorFlow listened, as the command line does", {
  run <- spark_result()
  run$tf_address <- c("10.0.0.1:8000", "10.0.0.2:8001")
  out <- capture.output(print(run))
  expect_match(out[[2]], "^  worker 0 \\(chief\\) at 10.0.0.1:8000: 2 categories")
  expect_match(out[[3]], "^  worker 1 at 10.0.0.2:8001: 2 categories")
  expect_no_match(paste(out, collapse = "\n"), ":4040", fixed = TRUE)  # not the Spark tasks' addresses
})

test_that("a Spark run prints what its chief says of the exchange against the computation, once", {
  run <- spark_result()
  advice <- paste("One exchange alone takes 2.92 s a step against 0.68 s of computation: about 0.19 of linear",
                  "scaling if none of it overlaps. To keep the workers busy: allreduce_precision = 'bfloat16'")
  run$history[[1]]$params$communication_advice <- advice
  run$history[[2]]$params$communication_advice <- "a worker's own, not shown"
  out <- capture.output(print(run))
  expect_length(out, 6L)
  expect_identical(out[[6]], paste0("Communication: ", sub("'bfloat16'", '"bfloat16"', advice, fixed = TRUE)))
  expect_false(any(grepl("not shown", out)))
})

test_that("the results are the lists and data frame they were", {
  upload <- upload_result()
  expect_equal(nrow(upload$bad_images), 2L)
  expect_equal(upload[["uploaded"]], c("n01440764", "n01443537"))
  expect_equal(synthetic_result()$categories[[2]], "n01443537")
  part <- partition_result()
  expect_true(is.list(part))
  expect_equal(part$image[[3]], "/cache/n02/c.JPEG")

  run <- spark_result()
  expect_s3_class(run, "data.frame")
  expect_equal(nrow(run), 2L)
  expect_equal(run$worker, c(0L, 1L))
  expect_s3_class(run$history[[1]], "alexnet_history")
  frame <- as.data.frame(run)
  expect_identical(class(frame), "data.frame")
  expect_false("history" %in% names(frame))
  expect_equal(frame$loss, c(1.4987, 1.51))
})

test_that("as.data.frame() of a partition has one row per image, training then validation", {
  frame <- as.data.frame(partition_result())
  expect_equal(frame$image, c("/cache/n01/a.JPEG", "/cache/n01/b.JPEG", "/cache/n02/c.JPEG", "/cache/n02/v.JPEG"))
  expect_equal(frame$label, c(0L, 0L, 2L, 2L))
  expect_equal(frame$split, c("train", "train", "train", "validation"))
  hand_made <- as.data.frame(alexnet:::new_alexnet_partition(list(image = "a.JPEG", category = "n01",
                                                                  categories = "n01")))
  expect_equal(hand_made$label, NA_integer_)
})

test_that("a partition reaches the core as the plain list it is, one-element fields as lists", {
  data <- alexnet:::train_data(alexnet:::new_alexnet_partition(list(
    image = "a.JPEG", category = "n01", categories = "n01", label = 0L, num_classes = 1L,
    class_ids = "n01", class_names = "tench"
  )))
  expect_null(attr(data, "class"))
  for (field in c("image", "category", "categories", "label", "class_ids", "class_names")) {
    expect_type(data[[field]], "list")
  }
  expect_type(data$num_classes, "integer")
})

test_that("a model and an evaluation print their summary; an evaluation tabulates", {
  model <- alexnet:::new_alexnet_model(list(
    path = "/cache/models/alexnet", name = "alexnet", version = "20250101T000000Z-abc12", board = "/boards/imagenet",
    image_size = 224L, num_classes = 1000L, class_ids = c("n01", "n02"), class_names = c("tench", "goldfish"),
    epochs = 90L, metrics = list(loss = list(2.1, 1.8), val_accuracy = list(0.5, 0.575))
  ))
  expect_snapshot(print(model))
  expect_output(print(model), "AlexNet model alexnet@20250101T000000Z-abc12: 1,000 classes, images of 224 pixels")
  # the count of validation images the card holds is said after the metrics, as a count
  counted <- model
  counted$metrics$val_images <- list(40, 40)
  expect_output(print(counted), "val_accuracy 0.575 (validation over 40 images)", fixed = TRUE)
  expect_no_match(paste(capture.output(print(counted)), collapse = "\n"), "val_images")
  # top-5 of 5 classes or fewer says nothing: left out, as a history's print leaves it out
  small <- model
  small$metrics <- list(accuracy = list(0.5), top5_accuracy = list(1), val_top5_accuracy = list(1))
  for (classes in c(4L, 1000L)) {
    small$num_classes <- classes
    shown <- paste(capture.output(print(small)), collapse = "\n")
    expect_identical(grepl("top5", shown), classes > 5L)
    expect_match(shown, "final accuracy 0.500")
  }
  dict <- alexnet:::core_model(model)
  expect_null(attr(dict, "class"))
  expect_type(dict$class_ids, "list")

  evaluation <- alexnet:::new_alexnet_evaluation(list(
    images = 1000L, top1_correct = 612L, top5_correct = 850L, top1_accuracy = 0.612, top5_accuracy = 0.85,
    top_k = 5L, crops = 10L, protocol = "10 crops: corners, centre and their mirrors", image_size = 224L, num_classes = 1000L,
    images_per_second = 81.25, seconds = 12.3, bad_images = list(), model = "/cache/models/alexnet"
  ))
  expect_snapshot(print(evaluation))
  expect_tidy_lines(c(capture.output(print(model)), capture.output(print(evaluation))))
  expect_output(print(evaluation), "Top-1 accuracy 61.2% (612 of 1,000 images), top-5 85.0% (850)", fixed = TRUE)
  frame <- as.data.frame(evaluation)
  expect_equal(nrow(frame), 1L)
  expect_equal(frame$top1_accuracy, 0.612)
  # the validation images the upload left out, known of a board's and not of data given: rows of one frame
  known <- evaluation
  known$left_out_at_upload <- 3L
  both <- rbind(as.data.frame(known), frame)
  expect_identical(both$left_out_at_upload, c(3L, NA_integer_))
  few <- evaluation
  few$num_classes <- 4L
  expect_output(print(few), "Top-1 accuracy 61.2% (612 of 1,000 images)\n", fixed = TRUE)
  expect_no_match(paste(capture.output(print(few)), collapse = "\n"), "top-5")
})

test_that("an evaluation's counts by class are data frames, printed as its lowest classes and plotted", {
  class_row <- function(index, id, name, images, top1, top5, confused_with, confused) {
    list(index = index, id = id, name = name, images = images, top1_correct = top1, top5_correct = top5,
         top1_accuracy = top1 / images, top5_accuracy = top5 / images, confused_with = confused_with,
         confused_images = confused)
  }
  evaluation <- alexnet:::new_alexnet_evaluation(list(
    images = 12L, top1_correct = 7L, top5_correct = 11L, top1_accuracy = 7 / 12, top5_accuracy = 11 / 12,
    top_k = 5L, crops = 1L, protocol = "centre crop", image_size = 64L, num_classes = 8L, bad_images = list(),
    per_class = list(class_row(0L, "n01", "tench, Tinca tinca", 4L, 1L, 3L, "n02", 3L),
                     class_row(1L, "n02", "goldfish, Carassius auratus", 4L, 4L, 4L, "", 0L),
                     class_row(5L, "n06", "ostrich", 4L, 2L, 4L, "n01", 1L)),
    confusions = list(
      list(index = 0L, id = "n01", name = "tench, Tinca tinca", predicted_index = 1L, predicted_id = "n02",
           predicted_name = "goldfish, Carassius auratus", images = 3L),
      list(index = 5L, id = "n06", name = "ostrich", predicted_index = 0L, predicted_id = "n01",
           predicted_name = "tench, Tinca tinca", images = 1L))
  ))
  expect_s3_class(evaluation$per_class, "data.frame")
  expect_equal(evaluation$per_class$confused_with, c("n02", "", "n01"))
  expect_type(evaluation$per_class$top1_accuracy, "double")
  expect_equal(evaluation$confusions$predicted_index, c(1L, 0L))
  out <- capture.output(print(evaluation))
  # the classes below 100% only: goldfish, all right, is not among the lowest
  expect_equal(out[[3]], "Lowest top-1: tench 25.0% (1 of 4), ostrich 50.0% (2 of 4)")
  expect_equal(out[[4]], "Most confused: tench taken for goldfish (3 images), ostrich taken for tench (1 image)")
  expect_tidy_lines(out)
  # a share without images keeps the tables' columns
  empty <- alexnet:::new_alexnet_evaluation(list(images = 0L, per_class = list(), confusions = list()))
  expect_equal(nrow(empty$per_class), 0L)
  expect_equal(names(empty$per_class), names(evaluation$per_class))
  expect_equal(names(empty$confusions), names(evaluation$confusions))
  expect_no_match(paste(capture.output(print(empty)), collapse = "\n"), "Lowest")
  # every class all right: none is low, no line
  right <- alexnet:::new_alexnet_evaluation(list(
    images = 8L, top1_correct = 8L, top5_correct = 8L, top1_accuracy = 1, top5_accuracy = 1, top_k = 5L,
    num_classes = 2L, per_class = list(class_row(0L, "n01", "tench, Tinca tinca", 4L, 4L, 4L, "", 0L),
                                       class_row(1L, "n02", "goldfish, Carassius auratus", 4L, 4L, 4L, "", 0L)),
    confusions = list()))
  expect_no_match(paste(capture.output(print(right)), collapse = "\n"), "Lowest")
  pdf(NULL)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  ranked <- plot(evaluation, top = 2)
  expect_equal(ranked$id, c("n01", "n06", "n02"))
  recorded <- paste(utils::capture.output(str(grDevices::recordPlot()[[1]])), collapse = "\n")
  expect_match(recorded, "Accuracy by class: 3 classes", fixed = TRUE)
  expect_match(recorded, "ostrich", fixed = TRUE)
  expect_no_match(recorded, "goldfish", fixed = TRUE)  # only the 2 lowest are named
  plot(evaluation, main = "Run 7", col.axis = "grey40")
  recorded <- paste(utils::capture.output(str(grDevices::recordPlot()[[1]])), collapse = "\n")
  expect_match(recorded, "Run 7", fixed = TRUE)
  expect_match(recorded, "grey40", fixed = TRUE)
  expect_error(plot(empty), "no counts by class", class = "alexnet_error")
  # the ranks' axis has whole numbers only
  plot(evaluation)
  drawn <- function(what) {
    calls <- Filter(function(item) identical(item[[2]][[1]]$name, what), grDevices::recordPlot()[[1]])
    lapply(calls, function(item) item[[2]][-1])
  }
  expect_equal(Filter(Negate(is.null), lapply(drawn("C_axis"), function(args) if (args[[1]] == 1) args[[2]]))[[1]],
               c(1, 2, 3))
  # a name is slanted towards the plot's middle: rightwards left of it, leftwards right of it (ending at its point),
  # upwards from a low accuracy, downwards from a high one
  expect_equal(alexnet:::name_placements(c(1, 2, 3), c(0, 0.6, 1), 3),
               data.frame(srt = c(30, -30, 30), adj = c(0, 0, 1)))
  for (top in list(NA, "a", -1, 1.5, c(1, 2))) {
    expect_error(plot(evaluation, top = top), "`top` must be a whole number >= 0", class = "alexnet_error")
  }
  # one class scored: no lowest classes to rank, but what its images were taken for
  one <- alexnet:::new_alexnet_evaluation(list(
    images = 4L, top1_correct = 1L, top5_correct = 3L, top1_accuracy = 0.25, top5_accuracy = 0.75, top_k = 5L,
    num_classes = 8L, per_class = list(class_row(0L, "n01", "tench, Tinca tinca", 4L, 1L, 3L, "n02", 3L)),
    confusions = list(list(index = 0L, id = "n01", name = "tench, Tinca tinca", predicted_index = 1L,
                           predicted_id = "n02", predicted_name = "goldfish, Carassius auratus", images = 3L))))
  out <- capture.output(print(one))
  expect_no_match(paste(out, collapse = "\n"), "Lowest")
  expect_equal(out[[length(out)]], "Most confused: tench taken for goldfish (3 images)")
})

test_that("an export prints what it is, where it went and its signatures", {
  export <- alexnet:::new_alexnet_export(list(
    path = "/serving/alexnet/1", format = "savedmodel", files = list("saved_model.pb", "alexnet-model.json"),
    bytes = 250224850, model = "alexnet@20250101T000000Z-abcde", image_size = 224L, num_classes = 1000L, top = 5L,
    signatures = list(serving_default = list(inputs = list(images = "string[?]"),
                                             outputs = list(ids = "string[?,5]", ok = "bool[?]")),
                      pixels = list(inputs = list(pixels = "float32[?,224,224,3]"),
                                    outputs = list(ids = "string[?,5]"))),
    pin = list(board = "/boards/imagenet", name = "alexnet", version = "20250102T000000Z-fghij")
  ))
  out <- capture.output(print(export))
  expect_equal(out[[1]], paste("SavedModel export of alexnet@20250101T000000Z-abcde: 1,000 classes,",
                               "images of 224 pixels, top 5"))
  expect_equal(out[[2]], "Written to /serving/alexnet/1 (2 files, 250.2 MB)")
  expect_equal(out[[3]], "Pinned as alexnet version 20250102T000000Z-fghij on /boards/imagenet")
  expect_equal(out[[4]], "Signature serving_default: images string[?] -> ids string[?,5], ok bool[?]")
  expect_equal(out[[5]], "Signature pixels: pixels float32[?,224,224,3] -> ids string[?,5]")
  expect_equal(export$files, c("saved_model.pb", "alexnet-model.json"))
})
