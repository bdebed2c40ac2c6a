#' Upload ImageNet to a board, one zip per category
#'
#' Reads ImageNet in place, in the layout you have it, without an extracted copy, and writes one pin per
#' category holding `<wnid>.zip`, the validation images with their labels, and last the `categories` pin
#' (see [imagenet_categories()] for its columns), so a reader never sees a half-written board as
#' complete. The layout is recognised from what `source` holds:
#'
#' * the official ILSVRC2012 archives: `ILSVRC2012_img_train.tar`, with `ILSVRC2012_img_val.tar` and
#'   `ILSVRC2012_devkit_t12.tar.gz` beside it for validation (the devkit's ground truth and `meta.mat`
#'   label the validation images); `source` is the folder that holds them or the training tar:
#'   `imagenet_upload("/data/ilsvrc2012", board = "gs://my-bucket/imagenet")`;
#' * Kaggle's download as it comes: `imagenet_upload("/data/imagenet-object-localization-challenge.zip")`;
#' * Kaggle's earlier download, its tree in one tar.gz with the `LOC_*` files, in its zip (which is read as
#'   the zip above) or beside it:
#'   `imagenet_upload("/data/imagenet_object_localization_patched2019.tar.gz")`, read as a stream (an upload
#'   run again reads it all again, decoding only what is not on the board);
#' * Hugging Face's `imagenet-1k` parquet shards (`train-*.parquet`, `validation-*.parquet`; the test split
#'   has no labels and is left out): `imagenet_upload("/data/imagenet-1k/data")`;
#' * Kaggle's download extracted (`ILSVRC/Data/CLS-LOC`): `imagenet_upload("/localssd/imagenet")`;
#' * torchvision's `ImageFolder` tree, `train/<wnid>/` and `val/<wnid>/` (each validation image in the folder of its
#'   category, as PyTorch's `valprep.sh` leaves them): `imagenet_upload("/data/imagenet")`;
#' * a folder of `<wnid>/` folders: `imagenet_upload("/data/fall11")`.
#'
#' Each is also read straight from a bucket, `imagenet_upload("gs://my-bucket/ilsvrc2012")` (`s3://` too); an
#' extracted tree there is listed a folder at a time, only the folders the upload reads, and its images fetched
#' 64 at a time.
#' A folder that holds more than one of them reads the official archives first, then Kaggle's zip, the
#' parquet shards, the extracted tree, the `train/`, `val/` tree and last the earlier tar.gz, with a warning that
#' names the ones left alone; to read another, pass the path of its own file or folder.
#' In the extracted trees a category's images are the `.JPEG`, `.jpg`, `.jpeg` and `.png` files directly in its
#' folder: images in other formats, sub-folders and other files are left out with a warning that names them (hidden
#' files without one), and a tree without a name file takes the names of ILSVRC2012's ids from
#' [imagenet_classes()].
#' Every image is checked: truncated, empty or undecodable files, files of an archive that are not
#' images, images whose bytes in an archive do not match the CRC-32 it records, and images of more pixels than
#' `max_pixels` (read from their header, without decoding them; with `resize` they are shrunk instead, unless still
#' larger once shrunk) are left out and listed in the result's `bad_images`, with why (the first 10 found also in a
#' warning). A damaged archive, a devkit (or Kaggle's `LOC_val_solution.csv`) that does not label every
#' validation image or a shard with a label outside 0..999 stops the upload with an error that names the
#' file, before anything is uploaded. Running it again skips the categories already on the board with
#' the same content, so an interrupted upload can simply be run again: from the training tar or
#' Kaggle's zip, the finished categories are not even read again. A source that gives no validation images
#' (a training tar alone, parquet shards without `validation-*.parquet`, `train/` without `val/`, a folder of
#' `<wnid>/` folders) is
#' uploaded with a warning that names the files of its layout that hold them: without them training measures no
#' validation accuracy and [alexnet_evaluate()] has nothing to measure. Add them and run it again: the
#' training categories are skipped and the validation images uploaded.
#'
#' @section Each layout from R, Python and the shell:
#' ```
#' # the official ILSVRC2012 archives: the folder holding the training tar, the validation tar, the devkit
#' imagenet_upload("/data/ilsvrc2012", board = "gs://my-bucket/imagenet")
#' alexnet.imagenet_upload("/data/ilsvrc2012", board="gs://my-bucket/imagenet")
#' alexnet upload /data/ilsvrc2012 --board gs://my-bucket/imagenet
#' # Kaggle's zip as downloaded
#' imagenet_upload("/data/imagenet-object-localization-challenge.zip", board = "gs://my-bucket/imagenet")
#' alexnet.imagenet_upload("/data/imagenet-object-localization-challenge.zip", board="gs://my-bucket/imagenet")
#' alexnet upload /data/imagenet-object-localization-challenge.zip --board gs://my-bucket/imagenet
#' # Kaggle's earlier download: its tree in one tar.gz, the LOC_* files beside it
#' imagenet_upload("/data/kaggle-2019/imagenet_object_localization_patched2019.tar.gz", board = "gs://my-bucket/imagenet")
#' alexnet.imagenet_upload("/data/kaggle-2019/imagenet_object_localization_patched2019.tar.gz", board="gs://my-bucket/imagenet")
#' alexnet upload /data/kaggle-2019/imagenet_object_localization_patched2019.tar.gz --board gs://my-bucket/imagenet
#' # Hugging Face's imagenet-1k parquet shards
#' imagenet_upload("/data/imagenet-1k/data", board = "gs://my-bucket/imagenet")
#' alexnet.imagenet_upload("/data/imagenet-1k/data", board="gs://my-bucket/imagenet")
#' alexnet upload /data/imagenet-1k/data --board gs://my-bucket/imagenet
#' # Kaggle's download, extracted
#' imagenet_upload("/data/kaggle", board = "gs://my-bucket/imagenet")
#' alexnet.imagenet_upload("/data/kaggle", board="gs://my-bucket/imagenet")
#' alexnet upload /data/kaggle --board gs://my-bucket/imagenet
#' # torchvision's ImageFolder tree: train/<wnid>/ and val/<wnid>/
#' imagenet_upload("/data/imagenet", board = "gs://my-bucket/imagenet")
#' alexnet.imagenet_upload("/data/imagenet", board="gs://my-bucket/imagenet")
#' alexnet upload /data/imagenet --board gs://my-bucket/imagenet
#' # a folder of <wnid>/ folders
#' imagenet_upload("/data/fall11", board = "gs://my-bucket/imagenet")
#' alexnet.imagenet_upload("/data/fall11", board="gs://my-bucket/imagenet")
#' alexnet upload /data/fall11 --board gs://my-bucket/imagenet
#' ```
#'
#' @param source The ImageNet source, in any of the layouts above: a local path, or a `gs://` or `s3://` URL.
#'   Its old name, `path`, still works given by name, with a warning.
#' @param board The board to write to: a local folder (or `file://` URL), `gs://bucket/prefix` or
#'   `s3://bucket/prefix`. `NULL` uses the `ALEXNET_BOARD` environment variable, else a folder under
#'   the user's cache directory.
#' @eval declared_params(upload_options)
#' @param ... Only `path`, the old name of `source` (with a warning): any other name is refused, naming the closest
#'   option.
#' @details The options (all but `source` and `board`) are declared once in the core (`alexnet.data.options`), with
#'   their defaults and checks, as are the command line's `alexnet upload` options.
#'
#'   One upload writes to a board at a time: a second one to the same board is an error naming the first (on a bucket
#'   after waiting up to 34 s, in case the first was killed). An upload interrupted and run again skips the
#'   categories already on the board.
#' @returns An `alexnet_upload`, which prints as a short summary: a list with `board` (the resolved
#'   location), `source` and `layout` (`"archives"`, `"kaggle_zip"`, `"kaggle_targz"`, `"parquet"`, `"kaggle"`,
#'   `"imagefolder"` or `"folders"`) of the source read, `categories` (how
#'   many are on the board), `uploaded` and `skipped` (the WordNet ids written now and those already
#'   there with the same content; `character(0)` when none), `val_uploaded` (the ids whose validation images were
#'   written now, also to categories already there), `excluded` (a data frame of the categories left out
#'   for having fewer than `min_images` good images: `category` and `images`), `images` and
#'   `val_images` on the board, `bytes` (of every zip on the board), `uploaded_bytes` (written now),
#'   `seconds`, `mb_per_s`, `bad_images` (a data frame of the files left out: `category`, `split`,
#'   `file`, `reason`) and `pruned_versions` (old pin versions deleted with `keep_versions`).
#' @seealso [imagenet_categories()], [imagenet_partition()], [imagenet_synthetic()] to try each layout.
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4, max_side = 64)
#'   board <- tempfile("board-")
#'   report <- imagenet_upload(src$path, board = board)
#'   print(imagenet_categories(board))
#'   # the same images as the official archives: the same board
#'   archives <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4, max_side = 64,
#'                                  layout = "archives")
#'   imagenet_upload(archives$path, board = tempfile("board-"))
#' }
#' @export
imagenet_upload <- function(source, board = NULL, ...) {
  args <- checked_args("imagenet_upload", names(formals()), renamed = c(path = "source"))
  report <- simplify_py(do.call(core_function("imagenet_upload"), args))
  report$bad_images <- records_table(report$bad_images, c(category = "character", split = "character",
                                                          file = "character", reason = "character"))
  report$excluded <- records_table(report$excluded, c(category = "character", images = "integer"))
  new_alexnet_upload(report)
}
# the options from the core's declaration, before `...`
imagenet_upload <- with_declared(imagenet_upload, declared_formals(upload_options))

