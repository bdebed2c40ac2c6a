# The core's `fun` (alexnet_predict(), alexnet_features()) called with the arguments of the R function that calls
# this (whose formals are `names`): checked, `model` and `images` required, the model as the core takes it and the
# images as a list (core_images()).
call_on_images <- function(fun, names, env = parent.frame()) {
  args <- checked_args(fun, setdiff(names, "images"), env)  # `images` is checked by core_images()
  given <- function(name) !eval(call("missing", as.name(name)), env)
  if (!given("model")) model_missing()
  if (!given("images")) alexnet_abort("`images` is missing: give the paths of the images, or a folder of them.")
  args$images <- core_images(get("images", envir = env))
  do.call(core_function(fun), args)
}

# `images` as the core takes them, a list (one path stays a list of one): the strings of a character vector, one
# raw vector (one image's encoded bytes, as readBin() reads a file; it reaches Python as bytes), or a list of
# strings and raw vectors, their names dropped. Anything else is an `alexnet_error` saying what is taken; pixels (a numeric array) also
# how to encode them.
core_images <- function(images) {
  if (is.factor(images)) images <- as.character(images)  # a factor stands for its labels
  if (is.vector(images)) images <- unname(images)  # sapply()'s names: a dict in Python
  if (is.raw(images)) return(list(as.vector(images)))
  if (is.character(images) && !anyNA(images) && is.null(dim(images))) return(as.list(images))
  one <- function(x) is.raw(x) || (is.character(x) && length(x) == 1L && !is.na(x))
  if (is.list(images) && !is.object(images) && all(vapply(images, one, logical(1)))) {
    return(lapply(images, function(x) if (is.raw(x)) as.vector(x) else x))
  }
  pixels <- if (is.numeric(images) && length(dim(images)) %in% 2:3) {
    "; to give pixels, encode them first, e.g. png::writePNG(pixels / 255) for values 0..255"
  }
  alexnet_abort("`images` must be paths, locations or folders of images (a character vector), or encoded images ",
                "(a raw vector, or a list of raw vectors and paths), not ", show_value(images), pixels, ".")
}

#' Classify images with a trained AlexNet
#'
#' @param model An [alexnet_model()], or the path or location of a saved model.
#' @param images Paths or locations (`gs://`, `s3://`, `https://`) of image files (JPEG, PNG, GIF, BMP, WebP; not
#'   TIFF nor an animated WebP), or folders (local, `gs://`, `s3://`): a folder stands for its files of those
#'   formats, in the order of their names (hidden files, other files and subfolders left out). Or encoded images: a
#'   raw vector (one image's bytes, as `readBin(path, "raw", file.size(path))` reads them), or a list of raw vectors
#'   and paths; such an image is named `<bytes i>` in the result (`i` its place in the list, from 0). Pixels are not
#'   taken: encode them first (e.g. `png::writePNG()` gives a PNG's raw vector).
#' @eval declared_params(predict_options)
#' @param ... Nothing more: a name that is not an option is refused, naming the closest.
#' @details Images are read 16 at a time (a bucket's objects in parallel) and predicted a chunk of 64 at a time, so
#'   that memory holds a chunk of them however many are given. An image that cannot be read or decoded is named in an
#'   error, with every other such image, and nothing is returned; so is an image of more than 89,478,485 pixels
#'   (where Pillow warns of a decompression bomb, and the limit of training and of [imagenet_upload()] too), from
#'   its header, before anything of it is decoded. EXIF orientation is not applied: a phone photo stored sideways
#'   with an `Orientation` tag is scored as stored, as the training images were read, so rotate such photos first.
#'   The model computes in the precision it trained in: a model trained in bfloat16 predicts (and
#'   [alexnet_features()] computes) in bfloat16, where its [alexnet_export()] computes in float32 (probabilities
#'   differ by up to about 2e-4). The options (`top`, `batch_size`) are declared once
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
#'   that cannot be read or decoded is named in an error, with every other such image, and nothing is returned
#'   (with `skip_bad = TRUE`, it is left out, named in a warning). The
#'   options (`layer`, `batch_size`, `skip_bad`) are declared once in the core (`alexnet.model.options`), with their defaults
#'   and checks, as are the command line's `alexnet features` options.
#' @returns A numeric matrix with a row per image, named by the image (its path or location; a folder's files as
#'   `folder/file`), and a column per value of the layer, named as the command line's `alexnet features` names them
#'   (`fc2_1` to `fc2_4096`; for `logits`, the model's classes by their WordNet ids, `n01440764`, ..., in label
#'   order); its attribute `layer` names the layer, and its class `alexnet_features` (before the matrix's) prints it
#'   short: its size, its layer and its first rows and columns (a matrix of 4096 columns printed megabytes).
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
  dimnames(features) <- list(as.character(unlist(result$image)), as.character(unlist(result$columns)))
  attr(features, "layer") <- result$layer
  class(features) <- c("alexnet_features", class(features))
  features
}
# the options from the core's declaration (alexnet.model.options), after `images`
alexnet_features <- with_declared(alexnet_features, declared_formals(features_options))

#' @rdname alexnet_features
#' @param x An `alexnet_features` matrix, for `print()`.
#' @export
print.alexnet_features <- function(x, ...) {
  cat("AlexNet features: ", nrow(x), if (nrow(x) == 1L) " image" else " images", " x ", ncol(x),
      " values of layer ", attr(x, "layer"), "\n", sep = "")
  rows <- seq_len(min(nrow(x), 5L))
  columns <- seq_len(min(ncol(x), 4L))
  corner <- unclass(x)[rows, columns, drop = FALSE]
  attr(corner, "layer") <- NULL
  if (!is.null(rownames(corner))) rownames(corner) <- basename(rownames(corner))
  print(signif(corner, 4))
  if (nrow(x) > length(rows) || ncol(x) > length(columns)) {
    cat("... (the first ", length(rows), " rows and ", length(columns), " columns; all: unclass(x))\n", sep = "")
  }
  invisible(x)
}

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
#' @param ... For `plot()`, graphical parameters passed to [graphics::title()]; for `alexnet_filters()`, nothing:
#'   a name given there is refused, naming the nearest argument; unused by `print()`.
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
alexnet_filters <- function(model, path = NULL, ...) {
  args <- checked_args("alexnet_filters", names(formals()), others = FALSE)
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
