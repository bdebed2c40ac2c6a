# alexnet_benchmark() from R: the stages come back as a data frame, the files are written, it prints.

test_that("alexnet_benchmark() runs from R on a partition and returns a table of stages", {
  skip_unless_long()
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "imagenet"), classes = 2, images_per_class = 4,
                            val_per_class = 0, max_side = 120)
  board <- file.path(dir, "board")
  upload_without_validation(src$path, board = board, workers = 2)
  data <- imagenet_partition(partition = 0, total = 1, board = board, cache_dir = file.path(dir, "cache"))

  result <- alexnet_benchmark(data, stages = c("decode", "io", "synthetic"), images = 8, batch_size = 4,
                              image_size = 64, cores = 1, seconds = 0, dense_units = 16,
                              model_steps = 1, precision = "float32", output_dir = file.path(dir, "out"))
  expect_s3_class(result, "alexnet_benchmark")
  expect_s3_class(result$stages, "data.frame")
  for (part in c("stages", "machine", "settings", "data")) expect_documented(names(result[[part]]), "alexnet_benchmark")
  expect_documented(setdiff(names(result$summary), c()), "alexnet_benchmark")
  expect_documented(names(result), "alexnet_benchmark")
  expect_setequal(paste(result$stages$stage, result$stages$cores),
                  c("decode 1", "io 1", paste("synthetic", result$machine$cores)))
  expect_true(all(result$stages$images_per_second > 0))
  expect_equal(result$stages$precision[result$stages$stage == "synthetic"], "float32")
  expect_true(all(is.na(result$stages$precision[result$stages$stage != "synthetic"])))
  expect_equal(result$settings$precision, "float32")
  expect_null(result$time_to_accuracy)
  expect_true(all(!is.na(result$stages$peak_rss_mb[result$stages$stage != "synthetic"])))
  expect_equal(result$data$images, 8L)
  expect_equal(result$machine$cpu_allocator, "bfc")  # the core asks TensorFlow for it before it computes
  declared <- alexnet:::tensorflow_environment()
  expect_equal(result$machine$malloc, declared[["ALEXNET_MALLOC"]])  # and glibc's malloc settings it makes
  expect_true(file.exists(result$json))
  expect_true(file.exists(result$png))
  saved <- jsonlite::fromJSON(result$json)
  expect_equal(saved$summary$ratios$io_vs_decode_per_core$value,
               result$summary$ratios$io_vs_decode_per_core$value)
  expect_output(print(result), "AlexNet benchmark: 8 images")
  expect_output(print(result), "io on 1 core / decode on 1 core: [0-9.]+x, target 1x")
})

test_that("alexnet_benchmark() checks its arguments before starting", {
  expect_error(alexnet_benchmark(stages = 3), "`stages` must be strings without NA, not 3",
               class = "alexnet_error")
  skip_if_no_alexnet()  # the checks below are the core's
  expect_error(alexnet_benchmark(list(label = 1)), "`data\\$image` is missing or empty")
  expect_error(alexnet_benchmark(stages = "nope"), "`stages` must be some of decode, naive")
  expect_error(alexnet_benchmark(images = 0), "images")
  expect_error(alexnet_benchmark(seconds = -1), "seconds")
})

test_that("the print shows only what was measured, in the order of `stages`, with the CPU use", {
  result <- alexnet:::new_alexnet_benchmark(list(
    machine = list(cpu = "Test CPU", cores = 2L),
    settings = list(stages = list("io", "decode")),
    data = list(images = 8L, skipped = list()),
    stages = list(
      list(stage = "decode", cores = 1L, images_per_second = 100, cpu_use = 0.99, cpu_seconds = 1.2,
           images_per_cpu_second = 101, peak_rss_mb = 800, load_average = 0.5),
      list(stage = "io", cores = 2L, images_per_second = 170, cpu_use = 1, peak_rss_mb = 810, load_average = 0.6),
      list(stage = "io", cores = 1L, images_per_second = 90, cpu_use = 0.98, peak_rss_mb = 805, load_average = 0.5)
    ),
    summary = list(
      ratios = list(
        io_vs_decode_per_core = list(what = "io on 1 core / decode on 1 core", value = 0.9, target = 1, met = FALSE),
        io_vs_naive_2_cores = list(what = "io on 2 cores / naive on 2 cores", value = NULL, target = 2, met = NULL)
      ),
      comparisons = list(), contended = list()
    ),
    json = "a.json", png = "a.png"
  ))
  expect_equal(result$data$skipped, character(0))
  expect_equal(result$summary$contended, character(0))
  expect_equal(result$stages$cpu_use, c(0.99, 1, 0.98))
  expect_equal(result$stages$images_per_cpu_second, c(101, NA, NA))
  out <- capture.output(print(result))
  expect_tidy_lines(out)
  rows <- grep("^ *(io|decode) +[0-9]", out, value = TRUE)
  expect_equal(sub("^ *(\\w+) +(\\d+).*", "\\1 \\2", rows), c("io 1", "io 2", "decode 1"))
  expect_true(any(grepl("99%", out, fixed = TRUE)))
  expect_false(any(grepl("n/a|naive", out)))
  expect_true(any(grepl("io on 1 core / decode on 1 core: 0.90x, target 1x (not met)", out, fixed = TRUE)))
})