#' The categories on a board
#'
#' Reads the `categories` pin that [imagenet_upload()] writes last; it writes nothing.
#'
#' @param board The board to read from: a local folder (or `file://` URL), `gs://bucket/prefix`,
#'   `s3://bucket/prefix` or an `https://` URL of a board. `NULL` uses the `ALEXNET_BOARD` environment
#'   variable, else a folder under the user's cache directory.
#' @param ... Nothing: a name given there is refused, naming the nearest argument.
#' @returns A data frame with one row per category, in label order, and 11 columns: `id` (WordNet
#'   id), `name`, `index` (the global 0-based label), `images`, `bytes`, `sha256` and `version` of
#'   the category's training zip and pin, and `val_images`, `val_bytes`, `val_sha256`, `val_version`
#'   of its validation images' pin (0 and `""` when it has none). Its class `alexnet_categories` (before
#'   `data.frame`) prints it short: the counts, and the first rows' ids, names and image counts.
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4, max_side = 64)
#'   board <- tempfile("board-")
#'   imagenet_upload(src$path, board = board)
#'   imagenet_categories(board)
#' }
#' @export
imagenet_categories <- function(board = NULL, ...) {
  args <- checked_args("imagenet_categories", names(formals()), others = FALSE)
  categories <- records_to_df(do.call(core_function("imagenet_categories"), args))
  class(categories) <- c("alexnet_categories", class(categories))
  categories
}

