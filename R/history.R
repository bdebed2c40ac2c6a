new_alexnet_history <- function(history) {
  history$metrics <- lapply(history$metrics, function(m) as.numeric(unlist(m)))
  structure(history, class = "alexnet_history")
}

#' Print, plot and tabulate a training history
#'
#' Besides its metrics, a history records the schedule of its run: `metrics$image_size` and
#' `metrics$learning_rate` hold each epoch's image side and learning rate (the rate of the epoch's
#' last step), and `params$precision` and `params$precision_reason` what the layers computed in and
#' why. `print()` shows them as one line (`Schedule: image size 64 -> 96, learning rate 0.01 ->
#' 0.04, precision float32 (...)`) rather than as metrics; `summary()` and `plot()` leave them out
#' of their rows and default panels (`plot(history, metrics = "learning_rate")` draws the rate);
#' `as.data.frame()` keeps them, with `data` `"training"`.
#'
#' @param x An `alexnet_history` returned by [alexnet_train()].
#' @param metrics Which metrics to plot (names without `val_`); by default every one recorded,
#'   except `top5_accuracy` when the model has 5 classes or fewer (it is then always 1) and the
#'   schedule (`image_size`, `learning_rate`), which can be asked for by name.
#' @param object An `alexnet_history`, for `summary()`.
#' @param row.names,optional Ignored; part of the `as.data.frame()` generic.
#' @param ... `plot()`: graphical parameters for every panel's `plot()` (`main`, `xlab`, `cex.main`,
#'   `col.axis`, ...); ignored by the other methods.
#' @returns `print()` returns `x` invisibly; `plot()` returns `x` invisibly after drawing one panel
#'   per metric, training and validation over epochs, with the legend in a band above the curves
#'   (attribute `legends`: each panel's legend box, as [graphics::legend()] returns it);
#'   `as.data.frame()` returns a long data frame with columns `epoch`, `value`, `metric` and `data`
#'   (`"training"` or `"validation"`); `summary()` returns a data frame of class
#'   `summary.alexnet_history` with one row per metric: `metric`, `training` and `validation` (the
#'   last epoch's values, `NA` without validation), `best` (the best validation value, else the best
#'   training value: lowest loss, highest accuracy) and `best_epoch`.
#' @name alexnet_history
#' @examples
#' history <- structure(list(
#'   params = list(epochs = 3, batch_size = 32),
#'   metrics = list(loss = c(2.3, 1.9, 1.5), accuracy = c(0.1, 0.3, 0.5),
#'                  val_loss = c(2.2, 2, 1.7), val_accuracy = c(0.15, 0.3, 0.45),
#'                  image_size = c(128, 160, 224), learning_rate = c(0.01, 0.01, 0.001))
#' ), class = "alexnet_history")
#' history
#' plot(history, main = "A short run")
#' summary(history)
#' as.data.frame(history)
NULL

# The per-epoch settings a history records beside its metrics: the schedule of the run, shown as such by print(),
# and left out of summary()'s rows and plot()'s default panels.
schedule_metrics <- c("image_size", "learning_rate")

# Metrics worth showing: top-5 accuracy is always 1 with 5 classes or fewer, so it is left out then; the schedule
# (image size, learning rate) is not a metric.
shown_metrics <- function(history, names) {
  names <- setdiff(names, schedule_metrics)
  classes <- history$params$num_classes
  if (is.numeric(classes) && length(classes) == 1L && classes <= 5) names <- names[!grepl("top5", names)]
  names
}

