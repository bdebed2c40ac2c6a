#' A trained AlexNet model
#'
#' Reads a model that [alexnet_train()] pinned on a board (`model_pin`), downloads it into the cache when needed,
#' and reads its card: what it was trained on (class ids and names, image size), how long and how well. A model
#' saved with `model_dir` is no pin: give its folder (or its `alexnet.keras`) as it is wherever a model is taken.
#'
#' @param board The board the model is pinned on, read only (see [imagenet_categories()]); `NULL` for
#'   the default.
#' @eval declared_params(model_pin_options)
#' @details Which pin is read and where it is brought (`name`, `version`, `cache_dir`, `export`) are declared once in
#'   the core (`alexnet.model.options`), with their defaults and checks; the command line's `--model-pin`,
#'   `--pin-version` and `--model-cache` are the same options. The model file is checked against the SHA-256 in the
#'   pin's metadata before it is used. With `export = TRUE` the export the pin carries beside the model (see
#'   [alexnet_export()]) is checked the same way, a SavedModel extracted; a pin without one is an error.
#' @returns An `alexnet_model`, which prints as a short summary: a list with `path` (the local
#'   `alexnet.keras`), `name`, `version`, `board` (the board it was read from), `sha256` and `bytes` of
#'   the model file, `formats` (what the pin carries: `"keras"`, and `"savedmodel"` or `"tflite"` when it has
#'   an export), `export_path` (with `export = TRUE`, the local SavedModel folder or `.tflite` file; else `NULL`),
#'   and its card: `image_size`, `num_classes`, `class_ids` and `class_names` (by
#'   label), `epochs`, `metrics` (the saved epoch's), `best_epoch` (with `keep_best = TRUE` in training: the
#'   1-based epoch whose weights were saved, the one of best validation top-1; `NULL` for the last epoch),
#'   `board_trained_from` and `categories_version` (the data it was trained from), `weights_sha256`,
#'   `created`, and `evaluation` when the model was evaluated as its training ended
#'   (`alexnet_spark_train(..., evaluate = TRUE)`: `images`, `top1_correct`, `top5_correct`, `top1_accuracy`,
#'   `top5_accuracy`, `top_k`, `crops`, `protocol`, `image_size`, `bad_images` (a count) and `board`),
#'   `initial_model`: the model its training started from (`name@version` of a pin, or a location; `NULL` for a
#'   model trained from random weights, see `initial_model` in [alexnet_train()]), and `architecture`: the
#'   settings that shape its weights (`dense_units`, `grouped`), which a run started from it must have (`NULL` on
#'   models saved before it was recorded).
#'   Pass it to [alexnet_evaluate()], [alexnet_predict()] or [alexnet_export()].
#' @seealso [alexnet_evaluate()], [alexnet_predict()], [alexnet_export()].
#' @examples
#' if (alexnet_available()) {
#'   model <- tryCatch(alexnet_model(board = tempfile("board-")), error = conditionMessage)
#'   model
#' }
#' @export
alexnet_model <- function(board = NULL) {
  args <- checked_args("alexnet_model", names(formals()))
  new_alexnet_model(do.call(core_function("alexnet_model"), args))
}
# which pin and where it is brought, from the core's declaration (alexnet.model.options), after `board`
alexnet_model <- with_declared(alexnet_model, declared_formals(model_pin_options))

# The error of an exported function whose `model` was left out: `saved` is what it takes besides a model pin.
model_missing <- function(saved = "the path of a saved model") {
  alexnet_abort("`model` is missing: give an alexnet_model() or ", saved, ".")
}

new_alexnet_model <- function(model) structure(simplify_py(model), class = "alexnet_model")