#' @rdname imagenet_categories
#' @param x An `alexnet_categories` data frame, for `print()`.
#' @param n The rows shown.
#' @export
print.alexnet_categories <- function(x, n = 10L, ...) {
  counts <- c(if (!is.null(x$images)) count_of(sum(x$images), "training image"),
              if (!is.null(x$val_images)) count_of(sum(x$val_images), "validation image"))
  cat(count_of(nrow(x), "category", "categories"), if (length(counts)) ": ", paste(counts, collapse = " and "), "\n",
      sep = "")
  # the whole table shows its five short columns; a table of some columns, those
  overview <- c("index", "id", "name", "images", "val_images")
  shown <- as.data.frame(unclass(x)[if (all(overview %in% names(x))) overview else names(x)])
  for (column in names(shown)) {  # long names and 64-character hashes shortened
    if (is.character(shown[[column]])) {
      width <- if (grepl("sha256", column)) 12 else 40
      long <- nchar(shown[[column]]) > width
      shown[[column]][long] <- paste0(substr(shown[[column]][long], 1, width - 3), "...")
    }
  }
  print(utils::head(shown, n), row.names = FALSE)
  if (nrow(x) > n) cat("... and ", nrow(x) - n, " more (all: as.data.frame(x))\n", sep = "")
  invisible(x)
}

#' @rdname imagenet_categories
#' @param row.names,optional Ignored; part of the `as.data.frame()` generic.
#' @export
as.data.frame.alexnet_categories <- function(x, row.names = NULL, optional = FALSE, ...) {
  class(x) <- "data.frame"
  x
}

