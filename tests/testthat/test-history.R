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
  expect_false(any(grepl("best epoch", out)))
})

test_that("print() says which epoch a run kept with keep_best", {
  h <- fake_history()
  h$metrics$val_accuracy <- c(0.15, 0.5, 0.45)
  h$best_epoch <- 2L
  out <- capture.output(print(h))
  expect_true(any(out == "Kept the best epoch: 2 (val_accuracy = 0.5)"), info = out)
})

test_that("print() says when a multi-worker run's workers ended with different weights", {
  h <- fake_history()
  said <- "The workers ended with different weights: the chief's model is the one saved and published"
  for (agree in list(NULL, TRUE)) {
    h$weights_agree <- agree
    expect_false(any(startsWith(capture.output(print(h)), said)))
  }
  h$weights_agree <- FALSE
  out <- capture.output(print(h))
  expect_identical(out[[length(out)]], paste(said, "(its log names the workers apart)."))
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
  expect_error(plot(fake_history(), metrics = "top9"), "No metric \"top9\"", class = "alexnet_error")
})

few_classes_history <- function(classes) {
  h <- fake_history()
  h$params$num_classes <- classes
  h$metrics$top5_accuracy <- c(1, 1, 1)
  h$metrics$val_top5_accuracy <- c(1, 1, 1)
  h
}

test_that("top-5 accuracy is shown only when there are more than 5 classes", {
  few <- capture.output(print(few_classes_history(4L)))
  expect_false(any(grepl("top5", few)))
  many <- capture.output(print(few_classes_history(10L)))
  expect_true(any(grepl("val_top5_accuracy = 1", many, fixed = TRUE)))
  expect_false("top5_accuracy" %in% summary(few_classes_history(5L))$metric)
  expect_true("top5_accuracy" %in% summary(few_classes_history(6L))$metric)
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_setequal(names(attr(plot(few_classes_history(4L)), "legends")), c("loss", "accuracy"))
  expect_setequal(names(attr(plot(few_classes_history(10L)), "legends")), c("loss", "accuracy", "top5_accuracy"))
})

test_that("plot() keeps its legend above every point and passes graphical parameters on", {
  pdf(NULL)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  h <- fake_history()
  drawn <- plot(h, main = "Run 7", col.axis = "grey40")
  recorded <- paste(utils::capture.output(str(grDevices::recordPlot()[[1]])), collapse = "\n")
  expect_match(recorded, "Run 7", fixed = TRUE)
  expect_match(recorded, "grey40", fixed = TRUE)
  df <- as.data.frame(h)
  for (metric in c("loss", "accuracy")) {
    box <- attr(drawn, "legends")[[metric]]$rect
    expect_gt(box$top - box$h, max(df$value[df$metric == metric]))
  }
})

test_that("summary() gives the last and best value of each metric", {
  s <- summary(fake_history())
  expect_s3_class(s, "summary.alexnet_history")
  expect_equal(s$metric, c("loss", "accuracy"))
  expect_equal(s$training, c(1.5, 0.5))
  expect_equal(s$validation, c(1.7, 0.45))
  expect_equal(s$best, c(1.7, 0.45))
  expect_equal(s$best_epoch, c(3L, 3L))
  out <- capture.output(print(s))
  expect_match(out[1], "over 3 epochs")
  h <- fake_history()
  h$metrics$val_loss <- c(1.2, 1.4, 1.7)
  expect_equal(summary(h)$best_epoch[[1]], 1L)
  # a history without any epoch's metrics (a resumed run's that lost them): an empty summary, no error
  h$metrics <- list()
  expect_equal(nrow(summary(h)), 0L)
})

test_that("a resumed run, and one that found every epoch done, say so", {
  h <- fake_history()
  expect_null(alexnet:::resume_note(h))
  h$params[c("initial_epoch", "initial_step", "checkpoint_dir")] <- list(1L, 5L, "/runs/1")
  expect_equal(alexnet:::resume_note(h), "Resumed from /runs/1 at epoch 2, step 5.")
  expect_true(any(grepl("Resumed from /runs/1", capture.output(print(h)), fixed = TRUE)))
  h$params[c("initial_epoch", "initial_step")] <- list(3L, 0L)
  expect_equal(alexnet:::resume_note(h), paste("All 3 epochs were trained before, in /runs/1: nothing was left to train",
                                               "(a larger `epochs` trains further)."))
})

