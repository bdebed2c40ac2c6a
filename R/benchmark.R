#' Benchmark the input pipeline, the model and training
#'
#' Measures, side by side and on the same images, how many images per second each stage between the
#' JPEG files and the model delivers, and names the bottleneck:
#'
#' - `decode`: a plain full-size `decode_jpeg` of the images' bytes, the reference per core;
#' - `naive`: the input pipeline of the original r-tensorflow/alexnet `alexnet_train()` (sequential
#'   read and decode, float conversion, resize, colour jitter, no prefetch), with the sequential maps
#'   kept sequential;
#' - `naive_auto`: the same pipeline as recent TensorFlow runs it by default, which parallelises stateless
#'   maps on its own (tf.data's `map_parallelization`); no target refers to it;
#' - `io`: this package's training pipeline alone, into a consumer that does nothing;
#' - `synthetic`: AlexNet training steps on a random batch kept on the device (the compute bound);
#' - `train`: [alexnet_train()] itself;
#' - `fetch` (only when asked, with `board`): a partition downloaded one category at a time, then in
#'   parallel;
#' - `time_to_accuracy` (only when asked: it trains for minutes): the paper's recipe (float32, one image
#'   size, the rate 0.01 divided by 10 on a plateau, hard labels) and the package's defaults (the precision
#'   measured to be faster, progressive image sizes, the rate scaled with the batch and brought down to zero,
#'   labels smoothed by 0.1) trained on the same images from each of `repeats` seeds, the recipes
#'   alternating, for `max_epochs` epochs each: the median and range over the seeds of the wall time each
#'   takes to reach `target_accuracy` top-1 validation accuracy, of the final and best accuracy and of the
#'   largest fall from one epoch to the next in the second half, each final model scored at its training size
#'   and 32 pixels above, and the verdict on the medians;
#' - `scaling` (only when asked: it trains for minutes): the same training on one worker and on
#'   `scaling_workers` workers, each a process on CPUs of its own, joined by each of `links` (loopback, or a link
#'   shaped to a rate such as `"1gbit"`, each worker in a network namespace of its own: root only), once per lever
#'   set of `levers` (today's training, 16-bit gradients on the wire, packs, gradient accumulation, local SGD, or
#'   training settings written `"setting=value+setting=value"`): images per second, the scaling efficiency, the
#'   step split into compute and the communication left exposed, the all-reduce alone, the share of it hidden and
#'   the bytes all-reduced per step; then the efficiency projected to 256 workers for `step_seconds` of compute a
#'   step (a GPU's), beside MXNet's published AlexNet scaling.
#'
#' `decode`, `naive`, `naive_auto` and `io` run on 1 core, 2 cores and `cores` cores, each core count in a child
#' process pinned to that many CPUs (`isolation = "process"`, Linux) or, with
#' `isolation = "threads"`, in the R session's Python with tf.data's threads limited instead. Every
#' measurement records the load average when it started, its CPU time and the share of its CPUs it got:
#' other work on the machine lowers the numbers.
#'
#' Every setting is declared once in the core (`alexnet.bench.plan`), in groups: those every stage shares, then
#' each stage's own (`fetch`'s, `time_to_accuracy`'s, then `scaling`'s); the arguments below, their defaults and
#' their checks come from it, as do the options of `alexnet bench` on the command line.
#'
#' @param data The images: the result of [imagenet_partition()], the folder of an ImageNet tree, or
#'   `NULL` for a synthetic ImageNet of `images` images written to a temporary folder (for `time_to_accuracy`,
#'   `data` needs validation images; `NULL` makes its own synthetic ImageNet, of `accuracy_classes` categories).
#' @eval declared_params(benchmark_settings)
#' @returns An `alexnet_benchmark` list. Its print shows what was measured, in the order of `stages`,
#'   and only the targets whose stages ran.
#'
#'   - `stages`: a data frame, one row per measurement (`NA` where a measurement has no such value):
#'     `stage`; `cores` (CPUs the measurement ran on); `workers` (parallel downloads, `fetch` only);
#'     `images_per_second`; `bytes_per_second` (`fetch` only); `images` and `seconds` measured;
#'     `cpu_seconds` (CPU time of the measuring process); `images_per_cpu_second`; `cpu_use` (the
#'     share of its `cores` CPUs the process got, at most 1: below 0.9 other work slowed it down);
#'     `load_average` (1-minute load when it started); `rss_before_mb` and `peak_rss_mb` (resident
#'     memory before and at its peak); `precision` (what `synthetic` and `train` computed in).
#'   - `summary`: `ratios` against the targets (each with `what`, `value`, `target`, `met`; `value`
#'     `NULL` when its stages did not run), `comparisons` without a target (`what`, `value`),
#'     `bottleneck` and `bottleneck_detail` (the pipeline on every core against the model on every GPU of
#'     the machine: `model_images_per_second`, the `synthetic` rate times `model_devices`, the GPUs, 1 without
#'     one), `cores_to_feed_synthetic` (to feed that rate), `train_vs_bound` (when `train`
#'     ran), `contended` (the measurements slowed down by other work, `character(0)` when none),
#'     `io_peak_rss_mb` and `io_rss_growth_mb` (when `io` ran), `time_to_accuracy` (when it ran: its
#'     `time_ratio`, `accuracy_difference` and `final_vs_best`, each with `what`, `value`, `target`, `bound`
#'     and `met`; the time ratio's `value` is `NULL` when a recipe's median never reached the target, and `met`
#'     then says whether the defaults did).
#'   - `time_to_accuracy`: `NULL`, or when it ran (its print shows each recipe's medians and ranges):
#'     `settings`, `data` (`source`, `num_classes`, `train_images`, `val_images`, `skipped`,
#'     `chance_accuracy`), `recipes` (`paper` and `defaults`, each with `recipe`, `precision`,
#'     `precision_reason`, `image_sizes`, `image_size_epochs`, `lr_scaling`, `lr_schedule`, `label_smoothing`,
#'     `learning_rate`, `seeds`; `seconds_to_target`, `final_accuracy`, `best_accuracy`, `late_drop`,
#'     `best_minus_final`, `final_eval_accuracy` and `final_eval_accuracy_plus32`, each a list of `median`,
#'     `min`, `max` and `count` (seeds with a value; a target never reached counts as the slowest); and
#'     `runs`, one list per seed with per epoch `epoch_image_size`, `epoch_learning_rate`, `val_accuracy`
#'     and `seconds` (cumulative wall time), and `adapted`: with `adapt_communication`, the settings that seed's
#'     run took, as a lever set (the print shows them after the recipe)), `time_ratio` (defaults / paper, median time to the target),
#'     `accuracy_difference` (defaults - paper, median final accuracy), `final_vs_best` (the defaults' median
#'     final - best accuracy), `targets`, `levers` (each recipe that adds a lever set of `accuracy_levers` to
#'     the defaults, against the defaults: `epochs_to_target`, `seconds_to_target` and `final_accuracy` of both
#'     (medians), and `same_epochs_or_fewer`), `seconds`. Lever sets that train alike (`bfloat16` and
#'     `allreduce_precision=bfloat16`; `today`, which is the defaults) are trained once, as the first named: the
#'     recipes and levers of the others are copies of its own with `same_as` naming it. With `accuracy_workers`
#'     above 1 every recipe trains over that many worker processes joined by `accuracy_link` (loopback, or a link
#'     of set bandwidth as root),
#'     each with its share of the categories; the recipes and their runs then say which (`link`).
#'   - `scaling`: `NULL`, or when it ran (its print shows the table): `rows`, one per lever set and link
#'     (`levers`, `link`, `rate`, `workers`, `images_per_step`, `micro_batches`, `precision`,
#'     `images_per_second_1` (one worker), `images_per_second`, `efficiency`, `step_seconds`, `compute_seconds`,
#'     `exposed_seconds`, `extra_cpu_seconds` (the CPU seconds a worker's step took beyond a lone worker's: the
#'     collective's own work, what of `exposed_seconds` is not waiting for the link), `allreduce_seconds`,
#'     `hidden_fraction`, `bytes_per_step`, `estimated_efficiency` (what the chief's run estimated before
#'     training from one exchange and one step's computation, each timed alone: see [alexnet_train()]'s
#'     `communication_efficiency`), `adapted` (what that run took of its advice with `adapt_communication`, written
#'     as `levers` takes it; `""` for nothing), `advised` (the lever set that run advised beyond that, the row's own
#'     settings with those it took and adds; `""` for none), `load_before`, `load_after`, `cpu_use_1` (the share
#'     of its CPUs the lone worker's step got) and `contended` (`TRUE` when other work slowed it: its rates are
#'     off), and `same_as` on the rows of a lever set that trains as another, measured once under that one's
#'     name), `runs` (one per run:
#'     `levers`, `link` (`NULL` for the lone worker), `workers` (every worker's step times and CPU seconds),
#'     `load_before`, `load_after`), `projection` (per lever set, shaped link and step time: `workers` and
#'     `efficiency`), `model` (the projection's formula), `mxnet`, `skipped` (why shaped links were left out,
#'     or `NULL`) and `summary` (per link today's and the best efficiency, and the `targets`).
#'   - `machine`: `cpu`, `cores`, `gpus`, `platform`, `python`, `tensorflow`, `cpu_allocator` (TensorFlow's
#'     allocator of the machine's memory: `"bfc"`, which the package asks for and which is TensorFlow's default
#'     where oneDNN is on, or `"default"`), `malloc` (glibc's malloc settings the core made, `ALEXNET_MALLOC`'s
#'     value by default; `"default"` for none).
#'   - `settings`: the settings as used, those every stage shares (`stages`, `images`, `batch_size`,
#'     `image_size`, `cores`, `seconds`, `parallel`, `cache`, `resize`, `quality` (`NULL` without `resize`),
#'     `model_steps`, `dense_units`, `isolation`, `output_dir`, `seed`, `precision`) and `core_counts`, then each
#'     stage's own under its name (`fetch`, `time_to_accuracy`, `scaling`: `NULL` when the stage did not run).
#'   - `data`: `source`, `images`, `skipped`, `num_classes`, `compressed_bytes`,
#'     `mean_image_bytes`, `original_bytes`, `io_reads`, `decode_and_naive_read`.
#'   - `json`, `png`: the files written.
#' @examples
#' if (alexnet_available()) {
#'   result <- alexnet_benchmark(images = 16, batch_size = 4, image_size = 64, seconds = 0,
#'                               stages = c("decode", "io"), cores = 1,
#'                               output_dir = tempfile("alexnet-benchmark"))
#'   print(result)
#'   result$stages
#' }
#' \dontrun{
#' # the paper's recipe against the defaults, in wall time to 75% validation accuracy (minutes)
#' alexnet_benchmark(stages = "time_to_accuracy")
#' # two workers against one over loopback and a 1 Gbit/s link (as root), today's training and each lever
#' alexnet_benchmark(stages = "scaling", links = c("loopback", "1gbit"))
#' }
#' @export
alexnet_benchmark <- function(data = NULL) {
  args <- checked_args("alexnet_benchmark", names(formals()))
  if (is.list(args$data)) args$data <- train_data(args$data)  # a partition, as alexnet_train() hands it over
  if (!is.null(args$stages)) args$stages <- as.list(args$stages)
  result <- do.call(core_function("alexnet_benchmark"), args)
  new_alexnet_benchmark(result)
}
# every setting of the declaration is an argument, with its default
alexnet_benchmark <- with_declared(alexnet_benchmark, declared_formals(benchmark_settings))

