new_alexnet_history <- function(history) {
  history$metrics <- lapply(history$metrics, function(m) as.numeric(unlist(m)))
  schedule <- history$schedule
  if (!is.null(schedule)) {
    schedule$image_size <- as.integer(unlist(schedule$image_size))
    schedule$learning_rate <- as.numeric(unlist(schedule$learning_rate))
    history$schedule <- schedule
  }
  structure(history, class = "alexnet_history")
}

#' Read back, print, plot and tabulate a training history
#'
#' [alexnet_train()] returns its history; `alexnet_history()` reads it back from the training's
#' `checkpoint_dir` later (also while it runs: its epochs done so far), from its history file
#' (`alexnet-history.json`), without training or loading anything. A history keeps what the model reached apart from what each epoch trained with. `metrics` holds
#' the results (`loss`, `accuracy`, `top5_accuracy` and their `val_` counterparts, one value per
#' epoch, and `val_images`, how many validation images each epoch's `val_` metrics count: every
#' worker's, each once); `schedule` holds the run's schedule: `image_size` (whole numbers) and `learning_rate`
#' (the rate of the epoch's last step) per epoch, and `summary`, the schedule on one line with the
#' precision and why it was chosen (`params$precision`, `params$precision_reason`). `print()` shows
#' the schedule on a line of its own (`Schedule: image size 64 -> 96, learning rate 0.01 -> 0.04,
#' precision float32 (...)`) and the final metrics on another, with the validation images they
#' cover, and for a run of several workers what its exchange costs against its computation and the settings that
#' would keep its workers busy (`Communication: ...`, `params$communication_advice`, see [alexnet_train()]),
#' where a resumed run went on from (`Resumed from ... at epoch 3, step 0.`), the digest of the weights it ended with
#' (`Weights: sha256 ...`, `weights_sha256`) and where the model went
#' (`Model: ...`, `model_path`; `Model pin: ...`, `model_pin`): the lines `alexnet train` prints;
#' `summary()` and `plot()` show the
#' metrics (`plot(history, metrics = "learning_rate")` draws the schedule's rate);
#' `as.data.frame()` has both, the schedule's rows with `data` `"schedule"`.
#'
#' @param checkpoint_dir For `alexnet_history()`: the `checkpoint_dir` a training wrote its checkpoints
#'   to: a local folder (or `file://` URL), `gs://bucket/prefix`, `s3://bucket/prefix` or an `https://` URL.
#' @param x An `alexnet_history` returned by [alexnet_train()] or `alexnet_history()`.
#' @param metrics Which metrics to plot (names without `val_`); by default every one recorded,
#'   except `top5_accuracy` when the model has 5 classes or fewer (it is then always 1) and the
#'   count of validation images (`"images"`, which can be asked for). The
#'   schedule's `image_size` and `learning_rate` can be asked for by name.
#' @param object An `alexnet_history`, for `summary()`.
#' @param row.names,optional Ignored; part of the `as.data.frame()` generic.
#' @param ... `plot()`: graphical parameters for every panel's `plot()` (`main`, `xlab`, `cex.main`,
#'   `col.axis`, ...); ignored by the other methods; `alexnet_history()`: nothing (a name given there is
#'   refused, naming the nearest argument).
#' @returns `alexnet_history()` returns an `alexnet_history`: `metrics` and `schedule` as [alexnet_train()]
#'   returns them, `params` as its `params` were at the newest checkpoint (every setting and what it resolved to,
#'   `initial_epoch` and `initial_step` where a resumed run went on from, what a run of several workers measured of
#'   its link and the advice: `allreduce_seconds`, ..., `advised_settings`, `communication_advice`,
#'   `adapted_settings`; `seconds`, those trained until then; `initial_model` as the run named it, and no password
#'   of a URL), with `data` (the board and partition it trained on) and `checkpoint_dir`, where it was read (a
#'   history file of an older version keeps fewer: those that change what is learnt, `epochs`, `steps`,
#'   `global_batch_size`, `num_classes`, ...), `epochs_done` and `position` (the epoch and step of its newest
#'   checkpoint), and once the run's model is saved `weights_sha256` and `weights_agree` as the run returned them
#'   (`NULL` before, and `weights_agree` with one worker). Its `print()` says the lines the run's own said but where
#'   its model went.
#'   `print()` returns `x` invisibly; `plot()` returns `x` invisibly after drawing one panel
#'   per metric, training and validation over epochs, with the legend in a band above the curves
#'   (attribute `legends`: each panel's legend box, as [graphics::legend()] returns it);
#'   `as.data.frame()` returns a long data frame with columns `epoch`, `value`, `metric` and `data`
#'   (`"training"`, `"validation"` or `"schedule"`; `val_images` is metric `"images"` of the
#'   validation data); `summary()` returns a data frame of class
#'   `summary.alexnet_history` with one row per metric that `plot()` shows by default: `metric`, `training` and
#'   `validation` (the
#'   last epoch's values, `NA` without validation), `best` (the best validation value, else the best
#'   training value: lowest loss, highest accuracy) and `best_epoch`.
#' @name alexnet_history
#' @examples
#' # a run's history read back from its checkpoint_dir: see the example of alexnet_train()
#' history <- structure(list(
#'   params = list(epochs = 3, batch_size = 32),
#'   metrics = list(loss = c(2.3, 1.9, 1.5), accuracy = c(0.1, 0.3, 0.5),
#'                  val_loss = c(2.2, 2, 1.7), val_accuracy = c(0.15, 0.3, 0.45)),
#'   schedule = list(image_size = c(128L, 160L, 224L), learning_rate = c(0.01, 0.01, 0.001),
#'                   summary = "image size 128 -> 160 -> 224, learning rate 0.01 -> 0.001")
#' ), class = "alexnet_history")
#' history
#' plot(history, main = "A short run")
#' summary(history)
#' as.data.frame(history)
NULL