# A history as alexnet_train() returns it: the metrics, and apart from them the schedule (per epoch the image size
# and the learning rate, and the core's one-line summary of it with the precision).
scheduled_history <- function() {
  h <- fake_history()
  h$metrics$loss <- c(h$metrics$loss, 1.3)
  h$metrics$accuracy <- c(h$metrics$accuracy, 0.55)
  h$metrics$val_loss <- c(h$metrics$val_loss, 1.6)
  h$metrics$val_accuracy <- c(h$metrics$val_accuracy, 0.5)
  h$schedule <- list(image_size = c(64L, 64L, 96L, 96L), learning_rate = c(0.02, 0.03, 0.04, 0.04),
                     summary = paste("image size 64 -> 96, learning rate 0.02 -> 0.03 -> 0.04, precision bfloat16",
                                     "(auto: the CPU has avx512_bf16)"))
  h$params[c("epochs", "image_size", "precision", "precision_reason")] <-
    list(4L, c(64, 96), "bfloat16", "auto: the CPU has avx512_bf16")
  alexnet:::new_alexnet_history(h)
}

test_that("print() shows the schedule on a line of its own, apart from the final metrics", {
  h <- scheduled_history()
  expect_identical(h$schedule$image_size, c(64L, 64L, 96L, 96L))
  out <- capture.output(print(h))
  expect_true(any(out == paste("Schedule: image size 64 -> 96, learning rate 0.02 -> 0.03 -> 0.04,",
                               "precision bfloat16 (auto: the CPU has avx512_bf16)")), info = out)
  expect_tidy_lines(out)
  expect_tidy_lines(capture.output(print(summary(h))))
  final <- grep("^Final epoch:", out, value = TRUE)
  expect_match(final, "val_accuracy = 0.5")
  expect_no_match(final, "image_size|learning_rate")
  expect_false(any(grepl("^image_size:", out)), info = "several sizes: shown in the schedule, not as one size")
  # a history without a schedule prints no schedule line
  expect_false(any(grepl("Schedule", capture.output(print(fake_history())))))
})

test_that("print() of a multi-worker run's history says what its exchange costs and what would send less", {
  h <- scheduled_history()
  expect_false(any(grepl("^Communication", capture.output(print(h)))), info = "one worker: nothing to say")
  h$params$communication_advice <- paste("One exchange alone takes 0.87 s a step against 0.68 s of computation",
                                         "(float32 on the wire): about 0.44 of linear scaling if none of it overlaps.")
  out <- capture.output(print(h))
  expect_identical(grep("^Communication", out, value = TRUE), paste0("Communication: ", h$params$communication_advice))
  expect_identical(grep("^Schedule", out) + 1L, grep("^Communication", out))
})

test_that("summary() and plot() show the metrics; as.data.frame() has the schedule too, as such", {
  h <- scheduled_history()
  expect_equal(summary(h)$metric, c("loss", "accuracy"))
  df <- as.data.frame(h)
  expect_equal(df$value[df$metric == "learning_rate"], c(0.02, 0.03, 0.04, 0.04))
  expect_equal(df$value[df$metric == "image_size"], c(64, 64, 96, 96))
  expect_equal(unique(df$data[df$metric %in% c("image_size", "learning_rate")]), "schedule")
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_setequal(names(attr(plot(h), "legends")), c("loss", "accuracy"))
  expect_named(attr(plot(h, metrics = "learning_rate"), "legends"), "learning_rate")
})