new_alexnet_benchmark <- function(result) {
  stages <- result$stages
  result <- simplify_py(result)
  result$stages <- benchmark_stages_df(stages)
  structure(result, class = "alexnet_benchmark")
}

# The measurements as a data frame. Records differ (a fetch has `workers` and `bytes_per_second`,
# pipeline stages have memory fields), so every column is filled with NA where a record lacks it.
benchmark_stages_df <- function(records) {
  column <- function(name, type) {
    vapply(records, function(r) {
      value <- r[[name]]
      if (is.null(value) || length(value) != 1L) methods_na(type) else coerce_to(value, type)
    }, methods_na(type))
  }
  data.frame(
    stage = column("stage", "character"),
    cores = column("cores", "integer"),
    workers = column("workers", "integer"),
    images_per_second = column("images_per_second", "numeric"),
    bytes_per_second = column("bytes_per_second", "numeric"),
    images = column("images", "integer"),
    seconds = column("seconds", "numeric"),
    cpu_seconds = column("cpu_seconds", "numeric"),
    images_per_cpu_second = column("images_per_cpu_second", "numeric"),
    cpu_use = column("cpu_use", "numeric"),
    load_average = column("load_average", "numeric"),
    rss_before_mb = column("rss_before_mb", "numeric"),
    peak_rss_mb = column("peak_rss_mb", "numeric"),
    precision = column("precision", "character"),
    stringsAsFactors = FALSE
  )
}