# Metrics worth showing: top-5 accuracy is always 1 with 5 classes or fewer, so it is left out then; and
# `val_images` (the images validation counted: "images" in the long form) is a count, told apart from the metrics.
shown_metrics <- function(history, names) {
  classes <- history$params$num_classes
  if (is.numeric(classes) && length(classes) == 1L && classes <= 5) names <- names[!grepl("top5", names)]
  names[!names %in% c("val_images", "images")]
}

# " (validation over N images)" for a history whose metrics say how many images validation counted, else "".
validated_note <- function(history) {
  images <- history$metrics$val_images
  if (!length(images)) return("")
  paste0(" (validation over ", format(images[[length(images)]], big.mark = ","), " images)")
}

# The per-epoch series of a history's schedule (image sizes, learning rates), without its one-line summary.
schedule_series <- function(history) {
  schedule <- history$schedule
  schedule[vapply(schedule, function(values) is.numeric(values) && length(values) > 0L, logical(1))]
}

#' @rdname alexnet_history
#' @export
print.alexnet_history <- function(x, ...) {
  # the same lines, in the same words, as the command line's summary of the history (python/alexnet/cli/train.py
  # `history_summary`; tests/testthat/test-summaries.R compares them)
  params <- x$params
  epochs <- max(lengths(x$metrics), 0L)
  cat("AlexNet training history: ", count_of(epochs, "epoch"), sep = "")
  if (!is.null(params$strategy)) cat(",", params$strategy, "strategy")
  if (!is.null(params$replicas)) cat(", ", count_of(params$replicas, "replica"), sep = "")
  cat("\n")
  shown <- c("batch_size", "global_batch_size", "steps", "image_size", "num_classes")
  shown <- shown[shown %in% names(params) & lengths(params[shown]) == 1L]
  if (length(shown)) {
    cat(paste0(shown, ": ", vapply(params[shown], format, character(1)), collapse = ", "), "\n", sep = "")
  }
  resumed <- resume_note(x)
  if (!is.null(resumed)) cat(resumed, "\n", sep = "")
  started <- params$started_from$text  # a run that started from a trained model (initial_model)
  if (is_scalar(started, is.character)) cat(started, "\n", sep = "")
  summary <- x$schedule$summary
  if (is.character(summary) && length(summary) == 1L && nzchar(summary)) cat("Schedule: ", summary, "\n", sep = "")
  communication <- communication_note(x)
  if (!is.null(communication)) cat(communication, "\n", sep = "")
  if (epochs > 0L) {
    metrics <- x$metrics[shown_metrics(x, names(x$metrics))]
    last <- vapply(metrics, function(m) if (length(m)) m[[length(m)]] else NA_real_, numeric(1))
    values <- vapply(last, function(v) format(signif(v, 4)), character(1))
    cat("Final epoch: ", paste0(names(last), " = ", values, collapse = ", "), validated_note(x), "\n", sep = "")
  }
  best <- x$best_epoch
  if (is.numeric(best) && length(best) == 1L) {
    cat("Kept the best epoch: ", best, " (val_accuracy = ", format(signif(x$metrics$val_accuracy[[best]], 4)),
        ")\n", sep = "")
  }
  if (identical(x$weights_agree, FALSE)) {
    cat("The workers ended with different weights: the chief's model is the one saved and published",
        "(its log names the workers apart).\n")
  } else if (isTRUE(x$weights_agree)) {  # a run of several workers (one worker's history has NULL)
    cat(same_weights_note, "\n", sep = "")
  }
  weights <- weights_note(x$weights_sha256)
  if (!is.null(weights)) cat(weights, "\n", sep = "")
  notes <- model_notes(x$model_path, x$model_pin)
  if (length(notes)) cat(paste0(notes, "\n"), sep = "")
  invisible(x)
}