test_that("the count of validation images is told with the final metrics, not drawn or summarised as one", {
  h <- fake_history()
  h$metrics$val_images <- c(42, 42, 42)
  final <- grep("^Final epoch:", capture.output(print(h)), value = TRUE)
  expect_match(final, "val_accuracy = 0.45 (validation over 42 images)", fixed = TRUE)
  expect_no_match(final, "val_images")
  expect_equal(summary(h)$metric, c("loss", "accuracy"))
  df <- as.data.frame(h)
  expect_equal(df$value[df$metric == "images" & df$data == "validation"], c(42, 42, 42))
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_setequal(names(attr(plot(h), "legends")), c("loss", "accuracy"))
  expect_named(attr(plot(h, metrics = "images"), "legends"), "images")
  # a history from before validation counted its images prints as it did
  expect_no_match(grep("^Final epoch:", capture.output(print(fake_history())), value = TRUE), "validation over")
})

test_that("plot() refuses `metrics` that name nothing, and sets a rate's axis title clear of its tick labels", {
  for (metrics in list(character(0), NA_character_, 1)) {
    expect_error(plot(fake_history(), metrics = metrics), "`metrics` must name one or more metrics",
                 class = "alexnet_error")
  }
  h <- fake_history()
  h$schedule <- list(image_size = c(64L, 64L, 64L), learning_rate = c(0.0001, 0.00015, 0.00005))
  pdf(NULL)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  plot(h, metrics = c("loss", "learning_rate"))
  titles <- Filter(function(item) identical(item[[2]][[1]]$name, "C_title"), grDevices::recordPlot()[[1]])
  lines <- vapply(titles, function(item) {
    args <- item[[2]][-1]
    if (identical(args[[4]], "learning_rate")) as.numeric(args[[5]]) else NA_real_
  }, numeric(1))
  # "0.00015" is seven characters wide: its title stands further out than an accuracy's ("0.4") would
  expect_gt(max(lines, na.rm = TRUE), 2.6)
  # the title drawn apart follows the panel's label settings, and none is drawn without annotations
  plot(h, metrics = "learning_rate", col.lab = "red")
  drawn <- Filter(function(item) identical(item[[2]][[1]]$name, "C_title"), grDevices::recordPlot()[[1]])
  expect_match(paste(utils::capture.output(str(drawn)), collapse = "\n"), "red", fixed = TRUE)
  plot(h, metrics = "learning_rate", ann = FALSE)
  drawn <- Filter(function(item) identical(item[[2]][[1]]$name, "C_title"), grDevices::recordPlot()[[1]])
  ylabs <- vapply(drawn, function(item) {
    label <- item[[2]][-1][[4]]
    if (is.null(label)) "" else as.character(label)
  }, "")
  expect_false("learning_rate" %in% ylabs)
})

test_that("alexnet_history() reads a run's history back from its checkpoint_dir", {
  skip_if_no_alexnet()
  run <- tempfile("run-")
  dir.create(run)
  writeLines(jsonlite::toJSON(list(
    format = 1L, epochs_done = 2L, position = c(2L, 0L),
    settings = list(epochs = 2L, steps = 3L, num_classes = 4L, learnt_with = list(learning_rate = 0.01)),
    metrics = list(loss = c(1.4, 1.2), accuracy = c(0.25, 0.5), val_loss = c(1.3, 1.1), val_accuracy = c(0.3, 0.6)),
    schedule = list(image_size = c(64L, 64L), learning_rate = c(0.005, 0))
  ), auto_unbox = TRUE, digits = NA), file.path(run, "alexnet-history.json"))
  h <- alexnet_history(run)
  expect_s3_class(h, "alexnet_history")
  expect_equal(h$metrics$val_accuracy, c(0.3, 0.6))
  expect_identical(h$schedule$image_size, c(64L, 64L))
  expect_equal(h$params$learning_rate, 0.01)
  expect_equal(h$epochs_done, 2L)
  expect_equal(summary(h)$best[summary(h)$metric == "accuracy"], 0.6)
  expect_match(paste(capture.output(print(h)), collapse = "\n"), "image size 64, learning rate 0.005 -> 0")
  expect_error(alexnet_history(tempdir()), "holds no alexnet-history.json", class = "alexnet_error")
  expect_error(alexnet_history(run, checkpointdir = 1), "did you mean `checkpoint_dir`", class = "alexnet_error")
})

