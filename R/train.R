#' Train AlexNet
#'
#' Trains AlexNet on a partition of ImageNet with a tf.data pipeline that keeps images compressed
#' until they are decoded, in parallel, with a random crop decoded straight from the JPEG, while the
#' previous batch trains.
#'
#' The data is the result of [imagenet_partition()], or a list made by hand with `image` (file
#' paths), `category` (category of each image) and `categories` (all categories); `label` and
#' `num_classes` are then derived from the sorted categories. Because `data` is what
#' [imagenet_partition()] returns, the call can be piped:
#' `imagenet_partition(partition = 0) %>% alexnet_train(parallel = 6)`.
#'
#' @param batch_size Images per batch on each replica (GPU, or worker's CPU); the global batch is
#'   `batch_size` times the number of replicas.
#' @param epochs Passes over the data.
#' @param data The images: see Details. When it is given as the first argument (as a pipe does),
#'   it is taken as `data`.
#' @param strategy `NULL` or `"default"` (one device), `"mirrored"` (every GPU of this machine),
#'   `"multi_worker"` (every worker in `TF_CONFIG`), or a `tf.distribute` strategy object such as
#'   `tf$distribute$MirroredStrategy()`.
#' @param parallel Images decoded at the same time; `NULL` lets tf.data tune it.
#' @param ... Further arguments for the Python `alexnet_train()`: `image_size`, `learning_rate`,
#'   `checkpoint_dir` (resume after an interruption), `model_dir`, `steps_per_epoch`, `seed`,
#'   `verbose`, ...
#' @returns An `alexnet_history`: a list with `params` and `metrics` (`loss`, `accuracy`,
#'   `top5_accuracy` and their `val_` counterparts, one value per epoch), with `print()`, `plot()`
#'   and `as.data.frame()` methods.
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 8, max_side = 96)
#'   board <- tempfile("board-")
#'   imagenet_upload(src$path, board = board)
#'   history <- imagenet_partition(partition = 0, total = 1, board = board,
#'                                 cache_dir = tempfile("cache-")) %>%
#'     alexnet_train(epochs = 1, image_size = 96, verbose = 0)
#'   history$metrics$accuracy
#' }
#' @export
alexnet_train <- function(batch_size = 32, epochs = 2, data = NULL, strategy = NULL,
                          parallel = NULL, ...) {
  names <- names(formals())
  if (!missing(batch_size) && is.list(batch_size)) {
    # the first argument is the data, as in imagenet_partition() %>% alexnet_train()
    if (!missing(data)) alexnet_abort("`data` was given twice (first argument and `data =`).")
    data <- batch_size
    names <- setdiff(names, "batch_size")
  }
  args <- checked_args("alexnet_train", names)
  if (!is.null(args$data)) args$data <- train_data(args$data)
  history <- do.call(core_function("alexnet_train"), args)
  new_alexnet_history(simplify_py(history))
}

# A partition (an `alexnet_partition`, or a list made by hand) as the core takes it: a plain list, whose fields
# that hold one value per image or category stay lists on the Python side, even with one element.
train_data <- function(data) {
  as_py_lists(unclass(data), c("image", "category", "categories", "label", "val_image", "val_label", "val_category",
                               "partition_sizes", "val_partition_sizes", "class_ids", "class_names"))
}