#' @rdname alexnet_model
#' @param x An `alexnet_model`.
#' @param ... Ignored.
#' @export
print.alexnet_model <- function(x, ...) {
  version <- if (!is.null(x$version)) paste0("@", x$version) else ""
  cat("AlexNet model ", x$name %||% basename(x$path %||% "?"), version, ": ",
      count_of(x$num_classes %||% length(x$class_ids), "class", "classes"),
      if (!is.null(x$image_size)) paste0(", images of ", x$image_size, " pixels"), "\n", sep = "")
  metrics <- final_metrics(x$metrics)
  validated <- if ("val_images" %in% names(metrics)) metrics[["val_images"]]  # a count, not a metric: said after them
  metrics <- metrics[setdiff(names(metrics), "val_images")]
  if (length(metrics) || !is.null(x$epochs)) {
    cat("Trained", if (!is.null(x$epochs)) paste0(" ", count_of(x$epochs, "epoch")),
        if (!is.null(x$initial_model)) paste0(" from ", x$initial_model),
        if (length(metrics)) paste0(if (is.null(x$best_epoch)) "; final " else paste0("; best epoch ", x$best_epoch, ": "),
                                    paste0(names(metrics), " ", format_metric(metrics), collapse = ", ")),
        if (!is.null(validated)) paste0(" (validation over ", count_of(validated, "image"), ")"),
        "\n", sep = "")
  }
  evaluation <- x$evaluation
  if (is.list(evaluation) && !is.null(evaluation$top1_accuracy)) {
    cat("Evaluated on ", count_of(evaluation$images, "validation image"), " (", evaluation$protocol %||% "", "): top-1 ",
        format_metric(evaluation$top1_accuracy), ", top-", evaluation$top_k %||% 5, " ",
        format_metric(evaluation$top5_accuracy), "\n", sep = "")
  }
  where <- x$board %||% x$path
  if (!is.null(where)) cat("From ", where, "\n", sep = "")
  exports <- setdiff(x$formats, "keras")
  if (length(exports)) {
    here <- if (!is.null(x$export_path)) paste0(", here at ", x$export_path) else
      " (alexnet_model(export = TRUE) fetches it)"
    cat("Carries its ", paste(exports, collapse = ", "), " export", here, "\n", sep = "")
  }
  invisible(x)
}

# The last value of each numeric metric (a history's lists, or final values already).
final_metrics <- function(metrics) {
  if (!length(metrics)) return(numeric())
  last <- vapply(metrics, function(m) {
    m <- suppressWarnings(as.numeric(unlist(m)))
    if (length(m)) m[[length(m)]] else NA_real_
  }, numeric(1))
  last[!is.na(last)]
}

# A model as the core takes it: a path or location as it is, an `alexnet_model` as the plain list (a dict) it
# came from. Every argument of kind "object" goes through it (check_arg()).
core_model <- function(model) {
  if (inherits(model, "alexnet_model")) {
    model <- unclass(model)
    model <- as_py_lists(model, c("class_ids", "class_names"))
  }
  model
}

#' Evaluate a trained AlexNet
#'
#' Measures top-1 and top-5 accuracy of a model on a board's validation images (all of them, or a partition's), or
#' on those of `data`, with one
#' centre crop or ten crops (the paper's protocol: four corners and the centre, and their mirror images).
#'
#' @param model An [alexnet_model()], or the path or location of a saved model.
#' @param data A partition ([imagenet_partition()]) whose validation images are used; `NULL` fetches them
#'   from `board`.
#' @param board The board whose validation images are evaluated, read only (see [imagenet_categories()]);
#'   `NULL` for the default.
#' @eval declared_params(evaluation_options)
#' @eval declared_params(board_images_options)
#' @param ... Nothing more: a name that is not an option is refused, naming the closest. For `plot()`,
#'   graphical parameters passed to [graphics::plot()] (`main`, `col.axis`, ...).
#' @details The options of an evaluation (`crops`, `batch_size`, `parallel`, `image_size`) are declared once in the
#'   core (`alexnet.model.options`), with their defaults and checks, as are [alexnet_spark_evaluate()]'s, and so are
#'   those that say which of a board's validation images are scored and how they are fetched (`partition`, `total`,
#'   `cache_dir`, `fetch_workers`), which apply only when `data` is `NULL`. Only a model whose input takes every size
#'   (as [alexnet_train()] builds them) takes an `image_size` of its own.
#' @returns An `alexnet_evaluation`: a list with `images`, `top1_correct`, `top5_correct`, `top1_accuracy`,
#'   `top5_accuracy`, `top_k`, `crops`, `protocol`, `image_size`, `num_classes`, `images_per_second`, `seconds`,
#'   `bad_images`, `model`, and the same counts class by class: `per_class`, a data frame with a row per class
#'   that has images (`index`, `id`, `name`, `images`, `top1_correct`, `top5_correct`, `top1_accuracy`,
#'   `top5_accuracy`, `confused_with`: the id of the class its images were most often taken for, `confused_images`:
#'   how many), and `confusions`, a data frame with a row per pair of a class and a class its images were wrongly
#'   taken for (`index`, `id`, `name`, `predicted_index`, `predicted_id`, `predicted_name`, `images`), the most
#'   frequent first. It prints as a few lines: the accuracies, how they were measured, the lowest classes and the
#'   most frequent confusions. `as.data.frame()` gives one row (one per worker for [alexnet_spark_evaluate()]);
#'   `plot()` the accuracy of every class.
#' @seealso [alexnet_model()], [alexnet_spark_evaluate()].
#' @examples
#' if (alexnet_available()) {
#'   result <- tryCatch(alexnet_evaluate(file.path(tempdir(), "no-model"), crops = 1), error = conditionMessage)
#'   result
#' }
#' @export
alexnet_evaluate <- function(model, data = NULL, board = NULL, ...) {
  args <- checked_args("alexnet_evaluate", names(formals()))
  if (missing(model)) model_missing()
  if (!is.null(args[["data"]])) args$data <- train_data(args$data)
  new_alexnet_evaluation(do.call(core_function("alexnet_evaluate"), args))
}
# the options of an evaluation, then which of a board's images, from the core's declarations, before `...`
alexnet_evaluate <- with_declared(alexnet_evaluate, c(declared_formals(evaluation_options),
                                                      declared_formals(board_images_options)))

