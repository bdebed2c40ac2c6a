new_alexnet_history <- function(history) {
  history$metrics <- lapply(history$metrics, function(m) as.numeric(unlist(m)))
  structure(history, class = "alexnet_history")
}

#' Print, plot and tabulate a training history
#'
#' @param x An `alexnet_history` returned by [alexnet_train()].
#' @param metrics Which metrics to plot (names without `val_`); by default every one recorded.
#' @param row.names,optional Ignored; part of the `as.data.frame()` generic.
#' @param ... Ignored.
#' @returns `print()` returns `x` invisibly; `plot()` returns `x` invisibly after drawing one panel
#'   per metric, training and validation over epochs; `as.data.frame()` returns a long data frame
#'   with columns `epoch`, `value`, `metric` and `data` (`"training"` or `"validation"`).
#' @name alexnet_history
#' @examples
#' history <- structure(list(
#'   params = list(epochs = 3, batch_size = 32),
#'   metrics = list(loss = c(2.3, 1.9, 1.5), accuracy = c(0.1, 0.3, 0.5),
#'                  val_loss = c(2.2, 2, 1.7), val_accuracy = c(0.15, 0.3, 0.45))
#' ), class = "alexnet_history")
#' history
#' plot(history)
#' as.data.frame(history)
NULL

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
  shown <- shown[shown %in% names(params)]
  if (length(shown)) {
    cat(paste0(shown, ": ", vapply(params[shown], format, character(1)), collapse = ", "), "\n")
  }
  if (epochs > 0L) {
    last <- vapply(x$metrics, function(m) if (length(m)) m[[length(m)]] else NA_real_, numeric(1))
    values <- vapply(last, function(v) format(signif(v, 4)), character(1))
    cat("Final epoch:", paste0(names(last), " = ", values, collapse = ", "), "\n")
  }
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
  metrics <- metrics %||% unique(df$metric)
  unknown <- setdiff(metrics, df$metric)
  if (length(unknown)) {
    alexnet_abort("No metric ", paste0("'", unknown, "'", collapse = ", "), " in this history; it has ",
                  paste0("'", unique(df$metric), "'", collapse = ", "), ".")
  }
  old <- graphics::par(mfrow = c(length(metrics), 1L), mar = c(3.5, 4.5, 1.5, 1), mgp = c(2.6, 0.7, 0),
                       las = 1)
  on.exit(graphics::par(old), add = TRUE)
  colours <- c(training = "#1b6ca8", validation = "#d1495b")
  for (metric in metrics) {
    part <- df[df$metric == metric, , drop = FALSE]
    graphics::plot(range(part$epoch), range(part$value, finite = TRUE), type = "n",
                   xlab = "epoch", ylab = metric, main = metric, cex.main = 0.95, xaxt = "n")
    graphics::axis(1, at = unique(part$epoch))
    for (set in names(colours)) {
      rows <- part[part$data == set, , drop = FALSE]
      if (nrow(rows)) graphics::lines(rows$epoch, rows$value, type = "o", pch = 19, col = colours[[set]])
    }
    sets <- intersect(names(colours), unique(part$data))
    # Keep the legend away from the curves: they fall (loss) or rise (accuracy) to the right.
    rising <- mean(utils::tail(part$value, 2L)) > mean(utils::head(part$value, 2L))
    graphics::legend(if (rising) "bottomright" else "topright", legend = sets, col = colours[sets], lty = 1, pch = 19, bty = "n",
                     cex = 0.8)
  }
  invisible(x)
}
