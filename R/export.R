#' Export a trained AlexNet for serving without this package
#'
#' Writes the model as a TensorFlow SavedModel (or a TF Lite file) that plain TensorFlow loads, without alexnet,
#' Keras or Python's Keras classes: TensorFlow Serving, `tf.saved_model.load()`, `saved_model_cli`, or another
#' language's TensorFlow bindings. Image decoding, the centre crop at the card's size and the normalisation are
#' inside the graph, as [alexnet_predict()] does them, and the model computes in float32 whatever precision it
#' trained in. The model card goes beside it as `alexnet-model.json`.
#'
#' The SavedModel has two signatures. `serving_default` takes `images`, a batch of encoded images (JPEG, PNG, GIF,
#' BMP, WebP) as strings, and returns for each the `top` most probable classes, best first: `indices` (label
#' numbers), `ids` (WordNet ids), `names` and `probabilities`, and `ok` and `error`. An image it cannot decode does
#' not fail the call: its `ok` is false and its `error` says why (`"empty"`, `"not a JPEG, PNG, GIF, BMP or WebP
#' image"`, `"an animated WebP is not read (a still one is)"`, `"truncated or corrupt"`, `"too large to decode
#' safely (N pixels, more than the limit 89478485)"`), its indices are -1, its ids and names empty and its probabilities 0; the
#' other images get their answers. An image whose header declares more pixels than that limit (the one
#' [alexnet_predict()] and training apply) is refused before anything of it is decoded. EXIF orientation is not applied,
#' as in [alexnet_predict()]: rotate photos stored sideways first. A model trained in bfloat16 computes in float32
#' here but in bfloat16 in [alexnet_predict()] and [alexnet_features()]: probabilities differ by up to about 2e-4. `pixels` takes float32 pixels `[batch, size, size, 3]` (0 to 255, already cropped
#' to the card's size) and returns the four rankings. `format = "tflite"` converts that signature with
#' TensorFlow's `tf.lite.TFLiteConverter.from_saved_model()`: TF Lite has no image decoding, the application
#' decodes. At full size (1000 classes, 224 pixels) the SavedModel and the TF Lite file take about 250 MB each
#' (float32 weights).
#'
#' @param model An [alexnet_model()], or the path or location of a saved model with its card (a model without a
#'   card is refused: its classes' names and image size would be unknown).
#' @param path The folder to write: a path, `file://`, `gs://` or `s3://` location. One that exists and is not
#'   empty is refused, unless `overwrite = TRUE` and it holds an earlier export and nothing else, which is then
#'   replaced (a folder holding anything else is never emptied). `NULL` with a `board`: publish only.
#' @eval declared_params(export_options)
#' @param board A board to also publish the export on, in a model pin beside the model's `alexnet.keras` (a new
#'   version of pin `name`, unless its newest version holds this model with the same export already: that version
#'   is kept and returned); [alexnet_model()] with `export = TRUE` reads it back, checked against its SHA-256.
#' @param name The model pin's name; `NULL` is the pin `model` came from, else `"alexnet"`.
#' @param ... Nothing more for `alexnet_export()`: a name that is not an option is refused, naming the closest;
#'   ignored by `print()`.
#' @returns An `alexnet_export`, which prints as a short summary (the lines `alexnet export` prints): a list
#'   with `path` (the location written, or `NULL`), `format`, `files` (relative paths) and `bytes` of the export,
#'   `model` (what was exported), `image_size`, `num_classes`, `top`, `signatures` (by name, their `inputs` and
#'   `outputs`, each name with its type and shape) and `pin` (`board`, `name` and `version` of the model pin published, or `NULL`).
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
  # the same lines, in the same words, as the command line's summary of an export (python/alexnet/cli/model.py
  # `export_summary`; tests/testthat/test-summaries.R compares them)
  kind <- if (identical(x$format, "tflite")) "TF Lite" else "SavedModel"
  cat(kind, " export of ", x$model %||% "a model", ": ", count_of(x$num_classes, "class", "classes"),
      ", images of ", x$image_size, " pixels, top ", x$top, "\n", sep = "")
  if (!is.null(x$path)) {
    cat("Written to ", x$path, " (", count_of(length(x$files), "file"), ", ", format_bytes(x$bytes), ")\n", sep = "")
  }
  if (!is.null(x$pin)) cat("Pinned as ", x$pin$name, " version ", x$pin$version, " on ", x$pin$board, "\n", sep = "")
  for (signature in names(x$signatures)) {
    s <- x$signatures[[signature]]
    shown <- function(part) paste(names(part), unlist(part), collapse = ", ")
    cat("Signature ", signature, ": ", shown(s$inputs), " -> ", shown(s$outputs), "\n", sep = "")
  }
  invisible(x)
}