test_that("the time_to_accuracy stage's arguments are checked before any work", {
  expect_error(alexnet_benchmark(stages = "time_to_accuracy", target_accuracy = "high"), "target_accuracy",
               class = "alexnet_error")
  expect_error(alexnet_benchmark(stages = "time_to_accuracy", precision = 16), "precision", class = "alexnet_error")
  expect_error(alexnet_benchmark(stages = "time_to_accuracy", repeats = 1.5), "repeats", class = "alexnet_error")
  expect_error(alexnet_benchmark(stages = "time_to_accuracy", accuracy_classes = 2.5), "accuracy_classes",
               class = "alexnet_error")
  skip_if_no_alexnet()
  expect_error(alexnet_benchmark(stages = "time_to_accuracy", target_accuracy = 1.5), "between 0 and 1")
  expect_error(alexnet_benchmark(stages = "time_to_accuracy", max_epochs = 0), "max_epochs")
  expect_error(alexnet_benchmark(stages = "time_to_accuracy", precision = "float8"), "precision")
})

test_that("the print shows each recipe's medians and ranges over the seeds and the targets of time_to_accuracy", {
  spread <- function(values) {
    known <- Filter(Negate(is.null), values)
    list(median = stats::median(unlist(known)), min = min(unlist(known)),
         max = if (length(known) < length(values)) NULL else max(unlist(known)), count = length(known))
  }
  run <- function(seed, accuracy, seconds, epoch) {
    list(seed = seed, val_accuracy = as.list(accuracy), seconds = as.list(seconds), epochs_to_target = epoch,
         seconds_to_target = if (is.null(epoch)) NULL else seconds[[epoch]],
         final_accuracy = accuracy[[length(accuracy)]], best_accuracy = max(accuracy))
  }
  recipe <- function(name, precision, sizes, schedule, runs) {
    list(recipe = name, precision = precision, precision_reason = "test", image_sizes = as.list(sizes),
         image_size_epochs = as.list(rep(1L, length(sizes))), lr_scaling = "none", lr_schedule = schedule,
         label_smoothing = 0, learning_rate = 0.01, seeds = list(0L, 1L),
         seconds_to_target = spread(lapply(runs, `[[`, "seconds_to_target")),
         final_accuracy = spread(lapply(runs, `[[`, "final_accuracy")),
         best_accuracy = spread(lapply(runs, `[[`, "best_accuracy")),
         late_drop = list(median = 0.05, min = 0, max = 0.1, count = 2L), runs = runs)
  }
  targets <- list(
    time_ratio = list(what = "defaults / paper: median wall time to 0.6 accuracy (2 seeds)", value = 0.5,
                      target = 0.4, bound = "at most", met = FALSE),
    accuracy_difference = list(what = "defaults - paper: median validation accuracy after 3 epochs", value = 0.05,
                               target = 0, bound = "at least", met = TRUE))
  paper <- recipe("paper", "float32", 128L, "plateau",
                  list(run(0L, c(0.2, 0.4, 0.62), c(10, 20, 30), 3L), run(1L, c(0.2, 0.6, 0.58), c(10, 20, 30), 2L)))
  defaults <- recipe("defaults", "float32", c(64L, 96L, 128L), "linear",
                     list(run(0L, c(0.3, 0.62, 0.6), c(4, 10, 20), 2L), run(1L, c(0.3, 0.5, 0.55), c(4, 10, 20), NULL)))
  # with adapt_communication each seed's run took what its own measurement advised: the print names it
  taking <- list(run(0L, c(0.3, 0.62, 0.6), c(5, 11, 21), 2L), run(1L, c(0.3, 0.5, 0.55), c(5, 11, 21), NULL))
  taking[[1]]$adapted <- "allreduce_precision=bfloat16"
  taking[[2]]$adapted <- ""
  adapted <- recipe("defaults+adapted", "float32", c(64L, 96L, 128L), "linear", taking)
  # a lever set that trains as the defaults was trained once, as them: its recipe and lever row say so
  today <- c(defaults, same_as = "defaults")
  today$recipe <- "defaults+today"
  lever <- list(epochs_to_target = 2L, defaults_epochs_to_target = 2L, seconds_to_target = 10,
                defaults_seconds_to_target = 10, final_accuracy = 0.575, defaults_final_accuracy = 0.575,
                same_epochs_or_fewer = TRUE, same_as = "defaults")
  result <- alexnet:::new_alexnet_benchmark(list(
    machine = list(cpu = "Test CPU", cores = 2L),
    settings = list(stages = list("time_to_accuracy")),
    data = list(images = 0L, skipped = 0L),
    stages = list(),
    time_to_accuracy = list(
      settings = list(target_accuracy = 0.6, max_epochs = 3L, repeats = 2L, accuracy_workers = 2L,
                      accuracy_link = "1gbit"),
      data = list(source = "synthetic ImageNet", num_classes = 10L, train_images = 100L, val_images = 20L),
      recipes = list(paper = paper, defaults = defaults, "defaults+adapted" = adapted, "defaults+today" = today),
      levers = list("defaults+today" = lever),
      time_ratio = 0.5, accuracy_difference = 0.05, targets = targets, seconds = 60),
    summary = list(ratios = list(), comparisons = list(), contended = list(), time_to_accuracy = targets),
    json = "a.json", png = "a.png"
  ))
  expect_equal(nrow(result$stages), 0L)
  expect_equal(result$time_to_accuracy$recipes$defaults$runs[[1]]$val_accuracy, c(0.3, 0.62, 0.6))
  width <- options(width = 200)
  on.exit(options(width), add = TRUE)
  out <- capture.output(print(result))
  expect_true(any(grepl("Time to 0.6 validation accuracy", out, fixed = TRUE)))
  expect_true(any(grepl("3 epochs each, 2 seed(s); 2 workers over 1gbit):", out, fixed = TRUE)))
  paper_row <- grep("^ *paper +float32", out, value = TRUE)
  defaults_row <- grep("^ *defaults +float32", out, value = TRUE)
  # median (min-max); a seed that never reached the target makes the range open-ended
  expect_match(paper_row, "128 +0.01 plateau +25 s \\(20 s-30 s\\) +0.600 \\(0.580-0.620\\) +0.610 \\(0.600-0.620\\)")
  expect_match(defaults_row, "64/96/128 +0.01 linear +10 s \\(10 s-never\\) +0.575 \\(0.550-0.600\\)")
  expect_match(defaults_row, "0.050 \\(0.000-0.100\\) +n/a$")
  expect_length(grep("^ *defaults\\+adapted \\(took allreduce_precision=bfloat16\\) +float32 +64/96/128", out), 1L)
  expect_length(grep("^ *defaults\\+today \\(trained as defaults\\) +float32 +64/96/128", out), 1L)
  expect_length(grep("^defaults\\+today \\(trained as defaults\\) against defaults: 2 epochs", out), 1L)
  expect_true(any(grepl("median wall time to 0.6 accuracy (2 seeds): 0.5, target at most 0.4 (not met)",
                        out, fixed = TRUE)))
  expect_true(any(grepl("after 3 epochs: 0.05, target at least 0 (met)", out, fixed = TRUE)))
})

