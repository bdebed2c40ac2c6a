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
#'   pin's metadata before it is used, and, when it is loaded, against what alexnet's networks are made of: a file
#'   that names another layer or function (a `Lambda` layer, which loading would run) is refused. With `export = TRUE` the export the pin carries beside the model (see
#'   [alexnet_export()]) is checked the same way, a SavedModel extracted; a pin without one is an error.
#' @returns An `alexnet_model`, which prints as a short summary: a list with `path` (the local
#'   `alexnet.keras`, with the pin's card beside it: the path alone is read as the same model), `name`, `version`, `board` (the board it was read from), `cache_dir` (the absolute
#'   `cache_dir` given, else `NULL`: wherever the model is used without its file, as on a Spark worker's machine, the
#'   file is fetched again into that folder, which must be writable there, or into that machine's own user cache
#'   when `NULL`), `sha256` and `bytes` of the model file, `formats` (what the pin carries: `"keras"`, and `"savedmodel"` or `"tflite"` when it has
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
alexnet_model <- function(board = NULL, ...) {
  args <- checked_args("alexnet_model", names(formals()), others = FALSE)
  new_alexnet_model(do.call(core_function("alexnet_model"), args))
}
# which pin and where it is brought, from the core's declaration (alexnet.model.options), after `board`
alexnet_model <- with_declared(alexnet_model, declared_formals(model_pin_options))

# The error of an exported function whose `model` was left out: `saved` is what it takes besides a model pin.
model_missing <- function(saved = "the path of a saved model") {
  alexnet_abort("`model` is missing: give an alexnet_model() or ", saved, ".")
}

new_alexnet_model <- function(model) {
  model <- simplify_py(model)
  # the evaluation its card records (a Spark job's with `evaluate = TRUE`), as alexnet_evaluate() gives one
  if (is.list(model$evaluation) && !is.null(model$evaluation$top1_accuracy)) {
    model$evaluation <- new_alexnet_evaluation(model$evaluation)
  }
  structure(model, class = "alexnet_model")
}

#' @rdname alexnet_model
#' @param x An `alexnet_model`.
#' @param ... For `alexnet_model()`, nothing: a name given there is refused, naming the nearest argument;
#'   ignored by `print()`.
#' @export
print.alexnet_model <- function(x, ...) {
  version <- if (!is.null(x$version)) paste0("@", x$version) else ""
  cat("AlexNet model ", x$name %||% basename(x$path %||% "?"), version, ": ",
      count_of(x$num_classes %||% length(x$class_ids), "class", "classes"),
      if (!is.null(x$image_size)) paste0(", images of ", x$image_size, " pixels"), "\n", sep = "")
  metrics <- final_metrics(x$metrics)
  validated <- if ("val_images" %in% names(metrics)) metrics[["val_images"]]  # a count, not a metric: said after them
  # top-5 of 5 classes or fewer says nothing: left out, as a history's print leaves it out
  metrics <- metrics[shown_metrics(list(params = list(num_classes = x$num_classes)), names(metrics))]
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
  if (!is.null(where)) cat("From ", without_passwords(where), "\n", sep = "")
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