# The schedule of a history on one line, or NULL when it records none: the image sizes in order ("image size
# 64 -> 96"), the learning rate from its first epoch to its last, through its peak when that is neither ("learning
# rate 0.0025 -> 0.01 -> 0.001"; every change when there are few), and the precision with why it was chosen.
schedule_line <- function(history) {
  metrics <- history$metrics
  params <- history$params
  course <- function(values, digits) {
    values <- signif(as.numeric(values[is.finite(values)]), digits)
    if (!length(values)) return(NULL)
    runs <- rle(values)$values
    if (length(runs) > 3L) {
      peak <- max(runs)
      runs <- unique(c(runs[[1L]], if (peak != runs[[1L]] && peak != runs[[length(runs)]]) peak, runs[[length(runs)]]))
    }
    shown <- vapply(runs, function(v) format(v, scientific = FALSE, drop0trailing = TRUE), character(1))
    paste(shown, collapse = " -> ")
  }
  sizes <- course(metrics$image_size %||% params$image_sizes, 6L)
  rates <- course(metrics$learning_rate, 3L)
  parts <- c(if (!is.null(sizes)) paste("image size", sizes), if (!is.null(rates)) paste("learning rate", rates))
  precision <- params$precision
  if (is.character(precision) && length(precision) == 1L) {
    reason <- params$precision_reason
    parts <- c(parts, paste0("precision ", precision,
                             if (is.character(reason) && length(reason) == 1L && nzchar(reason)) paste0(" (", reason, ")")))
  }
  if (!length(parts)) return(NULL)
  paste0("Schedule: ", paste(parts, collapse = ", "))
}

#' @rdname alexnet_history
#' @export
print.alexnet_history <- function(x, ...) {
  params <- x$params
  epochs <- max(lengths(x$metrics), 0L)
  cat("AlexNet training history:", epochs, if (epochs == 1L) "epoch" else "epochs")
  if (!is.null(params$strategy)) cat(",", params$strategy, "strategy")
  if (!is.null(params$replicas)) cat(",", params$replicas, if (identical(params$replicas, 1L)) "replica" else "replicas")
  cat("\n")
  shown <- c("batch_size", "global_batch_size", "steps", "image_size", "num_classes")
  if (length(x$metrics$image_size) || length(params$image_sizes) > 1L) shown <- setdiff(shown, "image_size")
  shown <- shown[shown %in% names(params)]
  if (length(shown)) {
    cat(paste0(shown, ": ", vapply(params[shown], format, character(1)), collapse = ", "), "\n")
  }
  schedule <- schedule_line(x)
  if (!is.null(schedule)) cat(schedule, "\n")
  resumed <- resume_note(x)
  if (!is.null(resumed)) cat(resumed, "\n")
  if (epochs > 0L) {
    metrics <- x$metrics[shown_metrics(x, names(x$metrics))]
    last <- vapply(metrics, function(m) if (length(m)) m[[length(m)]] else NA_real_, numeric(1))
    values <- vapply(last, function(v) format(signif(v, 4)), character(1))
    cat("Final epoch:", paste0(names(last), " = ", values, collapse = ", "), "\n")
  }
  invisible(x)
}

# What a history says about where its run started: NULL for a run from scratch; a sentence for a resumed run
# or one that found every epoch done.
resume_note <- function(history) {
  params <- history$params
  epoch <- params$initial_epoch %||% 0
  step <- params$initial_step %||% 0
  if (!length(epoch) || !length(step) || (epoch == 0 && step == 0)) return(NULL)
  where <- if (is.null(params$checkpoint_dir)) "its checkpoint" else params$checkpoint_dir
  if (step == 0 && !is.null(params$epochs) && epoch >= params$epochs) {
    return(paste0("All ", params$epochs, " epochs were already done in ", where,
                  ": nothing was trained; the history is the checkpoint's."))
  }
  paste0("Resumed from ", where, " at epoch ", epoch + 1, ", step ", step, ".")
}

#' @rdname alexnet_history
#' @export
summary.alexnet_history <- function(object, ...) {
  metrics <- object$metrics
  names <- shown_metrics(object, names(metrics)[!startsWith(names(metrics), "val_")])
  last <- function(m) if (length(m)) m[[length(m)]] else NA_real_
  rows <- lapply(names, function(name) {
    training <- metrics[[name]]
    validation <- metrics[[paste0("val_", name)]]
    series <- if (length(validation)) validation else training
    lower <- grepl("loss", name)
    best <- if (length(series)) (if (lower) which.min(series) else which.max(series)) else NA_integer_
    data.frame(metric = name, training = last(training), validation = last(validation),
               best = if (is.na(best)) NA_real_ else series[[best]], best_epoch = as.integer(best),
               stringsAsFactors = FALSE)
  })
  table <- do.call(rbind, c(list(data.frame(metric = character(), training = numeric(), validation = numeric(),
                                            best = numeric(), best_epoch = integer())), rows))
  structure(table, class = c("summary.alexnet_history", "data.frame"),
            epochs = max(lengths(metrics), 0L), note = resume_note(object))
}