methods_na <- function(type) {
  switch(type, character = NA_character_, integer = NA_integer_, numeric = NA_real_)
}

coerce_to <- function(value, type) {
  switch(type, character = as.character(value), integer = as.integer(value), numeric = as.numeric(value))
}

#' @rdname alexnet_benchmark
#' @param x An `alexnet_benchmark`.
#' @param ... Not used.
#' @export
print.alexnet_benchmark <- function(x, ...) {
  machine <- x$machine
  cat("AlexNet benchmark: ", x$data$images, " images on ", machine$cpu, " (", machine$cores, " cores)\n", sep = "")
  stages <- x$stages
  # in the order of `stages =`, then by cores
  asked <- unique(c(unlist(x$settings$stages), stages$stage))
  stages <- stages[order(match(stages$stage, asked), stages$cores), , drop = FALSE]
  shown <- stages[!is.na(stages$images_per_second),
                  c("stage", "cores", "images_per_second", "cpu_use", "peak_rss_mb", "load_average")]
  if (nrow(shown)) {
    shown$images_per_second <- round(shown$images_per_second)
    shown$cpu_use <- ifelse(is.na(shown$cpu_use), "", paste0(round(100 * shown$cpu_use), "%"))
    shown$peak_rss_mb <- round(shown$peak_rss_mb)
    print(shown, row.names = FALSE)
  }
  fetches <- stages[stages$stage == "fetch", , drop = FALSE]
  for (i in seq_len(nrow(fetches))) {
    cat(sprintf("fetch with %d worker(s): %.1f MB/s\n", fetches$workers[[i]], fetches$bytes_per_second[[i]] / 1e6))
  }
  # only the targets whose stages were measured
  for (ratio in x$summary$ratios) {
    if (is.null(ratio$value)) next
    met <- if (is.null(ratio$met)) "" else if (isTRUE(ratio$met)) " (met)" else " (not met)"
    cat(sprintf("%s: %sx, target %sx%s\n", ratio$what, held(ratio$value, "at least", 2), format(ratio$target), met))
  }
  for (comparison in x$summary$comparisons) {
    if (!is.null(comparison$value)) cat(sprintf("%s: %.2fx (no target)\n", comparison$what, comparison$value))
  }
  contended <- unlist(x$summary$contended)
  if (length(contended)) {
    cat("Slowed down by other work on the machine: ", paste(contended, collapse = ", "), "\n", sep = "")
  }
  if (!is.null(x$summary$bottleneck)) {
    cat("Bottleneck: ", x$summary$bottleneck, " - ", x$summary$bottleneck_detail, "\n", sep = "")
  }
  if (!is.null(x$time_to_accuracy)) print_time_to_accuracy(x$time_to_accuracy, x$summary$time_to_accuracy)
  if (!is.null(x$scaling)) print_scaling(x$scaling)
  cat("Files: ", x$json, ", ", x$png, "\n", sep = "")
  invisible(x)
}