# The columns of an evaluation's tables by class, as the core names them: what an empty table still has.
per_class_columns <- c(index = "integer", id = "character", name = "character", images = "integer",
                       top1_correct = "integer", top5_correct = "integer", top1_accuracy = "double",
                       top5_accuracy = "double", confused_with = "character", confused_images = "integer")
confusion_columns <- c(index = "integer", id = "character", name = "character", predicted_index = "integer",
                       predicted_id = "character", predicted_name = "character", images = "integer")

# The core's evaluation as an R object: `bad_images` a character vector, `per_class` and `confusions` data frames,
# and for a Spark evaluation `workers` a data frame with one row per worker (the core's `per_worker`).
new_alexnet_evaluation <- function(result) {
  tables <- result[c("per_worker", "per_class", "confusions")]
  result[names(tables)] <- NULL
  result <- simplify_py(result)
  result$bad_images <- as.character(unlist(result$bad_images))
  if (length(tables$per_worker)) result$workers <- records_to_df(tables$per_worker)
  if (!is.null(tables$per_class)) result$per_class <- records_table(tables$per_class, per_class_columns)
  if (!is.null(tables$confusions)) result$confusions <- records_table(tables$confusions, confusion_columns)
  structure(result, class = "alexnet_evaluation")
}

#' @rdname alexnet_evaluate
#' @param x An `alexnet_evaluation`.
#' @export
print.alexnet_evaluation <- function(x, ...) {
  percent <- function(v) if (is.null(v)) "n/a" else paste0(formatC(100 * v, digits = 1, format = "f"), "%")
  top_k <- x$top_k %||% 5
  # top-k is always 100% when the model has k classes or fewer: shown only when it says something
  top_k_shown <- is.null(x$num_classes) || x$num_classes > top_k
  cat("Top-1 accuracy ", percent(x$top1_accuracy), " (", format(x$top1_correct %||% NA, big.mark = ","), " of ",
      count_of(x$images, "image"), ")",
      if (top_k_shown) paste0(", top-", top_k, " ", percent(x$top5_accuracy), " (",
                              format(x$top5_correct %||% NA, big.mark = ","), ")"), "\n", sep = "")
  details <- c(
    if (!is.null(x$protocol)) x$protocol else if (!is.null(x$crops)) count_of(x$crops, "crop"),
    if (!is.null(x$image_size)) paste(x$image_size, "pixels"),
    if (!is.null(x$num_classes)) count_of(x$num_classes, "class", "classes"),
    if (is.numeric(x$images_per_second)) paste(format(round(x$images_per_second, 1), nsmall = 1), "images/s"),
    if (is.data.frame(x$workers)) count_of(nrow(x$workers), "worker"),
    if (length(x$bad_images)) paste(count_of(length(x$bad_images), "bad image"), "left out")
  )
  if (length(details)) cat(paste(details, collapse = "; "), "\n", sep = "")
  classes <- x$per_class
  if (is.data.frame(classes) && nrow(classes) > 1L) {
    lowest <- utils::head(classes[order(classes$top1_accuracy, classes$index), ], 3L)
    cat("Lowest top-1: ", paste0(first_name(lowest$name), " ", percent(lowest$top1_accuracy), " (",
                                 lowest$top1_correct, " of ", lowest$images, ")", collapse = ", "), "\n", sep = "")
  }
  # also when one class was scored: its images were taken for classes of the model it did not score
  confusions <- utils::head(x$confusions, 3L)
  if (is.data.frame(confusions) && nrow(confusions)) {
    cat("Most confused: ", paste0(first_name(confusions$name), " taken for ", first_name(confusions$predicted_name),
                                  " (", vapply(confusions$images, count_of, "", "image"), ")", collapse = ", "), "\n", sep = "")
  }
  invisible(x)
}

