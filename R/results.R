# The results of imagenet_synthetic(), imagenet_upload(), imagenet_partition(), imagenet_validation() and
# alexnet_spark_train() as classed objects: the same lists (and data frame) as before, read with `$` and `[[`, that
# print a few lines.

new_alexnet_imagenet <- function(x) structure(x, class = "alexnet_imagenet")

new_alexnet_upload <- function(x) structure(x, class = "alexnet_upload")

new_alexnet_partition <- function(x) structure(x, class = "alexnet_partition")

# A Spark run's data frame of workers; `evaluation` (an alexnet_evaluation, or NULL) rides along as an attribute,
# read as `run$evaluation`.
new_alexnet_spark_run <- function(frame, evaluation = NULL) {
  class(frame) <- c("alexnet_spark_run", "data.frame")
  attr(frame, "evaluation") <- evaluation
  frame
}

#' Print and tabulate the results of the data functions and of a Spark run
#'
#' The results of [imagenet_synthetic()], [imagenet_upload()], [imagenet_partition()], [imagenet_validation()] and
#' [alexnet_spark_train()] are the lists (or, for a Spark run, the data frame) they always were, whose
#' fields are read with `$` and `[[`; they print as a few lines that say what was done, how much and where.
#' A Spark run that ended with its evaluation (`alexnet_spark_train(..., evaluate = TRUE)`) also has
#' `$evaluation`, an `alexnet_evaluation` (see [alexnet_evaluate()]), printed after the workers.
#'
#' @param x An `alexnet_imagenet`, `alexnet_upload`, `alexnet_partition`, `alexnet_validation` or
#'   `alexnet_spark_run`.
#' @param name A column of a Spark run, or `"evaluation"`.
#' @param row.names,optional Passed to [as.data.frame()].
#' @param ... Ignored.
#' @returns `print()` returns `x` invisibly. `as.data.frame()` of a partition has one row per image
#'   (`image`, `category`, `label`, `split`: `"train"` or `"validation"`); of a Spark run, one row per
#'   worker without the `history` column. `$` of a Spark run is its column `name`, or its evaluation (`NULL`
#'   when it has none).
#' @name alexnet_results
#' @examples
#' part <- structure(list(
#'   image = c("/cache/n01/a.JPEG", "/cache/n01/b.JPEG", "/cache/n02/c.JPEG"),
#'   category = c("n01", "n01", "n02"), categories = c("n01", "n02"), label = c(0L, 0L, 1L),
#'   num_classes = 4L, partition = 0L, total = 2L, board = "/boards/imagenet", cache_dir = "/cache"
#' ), class = "alexnet_partition")
#' part
#' as.data.frame(part)
NULL

#' @rdname alexnet_results
#' @export
print.alexnet_imagenet <- function(x, ...) {
  layout <- if (!is.null(x$layout) && x$layout != "kaggle") paste0(" (", x$layout, " layout)") else ""
  cat("Synthetic ImageNet at ", x$path, layout, ": ", count_of(x$classes, "category", "categories"), ", ",
      count_of(x$images, "training image"), " and ", count_of(x$val_images, "validation image"),
      if (!is.null(x$bytes)) paste0(", ", format_bytes(x$bytes)), "\n", sep = "")
  quirks <- names(Filter(length, as.list(x$quirks)))
  if (length(quirks)) cat("Odd files as real ImageNet has them: ", paste(quirks, collapse = ", "), "\n", sep = "")
  invisible(x)
}

#' @rdname alexnet_results
#' @export
print.alexnet_upload <- function(x, ...) {
  added <- length(setdiff(unlist(x$val_uploaded), unlist(x$uploaded)))  # validation images of categories there
  cat("ImageNet on board ", x$board, ": ", count_of(x$categories, "category", "categories"), " (",
      with_commas(length(x$uploaded)), " uploaded, ", with_commas(length(x$skipped)), " already there",
      if (added) paste0(", validation images of ", with_commas(added), " added"), "), ",
      count_of(x$images, "training image"), " and ", count_of(x$val_images, "validation image"), ", ",
      format_bytes(x$bytes), "\n", sep = "")
  if (!is.null(x$source)) {
    cat("Read ", x$source, if (!is.null(x$layout)) paste0(" (", x$layout, " layout)"), "\n", sep = "")
  }
  if (!is.null(x$seconds)) {
    cat("Wrote ", format_bytes(x$uploaded_bytes), " in ", format(round(x$seconds, 1), nsmall = 1), " s", sep = "")
    if (is.numeric(x$mb_per_s) && is.finite(x$mb_per_s)) cat(" (", format(signif(x$mb_per_s, 3)), " MB/s)", sep = "")
    cat("\n")
  }
  # what the command line lists, said here with the field that holds it
  bad <- NROW(x$bad_images)
  if (bad) cat(count_of(bad, "bad image"), " left out (see $bad_images)\n", sep = "")
  excluded <- NROW(x$excluded)
  if (excluded) cat(count_of(excluded, "category", "categories"), " left out under `min_images` (see $excluded)\n",
                    sep = "")
  if (isTRUE(x$pruned_versions > 0)) cat(count_of(x$pruned_versions, "older version"), " deleted\n", sep = "")
  invisible(x)
}

