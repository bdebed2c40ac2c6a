#' Write a synthetic ImageNet
#'
#' Writes an ImageNet in Kaggle's layout (`ILSVRC/Data/CLS-LOC/{train,val}`, `LOC_synset_mapping.txt`,
#' `LOC_val_solution.csv`) with images of ImageNet's usual sizes and JPEG quality, whose classes a
#' convolutional network can tell apart. The same arguments always give the same files. Use it to
#' try the whole workflow without the real data set, which cannot be redistributed.
#'
#' @param dest Folder to write into (created if needed).
#' @param classes Number of categories.
#' @param images_per_class Training images per category.
#' @param val_per_class Validation images per category.
#' @param seed Random seed: the same seed gives byte-identical files.
#' @param quirks Also write the odd files real ImageNet has: a CMYK JPEG, a grayscale JPEG, a PNG
#'   named `.JPEG`, a truncated and an empty file (in the first category).
#' @param max_side Scale images down so their longer side is at most this many pixels (`NULL` keeps
#'   ImageNet's sizes); small images make quick experiments and tests.
#' @returns An `alexnet_imagenet`: a list with `path`, `classes`, `images`, `val_images`, `bytes`,
#'   `categories` and `quirks` (the paths of the odd files, by kind), which prints as a short summary.
#' @examples
#' if (alexnet_available()) {
#'   imagenet <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 4,
#'                                  val_per_class = 1, max_side = 64)
#'   imagenet$images
#' }
#' @export
imagenet_synthetic <- function(dest, classes = 10, images_per_class = 100, val_per_class = 10,
                               seed = 0, quirks = FALSE, max_side = NULL) {
  args <- checked_args("imagenet_synthetic", names(formals()))
  new_alexnet_imagenet(simplify_py(do.call(core_function("imagenet_synthetic"), args)))
}