# The first of a class's synonyms ("tench" of "tench, Tinca tinca").
first_name <- function(names) sub(",.*$", "", names)

#' @rdname alexnet_evaluate
#' @param top The number of lowest classes named on the plot.
#' @details `plot()` draws each class's top-1 and top-k accuracy, the classes ranked from the lowest top-1 accuracy
#'   to the highest, with the overall accuracies as lines and the `top` lowest classes named.
#' @export
plot.alexnet_evaluation <- function(x, top = 5L, ...) {
  top <- check_arg(top, "top", "count>=0")
  classes <- x$per_class
  if (!is.data.frame(classes) || !nrow(classes)) {
    alexnet_abort("this evaluation has no counts by class to plot (`per_class`): evaluate the model again.")
  }
  ranked <- classes[order(classes$top1_accuracy, classes$index), ]
  rank <- seq_len(nrow(ranked))
  top_k <- x$top_k %||% 5L
  settings <- utils::modifyList(list(ylim = c(0, 1), xlab = "classes, by top-1 accuracy", ylab = "accuracy",
                                     main = paste("Accuracy by class:", count_of(nrow(ranked), "class", "classes"))),
                                list(...))
  do.call(graphics::plot, c(list(rank, ranked$top1_accuracy, type = "n", xaxt = "n"), settings))
  ticks <- unique(round(pretty(rank)))  # ranks are whole numbers
  graphics::axis(1, at = ticks[ticks >= 1 & ticks <= length(rank)])
  graphics::lines(rank, ranked$top5_accuracy, type = if (nrow(ranked) > 50L) "l" else "o", pch = 1, col = "grey50")
  graphics::lines(rank, ranked$top1_accuracy, type = if (nrow(ranked) > 50L) "l" else "o", pch = 19)
  graphics::abline(h = c(x$top1_accuracy, x$top5_accuracy), lty = 2, col = c("black", "grey50"))
  named <- utils::head(ranked, top)
  at <- seq_len(nrow(named))
  # a name on the right half of the plot is written to the left of its point, so that it stays inside
  if (nrow(named)) graphics::text(at, named$top1_accuracy, first_name(named$name),
                                  pos = ifelse(at > (length(rank) + 1) / 2, 2, 4), cex = 0.7, srt = 30)
  graphics::legend("bottomright", legend = c("top-1", paste0("top-", top_k), "overall"), lty = c(1, 1, 2),
                   col = c("black", "grey50", "black"), bty = "n")
  invisible(ranked)
}

#' @rdname alexnet_evaluate
#' @param row.names,optional Passed to [as.data.frame()].
#' @export
as.data.frame.alexnet_evaluation <- function(x, row.names = NULL, optional = FALSE, ...) {
  if (is.data.frame(x$workers)) return(x$workers)
  scalar <- Filter(function(v) is.atomic(v) && length(v) == 1L, unclass(x))
  as.data.frame(scalar, row.names = row.names, optional = optional, stringsAsFactors = FALSE)
}

