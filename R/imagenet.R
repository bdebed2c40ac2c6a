#' Write a synthetic ImageNet
#'
#' Writes an ImageNet with images of ImageNet's usual sizes and JPEG quality, whose classes a
#' convolutional network can tell apart, in any of the layouts people have ImageNet in and
#' [imagenet_upload()] reads: Kaggle's extracted download (`ILSVRC/Data/CLS-LOC/{train,val}`,
#' `LOC_synset_mapping.txt`, `LOC_val_solution.csv`), the official ILSVRC2012 archives (the training tar
#' of per-category tars, the validation tar and the devkit with its `meta.mat` and ground truth), Kaggle's
#' zip as downloaded, Kaggle's earlier download (its tree in one tar.gz), Hugging Face's `imagenet-1k`
#' parquet shards, torchvision's `ImageFolder` tree (`train/<wnid>/`, `val/<wnid>/`), or a folder of `<wnid>/`
#' folders. Every
#' layout holds the same images, byte for byte. Its categories are the ILSVRC2012 classes in label order
#' (see [imagenet_classes()]). The same arguments always give the same files. Use it to try the whole
#' workflow without the real data set, which cannot be redistributed.
#'
#' @param dest Folder to write into (created if needed).
#' @param ... Nothing: a name given there is refused, naming the nearest argument.
#' @eval declared_params(synthetic_options)
#' @details The files of each `layout`: `"kaggle"`, `ILSVRC/Data/CLS-LOC/{train,val}`, `LOC_synset_mapping.txt`
#'   and `LOC_val_solution.csv`; `"archives"`, `ILSVRC2012_img_train.tar`, `ILSVRC2012_img_val.tar` and
#'   `ILSVRC2012_devkit_t12.tar.gz`; `"kaggle_zip"`, `imagenet-object-localization-challenge.zip`;
#'   `"kaggle_targz"`, `imagenet_object_localization_patched2019.tar.gz` with the `LOC_*` files beside it;
#'   `"parquet"`, `data/train-*.parquet` and `data/validation-*.parquet`; `"imagefolder"`, `train/<wnid>/` and
#'   `val/<wnid>/` (each validation image in the folder of its category, no name file); `"folders"`, `<wnid>/`
#'   folders and `synset_words.txt`. All
#'   layouts but `"kaggle"` and `"folders"` hold ILSVRC2012's classes only, at most 1000.
#'
#'   The options (all but `dest`) are declared once in the core (`alexnet.data.options`), with their defaults and
#'   checks, as are the command line's `alexnet synth` options.
#' @returns An `alexnet_imagenet`: a list with `path`, `layout`, `classes`, `images`, `val_images`,
#'   `bytes`, `categories` and `quirks` (the paths of the odd files, by kind; inside their archive for an
#'   archive layout, as `<archive>/<member>`), which prints as a short summary.
#' @examples
#' if (alexnet_available()) {
#'   imagenet <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4,
#'                                  val_per_class = 1, max_side = 64)
#'   print(imagenet$images)
#'   # the same images as the official ILSVRC2012 archives
#'   archives <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4,
#'                                  val_per_class = 1, max_side = 64, layout = "archives")
#'   list.files(archives$path)
#' }
#' @export
imagenet_synthetic <- function(dest, ...) {
  if (missing(dest)) alexnet_abort("`dest` is missing: give the folder to write the synthetic ImageNet into.")
  args <- checked_args("imagenet_synthetic", names(formals()), others = FALSE)
  new_alexnet_imagenet(simplify_py(do.call(core_function("imagenet_synthetic"), args)))
}
# the options from the core's declaration, after `dest`
imagenet_synthetic <- with_declared(imagenet_synthetic, declared_formals(synthetic_options))

#' The 1000 classes of ILSVRC2012
#'
#' The standard list of the ImageNet-1k classes, as the package ships it: WordNet ids in sorted order,
#' so that a class's row is its label, the convention of TensorFlow Datasets, torchvision, Keras and
#' Hugging Face's `imagenet-1k`. [imagenet_upload()] names the categories of Hugging Face's parquet
#' shards, which carry only label numbers, from it, and checks the ids of the official archives and of
#' Kaggle's zip against it.
#'
#' @returns A data frame of 1000 rows in label order and 3 columns: `index` (the 0-based label), `id`
#'   (the WordNet id, `"n01440764"`) and `name` (its synonyms, `"tench, Tinca tinca"`).
#' @seealso [imagenet_categories()] for the categories on a board.
#' @examples
#' if (alexnet_available()) {
#'   classes <- imagenet_classes()
#'   print(head(classes))
#'   classes[classes$id == "n02123045", ]
#' }
#' @export
imagenet_classes <- function() {
  checked_args("imagenet_classes", character())
  records_to_df(core_function("imagenet_classes")())
}