# The time_to_accuracy stage: a row per recipe (medians over the seeds, ranges in brackets), then its targets.
print_time_to_accuracy <- function(stage, targets) {
  settings <- stage$settings
  seeds <- if (is.null(settings$repeats)) 1L else as.integer(settings$repeats)
  workers <- if (is.null(settings$accuracy_workers)) 1L else as.integer(settings$accuracy_workers)
  joined <- if (workers > 1) sprintf("; %d workers over %s", workers, settings$accuracy_link) else ""
  cat(sprintf("Time to %s validation accuracy (%s; %d training, %d validation images; %d epochs each, %d seed(s)%s):\n",
              format(settings$target_accuracy), stage$data$source, as.integer(stage$data$train_images),
              as.integer(stage$data$val_images), as.integer(settings$max_epochs), seeds, joined))
  spread <- function(value, show) {
    if (is.null(value)) return("n/a")
    shown <- function(v) if (is.null(v)) "never" else show(v)
    if (identical(value$min, value$max)) return(shown(value$median))
    sprintf("%s (%s-%s)", shown(value$median), shown(value$min), shown(value$max))
  }
  seconds <- function(v) sprintf("%.0f s", v)
  accuracy <- function(v) sprintf("%.3f", v)
  rows <- lapply(stage$recipes, function(r) {
    took <- sort(unique(unlist(lapply(r$runs, function(run) if (length(run$adapted) && nzchar(run$adapted))
      run$adapted))))
    recipe <- if (length(took)) sprintf("%s (took %s)", r$recipe, paste(took, collapse = ", ")) else r$recipe
    if (!is.null(r$same_as)) recipe <- sprintf("%s (trained as %s)", recipe, r$same_as)
    data.frame(recipe = recipe, precision = r$precision, sizes = paste(unlist(r$image_sizes), collapse = "/"),
               rate = paste(format(r$learning_rate), r$lr_schedule), to_target = spread(r$seconds_to_target, seconds),
               final = spread(r$final_accuracy, accuracy), best = spread(r$best_accuracy, accuracy),
               late_fall = spread(r$late_drop, accuracy), at_plus32 = spread(r$final_eval_accuracy_plus32, accuracy),
               stringsAsFactors = FALSE)
  })
  print(do.call(rbind, unname(rows)), row.names = FALSE)
  cat("Medians over the seeds, ranges in brackets; late_fall: the largest fall from one epoch to the next in the",
      "second half; at_plus32: the final model scored 32 pixels above its training size.\n")
  for (target in targets) {
    met <- if (is.null(target$met)) "" else if (isTRUE(target$met)) " (met)" else " (not met)"
    value <- if (is.null(target$value)) "n/a" else held(target$value, target$bound, 3, fixed = FALSE)
    cat(sprintf("%s: %s, target %s %s%s\n", target$what, value, target$bound, format(target$target), met))
  }
  shown <- function(v, unit = "") if (is.null(v)) "never" else paste0(format(round(as.numeric(v), 3)), unit)
  for (name in names(stage$levers)) {
    lever <- stage$levers[[name]]
    same <- if (is.null(lever$same_epochs_or_fewer)) "" else if (isTRUE(lever$same_epochs_or_fewer))
      ", the same epochs or fewer" else ", more epochs"
    cat(sprintf(paste("%s against defaults: %s epochs (defaults %s) and %s (defaults %s) to the target,",
                      "final %s (defaults %s)%s\n"),
                if (is.null(lever$same_as)) name else sprintf("%s (trained as %s)", name, lever$same_as),
                shown(lever$epochs_to_target), shown(lever$defaults_epochs_to_target),
                shown(lever$seconds_to_target, " s"), shown(lever$defaults_seconds_to_target, " s"),
                shown(lever$final_accuracy), shown(lever$defaults_final_accuracy), same))
  }
  invisible(stage)
}