# The core's `fun` (alexnet_predict(), alexnet_features()) called with the arguments of the R function that calls
# this (whose formals are `names`): checked, `model` and `images` required, the model as the core takes it and the
# images as a list (one path stays a list of one).
call_on_images <- function(fun, names, env = parent.frame()) {
  args <- checked_args(fun, names, env)
  given <- function(name) !eval(call("missing", as.name(name)), env)
  if (!given("model")) model_missing()
  if (!given("images")) alexnet_abort("`images` is missing: give the paths of the images, or a folder of them.")
  args$images <- as.list(args$images)
  do.call(core_function(fun), args)
}

#' Classify images with a trained AlexNet
#'
#' @param model An [alexnet_model()], or the path or location of a saved model.
#' @param images Paths or locations (`gs://`, `s3://`, `https://`) of image files (JPEG, PNG, GIF, BMP), or folders
#'   (local, `gs://`, `s3://`): a folder stands for its image files, in the order of their names (hidden files,
#'   other files and subfolders left out).
#' @eval declared_params(predict_options)
#' @param ... Nothing more: a name that is not an option is refused, naming the closest.
#' @details Images are read 16 at a time (a bucket's objects in parallel) and predicted a chunk of 64 at a time, so
#'   that memory holds a chunk of them however many are given. An image that cannot be read or decoded is named in an
#'   error, with every other such image, and nothing is returned. The options (`top`, `batch_size`) are declared once
#'   in the core (`alexnet.model.options`), with their defaults and checks, as are the command line's
#'   `alexnet predict` options.
#' @returns A data frame with `top` rows per image: `image`, `rank` (1 for the most probable), `id` (the
#'   class's WordNet id), `name` and `probability`.
#' @examples
#' if (alexnet_available()) {
#'   tryCatch(alexnet_predict(file.path(tempdir(), "no-model"), "cat.jpg"), error = conditionMessage)
#' }
#' @export
alexnet_predict <- function(model, images, ...) {
  records_to_df(call_on_images("alexnet_predict", names(formals())))
}
# the options from the core's declaration (alexnet.model.options), after `images`
alexnet_predict <- with_declared(alexnet_predict, declared_formals(predict_options))

#' What a trained AlexNet's inner layers make of images
#'
#' A row of numbers per image: the values of one of the network's layers. Images whose values at `fc2` (the last
#' hidden layer, 4096 values at full size) lie close in Euclidean distance look alike to the network, even where
#' their pixels do not: that is how the paper showed what AlexNet learned, and these values are what a model trained
#' on ImageNet lends to other tasks (a small classifier, a search, a clustering).
#'
#' @inheritParams alexnet_predict
#' @eval declared_params(features_options)
#' @param ... Nothing more: a name that is not an option is refused, naming the closest.
#' @details Images are read and decoded as [alexnet_predict()] reads them (the centre crop at the size the model
#'   trained at last), a chunk of 64 at a time, so that memory holds a chunk's pixels and the values computed. An image
#'   that cannot be read or decoded is named in an error, with every other such image, and nothing is returned. The
#'   options (`layer`, `batch_size`) are declared once in the core (`alexnet.model.options`), with their defaults
#'   and checks, as are the command line's `alexnet features` options.
#' @returns A numeric matrix with a row per image, named by the image (its path or location; a folder's files as
#'   `folder/file`), and a column per value of the layer; its attribute `layer` names the layer.
#' @seealso [alexnet_predict()]; [stats::dist()] for the distances between the rows.
#' @examples
#' if (alexnet_available()) {
#'   tryCatch(alexnet_features(file.path(tempdir(), "no-model"), "cat.jpg"), error = conditionMessage)
#' }
#' \dontrun{
#' features <- alexnet_features(model, "photos/")
#' distances <- as.matrix(dist(features))
#' # each photo's closest other photo, as the network sees them
#' closest <- apply(distances + diag(Inf, nrow(distances)), 1, which.min)
#' data.frame(photo = rownames(features), closest = rownames(features)[closest])
#' }
#' @export
alexnet_features <- function(model, images, ...) {
  result <- call_on_images("alexnet_features", names(formals()))
  features <- numpy_array(result$features)
  dimnames(features) <- list(as.character(unlist(result$image)), NULL)
  attr(features, "layer") <- result$layer
  features
}
# the options from the core's declaration (alexnet.model.options), after `images`
alexnet_features <- with_declared(alexnet_features, declared_formals(features_options))