#' @rdname alexnet_results
#' @export
print.alexnet_partition <- function(x, ...) {
  which <- if (!is.null(x$partition) && !is.null(x$total)) {
    paste0("Partition ", x$partition, " of ", x$total, " (0-based)")
  } else {
    "Partition"
  }
  of <- if (!is.null(x$num_classes)) paste0(" of ", x$num_classes) else ""
  cat(which, ": ", count_of(length(x$categories), "category", "categories"), of, ", ",
      count_of(length(x$image), "training image"), " and ", count_of(length(x$val_image), "validation image"),
      "\n", sep = "")
  where <- c(if (!is.null(x$board)) paste("board", without_passwords(x$board)),
             if (!is.null(x$cache_dir)) paste("cache", x$cache_dir))
  if (length(where)) cat("From ", paste(where, collapse = ", "), "\n", sep = "")
  if (!is.null(x$downloaded_bytes)) {
    cat(if (x$downloaded_bytes > 0) {
      sprintf("Downloaded %s in %.1f s", format_bytes(x$downloaded_bytes), if (is.null(x$seconds)) 0 else x$seconds)
    } else {
      "Nothing downloaded: every category was in the cache"
    }, "\n", sep = "")
  }
  invisible(x)
}

#' @rdname alexnet_results
#' @export
as.data.frame.alexnet_partition <- function(x, row.names = NULL, optional = FALSE, ...) {
  part <- function(images, categories, labels, split) {
    n <- length(images)
    data.frame(image = as.character(unlist(images)),
               category = if (length(categories) == n) as.character(unlist(categories)) else rep(NA_character_, n),
               label = if (length(labels) == n) as.integer(unlist(labels)) else rep(NA_integer_, n),
               split = rep(split, n), stringsAsFactors = FALSE)
  }
  frame <- rbind(part(x$image, x$category, x$label, "train"),
                 part(x$val_image, x$val_category, x$val_label, "validation"))
  as.data.frame(frame, row.names = row.names, optional = optional)
}

#' @rdname alexnet_results
#' @export
print.alexnet_validation <- function(x, ...) {
  # the lines of the command line's `alexnet validation` (python/alexnet/cli/data.py `validation_summary`)
  which <- if (identical(as.integer(x$total), 1L)) "All the board's validation images" else
    paste0("Share ", x$partition, " of ", x$total, " (0-based) of the board's validation images")
  cat(which, ": ", count_of(length(x$val_image), "image"), " of ", count_of(length(x$categories), "category",
      "categories"), " (of ", x$num_classes, ")\n", sep = "")
  cat("From board ", without_passwords(x$board), ", cache ", x$cache_dir, "\n", sep = "")
  if (isTRUE(x$left_out_at_upload > 0)) {
    cat(count_of(x$left_out_at_upload, "validation image"), " left out at upload (the board's bad_images pin names ",
        "them)\n", sep = "")
  }
  invisible(x)
}