#' Fetch one worker's share of ImageNet
#'
#' Splits the categories on the board into `total` partitions of balanced image counts and fetches
#' partition number `partition` (0-based): its zips are downloaded in parallel, verified against the
#' `categories` pin, and extracted into a local cache. A second call reuses the cache. It only reads
#' the board.
#'
#' @eval declared_params(partition_options)
#' @inheritParams imagenet_categories
#' @eval declared_params(fetch_options)
#' @param ... Nothing more: a name that is not an option is refused, naming the closest.
#' @details `partition`, `total` and the options (all but `board`) are declared once in the core
#'   (`alexnet.data.options`), with their defaults and checks, as are the command line's `alexnet fetch` options.
#'   On Spark, a worker's `partition` is its `barrier$partition` and `total` the number of workers.
#' @returns An `alexnet_partition`, a list ready for [alexnet_train()]: `image` (local file paths), `category` (WordNet id
#'   of each image), `categories` (this partition's ids), `label` (global 0-based label of each
#'   image), `num_classes` (the number of categories on the board), `val_image`, `val_label`,
#'   `val_category` for this partition's validation images when the board has them, and
#'   `partition_sizes`, `val_partition_sizes` (the images of every partition, from which the workers of a
#'   multi-worker run agree on their steps per epoch), `class_ids` and `class_names` (every category
#'   of the board by label, which a model card records), `board` and `cache_dir` (resolved),
#'   `categories_version` (the version of the `categories` pin read), `downloaded_bytes` and `seconds`
#'   (of this fetch; 0 bytes when everything was cached), `left_out_at_upload` (the validation images of this
#'   partition's categories the upload left out, which an evaluation of it says; `NULL` when the board does not say
#'   or `validation = FALSE`), and `resize` (the short side the upload stored the images at, `NULL` when they were
#'   stored as they were: [alexnet_train()] and [alexnet_evaluate()] warn when they would enlarge their crops of
#'   it). It prints as a short summary;
#'   `as.data.frame()` gives one row per image.
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 4, images_per_class = 4, max_side = 64)
#'   board <- tempfile("board-")
#'   imagenet_upload(src$path, board = board)
#'   data <- imagenet_partition(partition = 0, total = 2, board = board, cache_dir = tempfile("cache-"))
#'   table(data$category)
#' }
#' @export
imagenet_partition <- function(board = NULL, ...) {
  args <- checked_args("imagenet_partition", names(formals()))
  new_alexnet_partition(simplify_py(do.call(core_function("imagenet_partition"), args)))
}
# from the core's declarations: which partition first (given by position too), the options before `...`
imagenet_partition <- with_declared(with_declared(imagenet_partition, declared_formals(fetch_options)),
                                    declared_formals(partition_options),
                                    first = names(partition_options))

#' Fetch a board's validation images alone
#'
#' Fetches the validation images of `board` into the local cache [imagenet_partition()] uses (the same downloads,
#' checks and reuse): all of them, or share `partition` of `total`. The categories that have validation images are
#' split on their validation image counts, as an evaluation's workers share them, so that every share holds about as
#' many images, and the shares together hold every validation image once. [alexnet_evaluate()] with `board` fetches
#' them so itself; call this to fetch them ahead, or to score them with `data`.
#'
#' @eval declared_params(validation_partition_options)
#' @inheritParams imagenet_categories
#' @eval declared_params(validation_fetch_options)
#' @param ... Nothing more: a name that is not an option is refused, naming the closest.
#' @details `partition`, `total` and the options are declared once in the core (`alexnet.data.options`), as are
#'   the command line's `alexnet validation` options.
#' @returns An `alexnet_validation` (also an `alexnet_partition`, without training images), a list: `val_image`
#'   (local file paths), `val_label` (global 0-based label of each image), `val_category` (WordNet id of each),
#'   `categories` (this share's ids), `num_classes`, `class_ids` and `class_names` (every category of the board, by
#'   label), `board`, `cache_dir`, `partition`, `total` and `left_out_at_upload` (how many validation images of
#'   these categories the upload left out, as the board's `bad_images` pin names them; share 0 also counts those of
#'   categories left without any; `NULL` when the board does not say) and `resize` (as [imagenet_partition()]
#'   gives it). It prints as a short summary, which says
#'   those left out when there are some; `as.data.frame()` gives one row per image.
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 4, images_per_class = 4, val_per_class = 2, max_side = 64)
#'   board <- tempfile("board-")
#'   imagenet_upload(src$path, board = board)
#'   imagenet_validation(board = board, cache_dir = tempfile("cache-"))
#' }
#' @export
imagenet_validation <- function(board = NULL, ...) {
  args <- checked_args("imagenet_validation", names(formals()))
  found <- simplify_py(do.call(core_function("imagenet_validation"), args))
  structure(found, class = c("alexnet_validation", "alexnet_partition"))
}
# from the core's declarations: the board, then which share (given by position too, as in Python), the options
# before `...`
imagenet_validation <- with_declared(with_declared(imagenet_validation, declared_formals(validation_fetch_options)),
                                     declared_formals(validation_partition_options),
                                     first = c("board", names(validation_partition_options)))