#' The filters of a trained AlexNet's first convolution
#'
#' The first layer's 96 filters of 11 x 11 pixels look at colour directly, so each can be shown as a small image, as
#' the AlexNet paper's Figure 3 shows them. A network that learned shows smooth oriented edges, stripes and blobs of
#' colour; one that did not (too few steps, a learning rate that diverged, a broken input) shows noise much like its
#' random start. `plot()` of the result, or of an [alexnet_model()], draws them.
#'
#' @inheritParams alexnet_predict
#' @param path `NULL`, or a PNG file to draw the filters into: a path, `file://`, `gs://` or `s3://` location (its
#'   folder is created; a bucket must be writable).
#' @param x An `alexnet_filters` result, or (for `plot()`) an [alexnet_model()].
#' @param main The plot's title (by default the layer, the number of filters and their size).
#' @param ... For `plot()`, graphical parameters passed to [graphics::title()]; otherwise unused.
#' @returns An `alexnet_filters` list: `layer` (`"conv1"`), `filters` (96 for AlexNet), `size` (height and width,
#'   11 and 11), `kernels` (an array filters x height x width x 3: each filter scaled on its own to 0..1, its lowest
#'   weight 0 and its highest 1), `image` (the filters side by side, 12 to a row for 96, each weight a 5-pixel
#'   square, on white: an array rows x columns x 3 of values 0..255) and `path` (the PNG written, or `NULL`).
#' @seealso [alexnet_model()], [alexnet_features()].
#' @examples
#' if (alexnet_available()) {
#'   tryCatch(alexnet_filters(file.path(tempdir(), "no-model")), error = conditionMessage)
#' }
#' \dontrun{
#' model <- alexnet_model("gs://my-bucket/imagenet", "alexnet")
#' plot(model)                                   # the filters of conv1
#' alexnet_filters(model, path = "conv1.png")   # the same grid as a PNG file
#' }
#' @export
alexnet_filters <- function(model, path = NULL) {
  args <- checked_args("alexnet_filters", names(formals()))
  if (missing(model)) model_missing()
  result <- do.call(core_function("alexnet_filters"), args)
  structure(list(layer = result$layer, filters = as.integer(result$filters), size = as.integer(unlist(result$size)),
                 kernels = numpy_array(result$kernels), image = numpy_array(result$image), path = result$path),
            class = "alexnet_filters")
}

#' @rdname alexnet_filters
#' @export
print.alexnet_filters <- function(x, ...) {
  cat(sprintf("%s: %d filters of %dx%d pixels, each scaled to its own range%s\n", x$layer, x$filters, x$size[[1]],
              x$size[[2]], if (is.null(x$path)) "" else paste0("; drawn to ", x$path)))
  invisible(x)
}

#' @rdname alexnet_filters
#' @export
plot.alexnet_filters <- function(x, main = NULL, ...) {
  rows <- dim(x$image)[[1]]
  columns <- dim(x$image)[[2]]
  old <- graphics::par(mar = c(0.5, 0.5, 2.2, 0.5))
  on.exit(graphics::par(old), add = TRUE)
  graphics::plot.new()
  graphics::plot.window(c(0, columns), c(0, rows), asp = 1)
  graphics::rasterImage(grDevices::as.raster(x$image / 255), 0, 0, columns, rows, interpolate = FALSE)
  main <- main %||% sprintf("%s: %d filters of %dx%d pixels", x$layer, x$filters, x$size[[1]], x$size[[2]])
  graphics::title(main = main, ...)
  invisible(x)
}

#' @rdname alexnet_filters
#' @export
plot.alexnet_model <- function(x, main = NULL, ...) {
  invisible(plot(alexnet_filters(x), main = main, ...))
}