#' @export
print.summary.alexnet_history <- function(x, ...) {
  epochs <- attr(x, "epochs")
  cat("AlexNet training over", epochs, if (identical(epochs, 1L)) "epoch" else "epochs", "\n")
  if (!is.null(attr(x, "note"))) cat(attr(x, "note"), "\n")
  table <- as.data.frame(unclass(x), stringsAsFactors = FALSE)
  for (column in c("training", "validation", "best")) table[[column]] <- signif(table[[column]], 4)
  print(table, row.names = FALSE)
  invisible(x)
}

#' @rdname alexnet_history
#' @export
as.data.frame.alexnet_history <- function(x, row.names = NULL, optional = FALSE, ...) {
  rows <- lapply(names(x$metrics), function(name) {
    values <- x$metrics[[name]]
    validation <- startsWith(name, "val_")
    data.frame(
      epoch = seq_along(values),
      value = as.numeric(values),
      metric = if (validation) sub("^val_", "", name) else name,
      data = if (validation) "validation" else "training",
      stringsAsFactors = FALSE
    )
  })
  do.call(rbind, c(list(data.frame(epoch = integer(), value = numeric(), metric = character(),
                                   data = character())), rows))
}

#' @rdname alexnet_history
#' @export
plot.alexnet_history <- function(x, metrics = NULL, ...) {
  df <- as.data.frame(x)
  if (!nrow(df)) alexnet_abort("This history has no metrics to plot.")
  metrics <- metrics %||% shown_metrics(x, unique(df$metric))
  unknown <- setdiff(metrics, df$metric)
  if (length(unknown)) {
    alexnet_abort("No metric ", paste0("\"", unknown, "\"", collapse = ", "), " in this history; it has ",
                  paste0("\"", unique(df$metric), "\"", collapse = ", "), ".")
  }
  old <- graphics::par(mfrow = c(length(metrics), 1L), mar = c(3.5, 4.5, 1.5, 1), mgp = c(2.6, 0.7, 0),
                       las = 1)
  on.exit(graphics::par(old), add = TRUE)
  colours <- c(training = "#1b6ca8", validation = "#d1495b")
  legends <- list()
  for (metric in metrics) {
    part <- df[df$metric == metric, , drop = FALSE]
    values <- range(part$value, finite = TRUE)
    # a band above the curves, a fifth of the panel, holds the legend: it never covers a point
    span <- if (diff(values) > 0) diff(values) else max(abs(values[[1]]) * 0.1, 0.1)
    if (diff(values) == 0) values <- values + c(-0.5, 0.5) * span
    limits <- c(values[[1]], values[[2]] + 0.25 * diff(values))
    settings <- utils::modifyList(list(xlab = "epoch", ylab = metric, main = metric, cex.main = 0.95),
                                  list(...))
    do.call(graphics::plot, c(list(range(part$epoch), limits, type = "n", xaxt = "n", ylim = limits), settings))
    graphics::axis(1, at = unique(part$epoch))
    for (set in names(colours)) {
      rows <- part[part$data == set, , drop = FALSE]
      if (nrow(rows)) graphics::lines(rows$epoch, rows$value, type = "o", pch = 19, col = colours[[set]])
    }
    sets <- intersect(names(colours), unique(part$data))
    legends[[metric]] <- graphics::legend("top", legend = sets, col = colours[sets], lty = 1, pch = 19, bty = "n",
                                          cex = 0.8, horiz = TRUE, inset = 0.01)
  }
  invisible(structure(x, legends = legends))
}
