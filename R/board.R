#' Upload ImageNet to a board, one zip per category
#'
#' Reads an ImageNet tree (Kaggle's `ILSVRC/Data/CLS-LOC` layout or a plain folder of `<wnid>/`
#' folders) and writes one pin per category holding `<wnid>.zip`, the validation images with their
#' labels, and last the `categories` pin (`id`, `name`, `index`, `images`, `bytes`, `sha256`), so a
#' reader never sees a half-written board as complete. Every image is checked: truncated, empty or
#' undecodable files are left out and listed in the result. Running it again skips the categories
#' already on the board with the same content, so an interrupted upload can simply be run again.
#'
#' @param path The ImageNet folder.
#' @param board Where to write: a local folder (or `file://` URL), `gs://bucket/prefix` or
#'   `s3://bucket/prefix`. `NULL` uses the `ALEXNET_BOARD` environment variable, else a folder under
#'   the user's cache directory.
#' @param workers Categories uploaded at the same time.
#' @param min_images Leave out categories with fewer training images than this.
#' @param resize Re-encode images so their short side is at most this many pixels (`NULL` keeps the
#'   original bytes): a smaller bucket and faster decoding when training.
#' @param quality JPEG quality used when re-encoding.
#' @param keep_versions Once the upload is complete, keep only this many versions (the newest) of each
#'   pin, so that uploading changed data again (with `resize`, say) does not leave the old copy on the
#'   board; `NULL` keeps every version. Readers still holding an older `categories` table then no
#'   longer find the versions it names.
#' @param ... Further arguments for the Python `imagenet_upload()`.
#' @returns An `alexnet_upload`: a list describing the upload (categories uploaded and skipped, images,
#'   bytes, seconds, throughput, the resolved board, and `bad_images`, a data frame of the files left out),
#'   which prints as a short summary.
#' @seealso [imagenet_categories()], [imagenet_partition()].
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4, max_side = 64)
#'   board <- tempfile("board-")
#'   report <- imagenet_upload(src$path, board = board)
#'   imagenet_categories(board)
#' }
#' @export
imagenet_upload <- function(path, board = NULL, workers = 8, min_images = 0, resize = NULL,
                            quality = 90, keep_versions = NULL, ...) {
  args <- checked_args("imagenet_upload", names(formals()))
  report <- simplify_py(do.call(core_function("imagenet_upload"), args))
  report$bad_images <- records_to_df(report$bad_images)
  new_alexnet_upload(report)
}

#' The categories on a board
#'
#' @inheritParams imagenet_upload
#' @returns A data frame with one row per category: `id` (WordNet id), `name`, `index` (the global
#'   0-based label), `images`, `bytes` and `sha256` of the category's zip.
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4, max_side = 64)
#'   board <- tempfile("board-")
#'   imagenet_upload(src$path, board = board)
#'   imagenet_categories(board)
#' }
#' @export
imagenet_categories <- function(board = NULL) {
  records_to_df(do.call(core_function("imagenet_categories"), checked_args("imagenet_categories", "board")))
}

#' Fetch one worker's share of ImageNet
#'
#' Splits the categories on the board into `total` partitions of balanced image counts and fetches
#' partition number `partition` (0-based): its zips are downloaded in parallel, verified against the
#' `categories` pin, and extracted into a local cache. A second call reuses the cache.
#'
#' @param partition Which partition, from `0` to `total - 1` (on Spark, `barrier$partition`).
#' @param total How many partitions (workers) the categories are split into.
#' @inheritParams imagenet_upload
#' @param cache_dir Where zips are extracted; `NULL` uses a folder under the user's cache directory.
#' @param workers Downloads at the same time.
#' @param verify Check every cached file's CRC-32 against the one its zip recorded (reads every file),
#'   and fetch a damaged category again; `FALSE` checks names and sizes only.
#' @param ... Further arguments for the Python `imagenet_partition()`: `retries`, `validation`.
#' @returns An `alexnet_partition`, a list ready for [alexnet_train()]: `image` (local file paths), `category` (WordNet id
#'   of each image), `categories` (this partition's ids), `label` (global 0-based label of each
#'   image), `num_classes` (the number of categories on the board), `val_image`, `val_label`,
#'   `val_category` for this partition's validation images when the board has them, and
#'   `partition_sizes`, `val_partition_sizes` (the images of every partition, from which the workers of a
#'   multi-worker run agree on their steps per epoch). It prints as a short summary; `as.data.frame()` gives
#'   one row per image.
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 4, images_per_class = 4, max_side = 64)
#'   board <- tempfile("board-")
#'   imagenet_upload(src$path, board = board)
#'   data <- imagenet_partition(partition = 0, total = 2, board = board, cache_dir = tempfile("cache-"))
#'   table(data$category)
#' }
#' @export
imagenet_partition <- function(partition = 0, total = 16, board = NULL, cache_dir = NULL,
                               workers = 8, verify = FALSE, ...) {
  args <- checked_args("imagenet_partition", names(formals()))
  new_alexnet_partition(simplify_py(do.call(core_function("imagenet_partition"), args)))
}