# The benchmark's settings reach R from the core's declaration (R/bench-settings.R, generated from it): each one is an
# argument of alexnet_benchmark() with the declared kind and default, is documented on ?alexnet_benchmark, and a bad
# value of it stops alexnet_benchmark() with an alexnet_error naming it. The walk is over the declaration, so a
# setting added there alone is covered. (Python's side: python/tests/test_bench_settings.py.)
test_that("every setting of the benchmark's declaration is an argument of alexnet_benchmark(), with its default", {
  settings <- alexnet:::benchmark_settings
  formals <- formals(alexnet_benchmark)
  expect_identical(names(formals), c("data", names(settings)))
  for (name in names(settings)) {
    expect_identical(eval(formals[[name]]), settings[[name]]$default, label = name)
    expect_identical(unname(alexnet:::argument_kinds$alexnet_benchmark[name]), settings[[name]]$kind, label = name)
  }
  expect_arguments_documented(names(settings), "alexnet_benchmark")
})

test_that("a bad value of every benchmark setting stops alexnet_benchmark() with an alexnet_error naming it", {
  skip_if_no_alexnet()
  out <- tempfile("never-written")
  tried <- expect_settings_refused(alexnet_benchmark, alexnet:::benchmark_settings, list(output_dir = out),
                                   after = function(name, args) expect_false(file.exists(out), label = name))
  expect_gt(tried, 25L)
})