#' @rdname alexnet_results
#' @export
print.alexnet_spark_run <- function(x, ...) {
  # the same lines, in the same words, as the command line's summary of the run (python/alexnet/cli/cluster.py
  # `_train_summary`, from the core's rows whose histories hold what these flat rows hold; tests/testthat/
  # test-summaries.R compares them), but for the chief's `Communication: ...`, of which the command line leaves out
  # the advice the driver has just said as a warning (keeping what `adapt_communication` took)
  if (!"worker" %in% names(x) || !nrow(x)) return(print(as.data.frame(x), ...))
  attempt <- if ("attempt" %in% names(x)) paste0(" (attempt ", max(x$attempt), ")") else ""
  cat("AlexNet trained on ", count_of(nrow(x), "Spark worker"), attempt, "\n", sep = "")
  for (i in seq_len(nrow(x))) {
    row <- x[i, , drop = FALSE]
    field <- function(name) if (name %in% names(row)) row[[name]] else NA
    categories <- field("categories")
    categories <- if (is.na(categories)) NA else length(strsplit(categories, ",", fixed = TRUE)[[1L]])
    metrics <- c(loss = field("loss"), accuracy = field("accuracy"), val_accuracy = field("val_accuracy"))
    metrics <- metrics[!is.na(metrics)]
    parts <- c(
      if (!is.na(categories)) count_of(categories, "category", "categories"),
      if (!is.na(field("train_images"))) count_of(field("train_images"), "image"),
      if (!is.na(field("epochs"))) count_of(field("epochs"), "epoch"),
      if (length(metrics)) paste0(names(metrics), " ", format_metric(metrics), collapse = ", "),
      if (!is.na(field("images_per_second"))) paste(format(round(field("images_per_second"), 1), nsmall = 1),
                                                    "images/s")
    )
    # where its TensorFlow listened (the port the workers must reach each other at), else its Spark task's address
    where <- if (!is.na(field("tf_address"))) field("tf_address") else field("address")
    log <- field("log")  # where its log is, on its host
    cat("  worker ", field("worker"), if (isTRUE(field("chief"))) " (chief)" else "",
        if (!is.na(where)) paste0(" at ", where), ": ", paste(parts, collapse = ", "),
        if (!is.na(log) && nzchar(log)) paste0("; log ", log), "\n", sep = "")
  }
  chief <- if ("chief" %in% names(x)) which(x$chief %in% TRUE)[1L] else NA_integer_
  # a run called again on checkpoints whose epochs were all trained: nothing was left to train (the chief's history)
  resumed <- if (!is.na(chief) && "history" %in% names(x)) resume_note(x$history[[chief]])
  if (!is.null(resumed)) cat(resumed, "\n", sep = "")
  if ("weights_sha256" %in% names(x) && nrow(x) > 1L) {
    same <- length(unique(x$weights_sha256)) == 1L
    cat(if (same) same_weights_note else "The workers' weights differ", "\n", sep = "")
  }
  # the digest of the weights the chief saved, as a history's print says it
  if (!is.na(chief) && "weights_sha256" %in% names(x)) {
    weights <- weights_note(x$weights_sha256[[chief]])
    if (!is.null(weights)) cat(weights, "\n", sep = "")
  }
  if (!is.na(chief) && "history" %in% names(x)) {
    communication <- communication_note(x$history[[chief]])
    if (!is.null(communication)) cat(communication, "\n", sep = "")
  }
  # where the chief saved and published the model (its row's `model_path`, and `model_pin`, NAME@VERSION, on
  # `model_board`), as `alexnet train` says it
  if (!is.na(chief)) {
    field <- function(name) if (name %in% names(x)) x[[name]][[chief]] else NA_character_
    named <- if (is.na(field("model_pin"))) character() else strsplit(field("model_pin"), "@", fixed = TRUE)[[1L]]
    pin <- if (length(named) == 2L) list(name = named[[1L]], version = named[[2L]], board = field("model_board"))
    notes <- model_notes(field("model_path"), pin)
    if (length(notes)) cat(paste0(notes, "\n"), sep = "")
  }
  evaluation <- attr(x, "evaluation")
  if (!is.null(evaluation)) {
    cat("Evaluation of the model on every validation image of the board",
        if (!is.null(evaluation$model)) paste0(" (", evaluation$model, ")"), ":\n", sep = "")
    print(evaluation)
  }
  invisible(x)
}

#' @rdname alexnet_results
#' @export
`$.alexnet_spark_run` <- function(x, name) {
  if (identical(name, "evaluation") && !"evaluation" %in% names(x)) return(attr(x, "evaluation"))
  NextMethod()
}

#' @rdname alexnet_results
#' @export
as.data.frame.alexnet_spark_run <- function(x, row.names = NULL, optional = FALSE, ...) {
  frame <- x[setdiff(names(x), "history")]
  class(frame) <- "data.frame"
  frame
}

count_of <- function(n, singular, plural = paste0(singular, "s")) {
  n <- if (is.null(n) || !length(n)) 0L else n
  paste(format(n, big.mark = ","), if (identical(as.numeric(n), 1)) singular else plural)
}

with_commas <- function(n) format(n, big.mark = ",")

# a location as printed: the password of a URL (https://user:password@host/...) said as ***, as the core says it
without_passwords <- function(text) {
  gsub("([A-Za-z][A-Za-z0-9+.-]*://[^/[:space:]:@'\"]*):[^/[:space:]@'\"]*@", "\\1:***@", text)
}

format_bytes <- function(bytes) {
  if (is.null(bytes) || !length(bytes) || is.na(bytes)) return("size unknown")
  units <- c("bytes", "kB", "MB", "GB", "TB")
  power <- max(0L, min(length(units) - 1L, floor(log(max(bytes, 1), 1000))))
  if (power == 0L) return(paste(bytes, "bytes"))
  paste(format(round(bytes / 1000^power, 1), nsmall = 1), units[[power + 1L]])
}

format_metric <- function(values) formatC(values, digits = 3, format = "f")