# What a print says of a multi-worker run whose workers ended with the same weights: a history's (`weights_agree`)
# and a Spark run's (one `weights_sha256`), as the command line's SAME_WEIGHTS (python/alexnet/cli/train.py).
same_weights_note <- "Every worker holds the same weights"

# The digest of the weights a run ended with, "Weights: sha256 DIGEST" (`weights_sha256`), or NULL when its history
# has none (a run under way read back, or one whose model was not saved); the command line's `weights_lines`
# (python/alexnet/cli/train.py).
weights_note <- function(digest) {
  if (is_scalar(digest, is.character) && nzchar(digest)) paste0("Weights: sha256 ", digest) else NULL
}

# Where a run's model went: "Model: PATH" and "Model pin: NAME version V on BOARD", each when there is one
# (`pin` a list of `name`, `version` and `board`; the command line's `model_lines`, python/alexnet/cli/train.py).
model_notes <- function(path, pin) {
  c(if (is_scalar(path, is.character) && nzchar(path)) paste0("Model: ", path),
    if (is.list(pin) && is_scalar(pin$name, is.character) && nzchar(pin$name)) {
      paste0("Model pin: ", pin$name, " version ", pin$version, " on ", pin$board)
    })
}

# What a multi-worker run's history says about its exchange against its computation, both timed before training,
# and the settings that would keep its workers busy: "Communication: ...", or NULL (one worker). In R's words, and
# every setting named one way, as R code: what `adapt_communication` took (the core's "`allreduce_precision` =
# 'bfloat16'") as the settings advised (allreduce_precision = "bfloat16").
communication_note <- function(history) {
  advice <- history$params$communication_advice
  if (!is_scalar(advice, is.character) || !nzchar(advice)) return(NULL)
  paste0("Communication: ", gsub("`(\\w+)` = ", "\\1 = ", r_words(advice), perl = TRUE))
}

# What a history says about where its run started: NULL for a run from scratch; a sentence for a resumed run
# or one that found every epoch done (the command line's `resume_text`, python/alexnet/cli/train.py).
resume_note <- function(history) {
  params <- history$params
  epoch <- params$initial_epoch %||% 0
  step <- params$initial_step %||% 0
  if (!length(epoch) || !length(step) || (epoch == 0 && step == 0)) return(NULL)
  where <- if (is.null(params$checkpoint_dir)) "its checkpoint" else params$checkpoint_dir
  if (step == 0 && !is.null(params$epochs) && epoch >= params$epochs) {
    return(paste0("All ", count_of(epoch, "epoch"), " were trained before, in ", where,
                  ": nothing was left to train (a larger `epochs` trains further)."))
  }
  paste0("Resumed from ", where, " at epoch ", epoch + 1, ", step ", step, ".")
}