#' Export a trained AlexNet for serving without this package
#'
#' Writes the model as a TensorFlow SavedModel (or a TF Lite file) that plain TensorFlow loads, without alexnet,
#' Keras or Python's Keras classes: TensorFlow Serving, `tf.saved_model.load()`, `saved_model_cli`, or another
#' language's TensorFlow bindings. Image decoding, the centre crop at the card's size and the normalisation are
#' inside the graph, as [alexnet_predict()] does them, and the model computes in float32 whatever precision it
#' trained in. The model card goes beside it as `alexnet-model.json`.
#'
#' The SavedModel has two signatures. `serving_default` takes `images`, a batch of encoded images (JPEG, PNG, GIF,
#' BMP) as strings, and returns for each the `top` most probable classes, best first: `indices` (label numbers),
#' `ids` (WordNet ids), `names` and `probabilities`, and `ok` and `error`. An image it cannot decode does not fail
#' the call: its `ok` is false and its `error` says why (`"empty"`, `"not a JPEG, PNG, GIF or BMP image"`,
#' `"truncated or corrupt"`), its indices are -1, its ids and names empty and its probabilities 0; the other
#' images get their answers. `pixels` takes float32 pixels `[batch, size, size, 3]` (0 to 255, already cropped
#' to the card's size) and returns the four rankings. `format = "tflite"` converts that signature with
#' TensorFlow's `tf.lite.TFLiteConverter.from_saved_model()`: TF Lite has no image decoding, the application
#' decodes. At full size (1000 classes, 224 pixels) the SavedModel and the TF Lite file take about 250 MB each
#' (float32 weights).
#'
#' @param model An [alexnet_model()], or the path or location of a saved model with its card (a model without a
#'   card is refused: its classes' names and image size would be unknown).
#' @param path The folder to write: a path, `file://`, `gs://` or `s3://` location. One that exists and is not
#'   empty is refused, unless `overwrite = TRUE` and it holds an earlier export, which is then replaced (a
#'   folder holding anything else is never emptied). `NULL` with a `board`: publish only.
#' @eval declared_params(export_options)
#' @param board A board to also publish the export on, in a model pin beside the model's `alexnet.keras` (a new
#'   version of pin `name`); [alexnet_model()] with `export = TRUE` reads it back, checked against its SHA-256.
#' @param name The model pin's name; `NULL` is the pin `model` came from, else `"alexnet"`.
#' @param ... Nothing more for `alexnet_export()`: a name that is not an option is refused, naming the closest;
#'   ignored by `print()`.
#' @returns An `alexnet_export`, which prints as a short summary: a list with `path` (the location written, or
#'   `NULL`), `format`, `files` (relative paths) and `bytes` of the export, `model` (what was exported),
#'   `image_size`, `num_classes`, `top`, `signatures` (by name, their `inputs` and `outputs`, each name with its
#'   type and shape) and `pin` (`board`, `name` and `version` of the model pin published, or `NULL`).
#' @seealso [alexnet_model()], [alexnet_predict()]; `alexnet_train(model_format = "keras+savedmodel")` pins the
#'   export with the model after training.
#' @examples
#' if (alexnet_available()) {
#'   tryCatch(alexnet_export(file.path(tempdir(), "no-model"), tempfile("export-")), error = conditionMessage)
#' }
#' \dontrun{
#' model <- alexnet_model("gs://my-bucket/imagenet", "alexnet")
#' alexnet_export(model, "gs://my-bucket/serving/alexnet/1")
#' # in Python, with TensorFlow only:
#' #   served = tf.saved_model.load("alexnet/1").signatures["serving_default"]
#' #   served(images=tf.constant([open("cat.jpg", "rb").read()]))["names"]
#' }
#' @export
alexnet_export <- function(model, path = NULL, board = NULL, name = NULL, ...) {
  args <- checked_args("alexnet_export", names(formals()))
  if (missing(model)) model_missing()
  new_alexnet_export(do.call(core_function("alexnet_export"), args))
}
# the options from the core's declaration (alexnet.model.options), after `path`: `format` is the third argument
alexnet_export <- with_declared(alexnet_export, declared_formals(export_options), after = "path")

new_alexnet_export <- function(result) {
  result <- simplify_py(result)
  result$files <- as.character(unlist(result$files))
  structure(result, class = "alexnet_export")
}