test_that("the scaling stage prints a row per lever set and link, with the CPU a step took beyond a lone worker's", {
  row <- list(levers = "accumulate", link = "1gbit", rate = 1e9, workers = 2L, images_per_step = 512L,
              micro_batches = 16L, precision = "bfloat16", images_per_second_1 = 61.8, images_per_second = 96.5,
              efficiency = 0.78, step_seconds = 10.61, compute_seconds = 8.29, exposed_seconds = 2.32,
              extra_cpu_seconds = 0.41, allreduce_seconds = 1.4, hidden_fraction = 0, bytes_per_step = 124756688,
              estimated_efficiency = 0.8556, adapted = "",
              advised = "allreduce_precision=bfloat16+allreduce_pack_mb=25+accumulate_steps=32", load_before = 0.1, load_after = 0.9)
  expect_documented(names(row), "alexnet_benchmark")
  withr::local_options(width = 300)  # the table on one line
  out <- capture.output(alexnet:::print_scaling(list(rows = list(row), model = "a ring all-reduce")))
  header <- strsplit(trimws(out[2]), " +")[[1]]
  values <- strsplit(trimws(out[3]), " +")[[1]]
  # the estimate, held against the share advised, rounded down (0.8556: 0.85)
  expect_equal(values[match(c("exposed_s", "extra_cpu_s", "allreduce_s", "estimated"), header)],
               c("2.32", "0.41", "1.4", "0.85"))
  expect_identical(alexnet:::held(1.797, "at least", 2), "1.79")
  expect_identical(alexnet:::held(0.4049, "at most", 3, fixed = FALSE), "0.405")
  expect_identical(alexnet:::held(-0.0004, "at least", 3, fixed = FALSE), "-0.001")
  # the lever set the run advised, as `levers` takes it
  expect_true(any(out == paste0('Advised for accumulate over 1gbit: levers = ',
                                '"allreduce_precision=bfloat16+allreduce_pack_mb=25+accumulate_steps=32"')), info = out)
  expect_false(any(grepl("^Took", out)), info = out)
  row$advised <- ""
  expect_false(any(grepl("^Advised", capture.output(alexnet:::print_scaling(list(rows = list(row), model = "m"))))))
  # what a run of adapt_communication took of its advice
  row$levers <- "adapted"
  row$adapted <- "allreduce_precision=bfloat16+accumulate_steps=4"
  out <- capture.output(alexnet:::print_scaling(list(rows = list(row), model = "m")))
  expect_true(any(out == paste0('Took for adapted over 1gbit (adapt_communication): levers = ',
                                '"allreduce_precision=bfloat16+accumulate_steps=4"')), info = out)
  # a lever set measured as another that trains alike, and a lone worker slowed down by other work: marked
  row <- modifyList(row, list(levers = "bfloat16", same_as = "allreduce_precision=bfloat16", adapted = "",
                              cpu_use_1 = 0.62, contended = TRUE, load_before = 1.7))
  expect_documented(c("cpu_use_1", "contended", "same_as"), "alexnet_benchmark")
  out <- capture.output(alexnet:::print_scaling(list(rows = list(row), model = "m")))
  header <- strsplit(trimws(out[2]), " +")[[1]]
  expect_equal(tail(header, 1), "cpu_share_1")
  expect_match(out[3], "^ *bfloat16 \\(measured as allreduce_precision=bfloat16\\) +1gbit .* 0\\.62 \\*$")
  expect_true(any(startsWith(out, "* Slowed down by other work: the lone worker's step got a smaller share of its CPUs")))
  expect_true(any(grepl("(load average 1.7 before the run)", out, fixed = TRUE)))
  row$contended <- FALSE
  out <- capture.output(alexnet:::print_scaling(list(rows = list(row), model = "m")))
  expect_match(out[3], " 0\\.62$")
  expect_false(any(grepl("Slowed down", out)))
})