test_that("alexnet_history() of a resumed run of two workers has its params and prints its own lines", {
  skip_if_no_alexnet()
  run <- tempfile("run-")
  dir.create(run)
  advice <- paste("One exchange alone takes 2.92 s a step against 0.4 s of computation (bfloat16 on the wire).",
                  "Settings that send less: accumulate_steps = 4.")
  # the params of the run's own history, as the core keeps them at each checkpoint (settings$params)
  params <- list(batch_size = 8L, epochs = 2L, steps = 3L, global_batch_size = 32L, num_classes = 4L,
                 strategy = "multi_worker", replicas = 2L, workers = 2L, allreduce_precision = "bfloat16",
                 allreduce_pack_mb = 25L, accumulate_steps = 2L, sync_every = 4L, initial_epoch = 1L,
                 initial_step = 0L, allreduce_seconds = 2.92, communication_advice = advice,
                 advised_settings = list(accumulate_steps = 4L))
  writeLines(jsonlite::toJSON(list(
    format = 1L, epochs_done = 2L, position = c(2L, 0L),
    settings = list(epochs = 2L, steps = 3L, num_classes = 4L, learnt_with = list(sync_every = 4L),
                    params = params),
    metrics = list(loss = c(1.4, 1.2)),
    schedule = list(image_size = c(64L, 64L), learning_rate = c(0.005, 0)),
    # the model the run saved at its end, recorded with the digest of its weights and the workers' agreement
    saved_model = list(weights_sha256 = strrep("3f", 32L), weights_agree = TRUE, position = c(2L, 0L))
  ), auto_unbox = TRUE, digits = NA), file.path(run, "alexnet-history.json"))
  h <- alexnet_history(run)
  expect_identical(h$params[names(params)], params)
  expect_identical(h[c("weights_sha256", "weights_agree")], list(weights_sha256 = strrep("3f", 32L),
                                                                 weights_agree = TRUE))
  printed <- capture.output(print(h))
  expect_identical(printed[1:3], c("AlexNet training history: 2 epochs, multi_worker strategy, 2 replicas",
                                   "batch_size: 8, global_batch_size: 32, steps: 3, num_classes: 4",
                                   paste0("Resumed from ", run, " at epoch 2, step 0.")))
  expect_identical(printed[5], paste("Communication:", advice))
  expect_identical(printed[7:8], c("Every worker holds the same weights", paste0("Weights: sha256 ", strrep("3f", 32L))))
})

test_that("the epoch axis of a long run has a tick every few epochs, of a short one at each epoch", {
  expect_equal(epoch_ticks(1:12), 1:12)
  ticks <- epoch_ticks(1:300)
  expect_lte(length(ticks), 12)
  expect_true(all(ticks == round(ticks)) && min(ticks) >= 1 && max(ticks) <= 300)
  expect_gte(length(ticks), 4)
})

test_that("a resumed run says where it went on from once, in its history's print, not also as a message", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  data <- small_partition(dir, images_per_class = 4, max_side = 64)$data
  run <- file.path(dir, "run")
  train <- function(epochs) {
    alexnet_train(data = data, epochs = epochs, batch_size = 4, image_size = 64, verbose = 0, dense_units = 32,
                  checkpoint_dir = run)
  }
  train(1)
  # the history of a run that resumed, returned at top level and so printed: its messages and its print together
  # (two epochs where the checkpoints' run had one: warned, and trained further)
  said <- character()
  expect_warning(printed <- withCallingHandlers(capture.output(print(train(2))), message = function(m) {
    said <<- c(said, conditionMessage(m))
    invokeRestart("muffleMessage")
  }), "`epochs`: 1 then, 2 now", class = "alexnet_warning")
  expect_identical(sum(grepl("Resumed from", c(said, printed), fixed = TRUE)), 1L)
  expect_true(paste0("Resumed from ", run, " at epoch 2, step 0.") %in% printed)
})