#' @rdname alexnet_export
#' @param x An `alexnet_export`.
#' @export
print.alexnet_export <- function(x, ...) {
  kind <- if (identical(x$format, "tflite")) "TF Lite" else "SavedModel"
  cat(kind, " export of ", x$model %||% "a model", ": ", count_of(x$num_classes, "class", "classes"),
      ", images of ", x$image_size, " pixels, top ", x$top, "\n", sep = "")
  if (!is.null(x$path)) cat("At ", x$path, " (", count_of(length(x$files), "file"), ", ", format_bytes(x$bytes), ")\n",
                           sep = "")
  if (!is.null(x$pin)) cat("Pinned as ", x$pin$name, " version ", x$pin$version, " on ", x$pin$board, "\n", sep = "")
  for (signature in names(x$signatures)) {
    s <- x$signatures[[signature]]
    inputs <- paste(names(s$inputs), unlist(s$inputs), collapse = ", ")
    cat("Signature ", signature, ": ", inputs, " -> ", paste(names(s$outputs), collapse = ", "), "\n", sep = "")
  }
  invisible(x)
}

#' Evaluate a trained AlexNet across a Spark cluster
#'
#' The same barrier job as [alexnet_spark_train()]: one Spark barrier task per worker, each evaluating the model
#' on its share of the board's validation images; the counts are added up into one evaluation, equal to
#' [alexnet_evaluate()] on one machine. The same care too: every check before any Spark job, the executors'
#' probe, each worker's progress shown here, `timeout`, and `retries` (an evaluation is idempotent: a failed one
#' is launched again whole, with an R warning of class `alexnet_retry` that carries the worker's error).
#' To evaluate a model as its training ends, in the training's own job, use
#' `alexnet_spark_train(..., evaluate = TRUE)`.
#'
#' @param sc A `sparklyr` connection (`sparklyr::spark_connect()`).
#' @param model An [alexnet_model()], or the location of a saved model every worker reaches.
#' @param workers Number of workers, one barrier task each.
#' @param board The board whose validation images are evaluated, read only (see [imagenet_categories()]);
#'   `NULL` for the default.
#' @eval declared_params(evaluation_options)
#' @eval declared_params(launch_options, launch_defaults)
#' @details Its options are named like [alexnet_spark_train()]'s: the options of an evaluation (`crops` to
#'   `image_size`, as [alexnet_evaluate()] takes them), then the launch options every Spark job takes (`base_port`
#'   to `probe`), all declared once in the core (`alexnet.model.options`, `alexnet.launch.options`). From R,
#'   `python` defaults to the Python alexnet uses here ([alexnet_python()]).
#' @returns An `alexnet_evaluation` (see [alexnet_evaluate()]) whose `workers` is a data frame with one row
#'   per worker, and `attempt` the launch that succeeded (1 for the first).
#' @examples
#' \dontrun{
#' sc <- sparklyr::spark_connect(master = "yarn")
#' model <- alexnet_model(board = "gs://my-bucket/imagenet")
#' alexnet_spark_evaluate(sc, model, workers = 16, board = "gs://my-bucket/imagenet", crops = 10)
#' }
#' @export
alexnet_spark_evaluate <- function(sc, model, workers, board = NULL) {
  args <- checked_args("alexnet_spark_evaluate", names(formals()))
  if (missing(sc)) alexnet_abort("`sc` is missing: pass the connection sparklyr::spark_connect(...) returns.")
  if (missing(model)) model_missing("the location of a saved model")
  if (missing(workers)) alexnet_abort("`workers` is missing: give the number of workers, one barrier task each.")
  options <- spark_job_options(args)
  spark_evaluate_run(sparklyr_api("alexnet_spark_evaluate()"), sc, args$workers, args[["board"]], options)
}
# the options of an evaluation, then the launch options, from the core's declarations
alexnet_spark_evaluate <- with_declared(alexnet_spark_evaluate, c(declared_formals(evaluation_options),
                                                                  declared_formals(launch_options, launch_defaults)))

# The driver's part of an evaluation: the one barrier job of the core (alexnet.launch.r.r_job, see
# spark_barrier_run()), of kind "evaluate"; the workers' counts added up, with the launch that succeeded.
spark_evaluate_run <- function(api, sc, workers, board, options = list()) {
  result <- spark_barrier_run(api, sc, "evaluate", workers, board, options)
  new_alexnet_evaluation(c(result$evaluation, list(attempt = result$attempt)))
}
