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
#'   `NULL` for the default. Its classes (or `data`'s) must be among the model's, by WordNet id: a board of some of
#'   them is scored over all the model's outputs, with a row of `per_class` for each of its classes; one with
#'   classes the model lacks is refused, naming them (give the images of the classes both hold as `data`, with
#'   `val_image` and `val_category`).
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
#'   `bad_images`, `left_out_at_upload` (how many of the board's validation images the upload left out, which no
#'   evaluation can count: those of the categories scored, as [imagenet_validation()] counts them; `NULL` when not
#'   known), `model`, and the same counts class by class: `per_class`, a data frame with a row per class
#'   that has images (`index`, `id`, `name`, `images`, `top1_correct`, `top5_correct`, `top1_accuracy`,
#'   `top5_accuracy`, `confused_with`: the id of the class its images were most often taken for, `confused_images`:
#'   how many), and `confusions`, a data frame with a row per pair of a class and a class its images were wrongly
#'   taken for (`index`, `id`, `name`, `predicted_index`, `predicted_id`, `predicted_name`, `images`), the most
#'   frequent first. It prints as a few lines: the accuracies, how they were measured, the lowest classes and the
#'   most frequent confusions. `as.data.frame()` gives one row (one per worker for [alexnet_spark_evaluate()];
#'   `left_out_at_upload` is `NA` where not known, so that evaluations bind by rows); `plot()` the accuracy of every
#'   class.
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

# The core's evaluation as an R object: `bad_images` a character vector (a model card's record: their number, an
# integer), `per_class` and `confusions` data frames, and for a Spark evaluation `workers` a data frame with one row
# per worker (the core's `per_worker`).
new_alexnet_evaluation <- function(result) {
  tables <- result[c("per_worker", "per_class", "confusions")]
  result[names(tables)] <- NULL
  result <- simplify_py(result)
  bad <- unlist(result$bad_images)
  result$bad_images <- if (is.numeric(bad) && length(bad) == 1L) as.integer(bad) else as.character(bad)
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
  workers <- if (is.data.frame(x$workers)) nrow(x$workers) else 0L
  if (is_scalar(x$attempt, is.numeric)) {  # a Spark evaluation's, as alexnet_spark_train() says its evaluation
    cat("Evaluation of the model on every validation image of the board",
        if (is_scalar(x$model, is.character) && nzchar(x$model)) paste0(" (", x$model, ")"), ", on ",
        count_of(workers, "Spark worker"), " (attempt ", x$attempt, "):\n", sep = "")
  }
  cat("Top-1 accuracy ", percent(x$top1_accuracy), " (", format(x$top1_correct %||% NA, big.mark = ","), " of ",
      count_of(x$images, "image"), ")",
      if (top_k_shown) paste0(", top-", top_k, " ", percent(x$top5_accuracy), " (",
                              format(x$top5_correct %||% NA, big.mark = ","), ")"), "\n", sep = "")
  details <- c(
    if (!is.null(x$protocol)) x$protocol else if (!is.null(x$crops)) count_of(x$crops, "crop"),
    if (!is.null(x$image_size)) paste(x$image_size, "pixels"),
    if (!is.null(x$num_classes)) count_of(x$num_classes, "class", "classes"),
    # a cluster's rate is its workers' own: the images over the slowest worker's seconds
    if (is_scalar(x$images_per_second, is.numeric) && is.finite(x$images_per_second)) {
      slowest <- if (workers > 0L) format(round(max(x$workers$seconds), 1), nsmall = 1)
      paste0(format(round(x$images_per_second, 1), nsmall = 1), " images/s",
             if (!is.null(slowest)) paste0(" over the slowest worker's ", slowest, " s"))
    },
    if (workers > 0L) count_of(workers, "worker"),
    if (bad_count(x$bad_images) > 0L) paste(count_of(bad_count(x$bad_images), "bad image"), "left out"),
    if (isTRUE(x$left_out_at_upload > 0)) paste(count_of(x$left_out_at_upload, "validation image"), "left out at upload")
  )
  if (length(details)) cat(paste(details, collapse = "; "), "\n", sep = "")
  classes <- x$per_class
  # of the classes below 100% only: one all right is not among the lowest, however few the classes
  lowest <- if (is.data.frame(classes) && nrow(classes) > 1L) classes[which(classes$top1_accuracy < 1), ]
  if (is.data.frame(lowest) && nrow(lowest)) {
    lowest <- utils::head(lowest[order(lowest$top1_accuracy, lowest$index), ], 3L)
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

# How many bad images an evaluation left out: those it lists, or the number a model card records.
bad_count <- function(bad) if (is.numeric(bad)) sum(bad) else length(bad)

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
  placed <- name_placements(seq_len(nrow(named)), named$top1_accuracy, length(rank))
  for (i in seq_len(nrow(named))) {
    graphics::text(i, named$top1_accuracy[[i]], paste0("  ", first_name(named$name[[i]]), "  "), cex = 0.7,
                   srt = placed$srt[[i]], adj = c(placed$adj[[i]], 0.5), xpd = NA)
  }
  graphics::legend("bottomright", legend = c("top-1", paste0("top-", top_k), "overall"), lty = c(1, 1, 2),
                   col = c("black", "grey50", "black"), bty = "n")
  invisible(ranked)
}

# How plot() writes the names of classes at ranks `at` of `classes`, with top-1 accuracies `accuracy`: slanted 30
# degrees away from the point, towards the middle of the plot (rightwards on its left half, leftwards on its right
# half; upwards from an accuracy of 0.5 or below, downwards above it), so that a name stays inside the plot. `srt` is
# text()'s angle and `adj` its horizontal adjustment (0: the name starts at its point; 1: it ends there).
name_placements <- function(at, accuracy, classes) {
  right <- at > (classes + 1) / 2
  up <- accuracy <= 0.5
  data.frame(srt = ifelse(right == up, -30, 30), adj = ifelse(right, 1, 0))
}

#' @rdname alexnet_evaluate
#' @param row.names,optional Passed to [as.data.frame()].
#' @export
as.data.frame.alexnet_evaluation <- function(x, row.names = NULL, optional = FALSE, ...) {
  if (is.data.frame(x$workers)) return(x$workers)
  fields <- unclass(x)
  # a count not known is NULL: a column of NA all the same, so that evaluations bind by rows
  if (is.null(fields$left_out_at_upload)) fields["left_out_at_upload"] <- list(NA_integer_)
  scalar <- Filter(function(v) is.atomic(v) && length(v) == 1L, fields)
  as.data.frame(scalar, row.names = row.names, optional = optional, stringsAsFactors = FALSE)
}