# The scaling stage: a row per lever set and link (the efficiency, and the step split into compute and the
# communication left exposed), then its targets and the projection's model.
print_scaling <- function(stage) {
  rows <- stage$rows
  if (is.data.frame(rows)) rows <- split(rows, seq_len(nrow(rows)))
  if (!length(rows)) return(invisible(stage))
  # a share held against a target (efficiency, estimated) rounded down, as held() says it
  number <- function(v, digits, down = FALSE) {
    if (is.null(v) || (length(v) == 1 && is.na(v))) return(NA_real_)
    if (!down) round(as.numeric(v), digits) else floor(as.numeric(v) * 10^digits + 1e-9) / 10^digits
  }
  table <- do.call(rbind, lapply(unname(rows), function(r) {
    # a lever set that trains as another was measured as that one; a lone worker slowed down by other work, marked
    levers <- if (is_scalar(r$same_as, is.character)) sprintf("%s (measured as %s)", r$levers, r$same_as) else r$levers
    share <- number(r$cpu_use_1, 2)
    data.frame(levers = levers, link = r$link, images_s_1 = number(r$images_per_second_1, 1),
               images_s = number(r$images_per_second, 1), efficiency = number(r$efficiency, 3, down = TRUE),
               step_s = number(r$step_seconds, 2), compute_s = number(r$compute_seconds, 2),
               exposed_s = number(r$exposed_seconds, 2), extra_cpu_s = number(r$extra_cpu_seconds, 2),
               allreduce_s = number(r$allreduce_seconds, 2),
               hidden = number(r$hidden_fraction, 2), mb_step = number(as.numeric(r$bytes_per_step) / 1e6, 1),
               estimated = number(r$estimated_efficiency, 2, down = TRUE),
               cpu_share_1 = if (is.na(share)) "" else paste0(format(share, nsmall = 2), if (isTRUE(r$contended)) " *"),
               stringsAsFactors = FALSE)
  }))
  workers <- rows[[1]]$workers
  cat(sprintf(paste("Scaling: %s workers against 1, each on its own CPUs (images_s_1: one worker alone;",
                    "estimated: the efficiency the run estimated before training; cpu_share_1: the share of its CPUs",
                    "the lone worker's step got):\n"), workers))
  print(table, row.names = FALSE)
  slowed <- Filter(function(r) isTRUE(r$contended), unname(rows))
  if (length(slowed)) {
    loads <- unlist(lapply(slowed, function(r) if (is.numeric(r$load_before)) sprintf("%.1f", r$load_before)))
    cat("* Slowed down by other work: the lone worker's step got a smaller share of its CPUs (cpu_share_1) than ",
        "a quiet machine gives",
        if (length(loads)) paste0(" (load average ", paste(loads, collapse = ", "), " before the run)"),
        ", so that its rate, and every ratio to it, is off: measure again on a quiet machine.\n", sep = "")
  }
  for (r in unname(rows)) {
    if (is_scalar(r$adapted, is.character) && nzchar(r$adapted)) {
      cat(sprintf("Took for %s over %s (adapt_communication): levers = \"%s\"\n", r$levers, r$link, r$adapted))
    }
    if (is_scalar(r$advised, is.character) && nzchar(r$advised)) {
      cat(sprintf("Advised for %s over %s: levers = \"%s\"\n", r$levers, r$link, r$advised))
    }
  }
  if (!is.null(stage$skipped)) cat("Links left out:", stage$skipped, "\n")
  for (target in stage$summary$targets) {
    met <- if (isTRUE(target$met)) " (met)" else " (not met)"
    cat(sprintf("%s: %s (%s), target %s%s\n", target$what, held(target$value, "at least", 3), target$levers,
                format(target$target), met))
  }
  cat("Projection to 256 workers:", stage$model, "\n")
  invisible(stage)
}

# `value` in `digits` decimals, rounded away from the target it is held against (`bound`: "at least" or "at most"),
# so that what is printed never meets a target the value misses (1.797 against at least 1.8: "1.797" at 3 digits,
# "1.79" at 2), as the command line's tables say it.
# `fixed`: always `digits` decimals, else as few as the number needs.
held <- function(value, bound = "at least", digits = 2L, fixed = TRUE) {
  scale <- 10^digits
  value <- as.numeric(value)
  shown <- if (identical(bound, "at most")) ceiling(value * scale - 1e-9) / scale else floor(value * scale + 1e-9) / scale
  if (fixed) formatC(shown + 0, format = "f", digits = digits) else format(shown + 0)
}