#' @rdname alexnet_history
#' @export
alexnet_history <- function(checkpoint_dir, ...) {
  if (missing(checkpoint_dir)) {
    alexnet_abort("`checkpoint_dir` is missing: give the `checkpoint_dir` a training wrote its checkpoints to ",
                  "(a folder, gs:// or s3://).")
  }
  args <- checked_args("alexnet_history", names(formals()), others = FALSE)
  new_alexnet_history(do.call(core_function("alexnet_history"), args))
}

#' @rdname alexnet_history
#' @export
summary.alexnet_history <- function(object, ...) {
  metrics <- object$metrics
  named <- if (is.null(names(metrics))) character() else names(metrics)  # no epoch recorded: list()
  names <- shown_metrics(object, named[!startsWith(named, "val_")])
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
  cat("AlexNet training over ", count_of(epochs, "epoch"), "\n", sep = "")
  if (!is.null(attr(x, "note"))) cat(attr(x, "note"), "\n", sep = "")
  table <- as.data.frame(unclass(x), stringsAsFactors = FALSE)
  for (column in c("training", "validation", "best")) table[[column]] <- signif(table[[column]], 4)
  print(table, row.names = FALSE)
  invisible(x)
}

#' @rdname alexnet_history
#' @export
as.data.frame.alexnet_history <- function(x, row.names = NULL, optional = FALSE, ...) {
  series <- c(x$metrics, schedule_series(x))
  rows <- lapply(seq_along(series), function(i) {
    name <- names(series)[[i]]
    values <- series[[i]]
    validation <- startsWith(name, "val_")
    data.frame(
      epoch = seq_along(values),
      value = as.numeric(values),
      metric = if (validation) sub("^val_", "", name) else name,
      data = if (i > length(x$metrics)) "schedule" else if (validation) "validation" else "training",
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
  if (!is.null(metrics) && (!is.character(metrics) || !length(metrics) || anyNA(metrics))) {
    alexnet_abort("`metrics` must name one or more metrics of this history (", 
                  paste0("\"", unique(df$metric), "\"", collapse = ", "), "), or be NULL for every one shown.")
  }
  metrics <- metrics %||% shown_metrics(x, unique(df$metric[df$data != "schedule"]))
  unknown <- setdiff(metrics, df$metric)
  if (length(unknown)) {
    alexnet_abort("No metric ", paste0("\"", unknown, "\"", collapse = ", "), " in this history; it has ",
                  paste0("\"", unique(df$metric), "\"", collapse = ", "), ".")
  }
  # the bottom margin holds the tick labels and the x-axis title whole (a title one line high, below its line)
  old <- graphics::par(mfrow = c(length(metrics), 1L), mar = c(4.4, 4.5, 1.8, 1), mgp = c(2.6, 0.7, 0),
                       las = 1)
  on.exit(graphics::par(old), add = TRUE)
  colours <- c(training = "#1b6ca8", validation = "#d1495b", schedule = "#4f772d")
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
    # the y-axis title stands left of the widest tick label (a rate of 0.00015 is wider than an accuracy)
    widest <- max(graphics::strwidth(format(pretty(limits)), units = "inches")) / graphics::par("csi")
    graphics::par(mar = c(4.4, max(4.5, widest + 2.2), 1.8, 1))
    ylab <- settings$ylab
    settings$ylab <- ""
    do.call(graphics::plot, c(list(range(part$epoch), limits, type = "n", xaxt = "n", ylim = limits), settings))
    if (!isFALSE(settings$ann)) {  # the title drawn apart takes the panel's own label settings
      label <- settings[intersect(names(settings), c("cex.lab", "col.lab", "font.lab", "family"))]
      do.call(graphics::title, c(list(ylab = ylab, line = max(2.6, widest + 1.1)), label))
    }
    graphics::axis(1, at = epoch_ticks(unique(part$epoch)))
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

# Where the epoch axis has its ticks: at each epoch while there are 20 or fewer; beyond, at whole epochs R spaces
# out (one tick per epoch made the axis of a 300-epoch run a black bar).
epoch_ticks <- function(epochs) {
  if (length(epochs) <= 20) return(epochs)
  spaced <- pretty(epochs, n = 10)
  spaced[spaced == round(spaced) & spaced >= min(epochs) & spaced <= max(epochs)]
}
