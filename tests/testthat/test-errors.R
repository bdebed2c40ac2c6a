# Errors reach R as conditions of alexnet's classes (?alexnet_errors), in R's words.

test_that("argument errors checked in R are alexnet_error conditions, before any Python", {
  error <- tryCatch(alexnet_train(epochs = "ten"), error = identity)
  expect_s3_class(error, "alexnet_error")
  expect_null(conditionCall(error))
  expect_match(conditionMessage(error), "`epochs`", fixed = TRUE)
})

test_that("a board the core cannot read is an alexnet_board_error, without the Python class name", {
  skip_if_no_alexnet()
  missing <- file.path(withr::local_tempdir(), "no-board")
  caught <- tryCatch(imagenet_categories(board = missing),
                     alexnet_board_error = function(e) e)
  expect_s3_class(caught, c("alexnet_board_error", "alexnet_error", "error", "condition"), exact = TRUE)
  expect_equal(caught$python_class, "BoardError")
  expect_match(conditionMessage(caught), missing, fixed = TRUE)
  expect_no_match(conditionMessage(caught), "alexnet.errors|BoardError|Rcpp")
  # R's quotes in the advice the core gives
  expect_match(conditionMessage(caught), paste0("board = \"", missing, "\""), fixed = TRUE)
})

test_that("an ImageNet tree that cannot be read is an alexnet_layout_error", {
  skip_if_no_alexnet()
  empty <- withr::local_tempdir()
  # one error that says what was found and lists the layouts read
  expect_error(imagenet_upload(empty, board = withr::local_tempdir()), class = "alexnet_layout_error",
               regexp = "is empty: it is none of the layouts read.*- archives: .*- folders: ")
})

test_that("the core's messages say NULL, TRUE and FALSE, as R users write them", {
  skip_if_no_alexnet()
  part <- list(image = "a.JPEG", category = "n1", categories = "n1")
  error <- tryCatch(alexnet_train(data = part, strategy = "nope"), error = identity)
  expect_s3_class(error, "alexnet_error")
  expect_match(conditionMessage(error), "must be NULL, one of \"default\"", fixed = TRUE)
  expect_no_match(conditionMessage(error), "None|'")
})

test_that("r_words() turns Python's words into R's and leaves prose alone", {
  expect_equal(alexnet:::r_words("must be TRUE/True, FALSE/False or NULL/None, not None."),
               "must be TRUE, FALSE or NULL, not NULL.")
  expect_equal(alexnet:::r_words("got True and False"), "got TRUE and FALSE")
  expect_equal(alexnet:::r_words("None of the 3 images is a JPEG"), "None of the 3 images is a JPEG")
  expect_equal(alexnet:::r_words("unknown: ['n01', 'n02'], sizes [1, 2], none: []"),
               "unknown: c(\"n01\", \"n02\"), sizes c(1, 2), none: character(0)")
  expect_equal(alexnet:::r_words("pin 'alexnet' has the paper's ten crops"),
               "pin \"alexnet\" has the paper's ten crops")
  expect_equal(alexnet:::r_words("set it, e.g. to tf_config_json(addresses, index), before training"),
               "set it, e.g. to tf_config_from_barrier(barrier), before training")
  # brackets after a word are no list: a Spark master's cores, an index
  expect_equal(alexnet:::r_words("give Spark more cores (e.g. master = 'local[3]' on one machine); x[0]"),
               "give Spark more cores (e.g. master = \"local[3]\" on one machine); x[0]")
  # the kind of a value, as Python names it, and whole numbers as R prints them
  expect_equal(alexnet:::r_words(paste("`callbacks` is a str, item 1 is a float, a model given as a dict, or a",
                                       "dict/list with `image`; not a DataFrame, an int or a bool: [1.0, 2.0, 2.5]")),
               paste("`callbacks` is a string, item 1 is a number, a model given as a named list, or a list with",
                     "`image`; not a data frame, a whole number or a logical: c(1, 2, 2.5)"))
  expect_equal(alexnet:::r_words("TensorFlow 2.0, a strict dictionary, version [2.10]"),
               "TensorFlow 2.0, a strict dictionary, version c(2.10)")
  # an entry of an argument, as the core names it: R's `$`
  expect_equal(alexnet:::r_words("`data[\"image\"]` has 2 entries but `data[\"label\"]` has 1; x[\"a b\"], ['n01']"),
               "`data$image` has 2 entries but `data$label` has 1; x[\"a b\"], c(\"n01\")")
})

test_that("the core's r_words(), which the monitor of a job from R says the workers' lines with, is R's", {
  skip_if_no_alexnet()
  core <- reticulate::import("alexnet.errors")$r_words
  texts <- c("must be TRUE/True, FALSE/False or NULL/None, not None.", "got True and False",
             "None of the 3 images is a JPEG", "unknown: ['n01', 'n02'], sizes [1, 2], none: []",
             "pin 'alexnet' has the paper's ten crops",
             "set it, e.g. to tf_config_json(addresses, index), before training; tf_config_json",
             "give Spark more cores (e.g. master = 'local[3]' on one machine); x[0]",
             paste("`callbacks` is a str, item 1 is a float, a model given as a dict, or a dict/list with `image`;",
                   "not a DataFrame, an int, a NoneType or a bool: [1.0, 2.0, 2.5]"),
             "TensorFlow 2.0, a strict dictionary, version [2.10]",
             "`data[\"image\"]` has 2 entries but `data[\"label\"]` has 1; x[\"a b\"], ['n01']",
             paste("(Spark's whole message is logged at DEBUG level: logging.getLogger('alexnet').setLevel('DEBUG'));",
                   "logging.getLogger('alexnet').setLevel('DEBUG')"),
             "Communication: With `adapt_communication` the run took `allreduce_precision` = 'bfloat16'.",
             "other images (partition None then, 0 now, `total` 2 then, 1 now)")
  for (text in texts) expect_identical(core(text), alexnet:::r_words(text), label = text)
})

test_that("a long error or warning of the package is printed whole, where R cuts messages at 1000 characters", {
  rscript <- file.path(R.home("bin"), "Rscript")
  code <- paste("f <- function() { alexnet:::whole_messages(); warning(strrep('w', 3000)) }; f();",
                "cat('length', getOption('warning.length'), '\\n');",  # the caller's option, as it was
                "alexnet:::alexnet_condition(strrep('e', 3000))")
  out <- suppressWarnings(system2(rscript, c("-e", shQuote(code)), stdout = TRUE, stderr = TRUE))
  expect_true(any(endsWith(out, strrep("w", 3000))), info = paste(substr(out, 1, 80), collapse = "\n"))
  expect_true(any(endsWith(out, strrep("e", 3000))))
  expect_false(any(grepl("truncated", out)))
  expect_true("length 1000 " %in% out)
})

test_that("a worker's error is an alexnet_worker_error and alexnet_cluster_error with its worker and log", {
  skip_if_no_alexnet()
  reticulate::py_run_string(paste(
    "def _alexnet_fail_worker(log):",
    "    from alexnet.launch.worker import WorkerError",
    "    raise WorkerError(1, 2, 'ValueError: no such file', ['line one', 'line two'], 1, log)",
    sep = "\n"), convert = FALSE)
  fail <- alexnet:::core_callable(reticulate::py_get_attr(reticulate::import_main(convert = FALSE), "_alexnet_fail_worker"))
  caught <- tryCatch(fail("/tmp/worker-1.log"), alexnet_cluster_error = function(e) e)
  expect_s3_class(caught, c("alexnet_worker_error", "alexnet_cluster_error", "alexnet_child_error",
                            "alexnet_error"))
  expect_equal(caught$worker, 1L)
  expect_equal(caught$workers, 2L)
  expect_equal(caught$log, "/tmp/worker-1.log")
  expect_match(conditionMessage(caught), "^Worker 1 of 2 failed: ValueError: no such file")
  expect_match(conditionMessage(caught), "line two", fixed = TRUE)
})

test_that("a lost worker's error is an alexnet_worker_lost_error with the worker and how it was lost", {
  skip_if_no_alexnet()
  reticulate::py_run_string(paste(
    "def _alexnet_lose_worker():",
    "    from alexnet.train.lost import WorkerLostError",
    "    raise WorkerLostError('Worker 0 of 2 cannot go on: worker 1 of 2 stopped sending heartbeats', 1, 'heartbeats')",
    sep = "\n"), convert = FALSE)
  lose <- alexnet:::core_callable(reticulate::py_get_attr(reticulate::import_main(convert = FALSE),
                                                          "_alexnet_lose_worker"))
  caught <- tryCatch(lose(), alexnet_cluster_error = function(e) e)
  expect_s3_class(caught, c("alexnet_worker_lost_error", "alexnet_cluster_error", "alexnet_error"))
  expect_equal(caught$worker, 1L)
  expect_equal(caught$kind, "heartbeats")
  expect_match(conditionMessage(caught), "^Worker 0 of 2 cannot go on: worker 1 of 2 stopped sending heartbeats$")
})

test_that("the core's warnings, from any of its threads, are R warnings of class alexnet_warning in R's words", {
  skip_if_no_alexnet()
  reticulate::py_run_string(paste(
    "def _alexnet_warn(fail):",
    "    import logging, threading",
    "    log = logging.getLogger('alexnet.data.upload')",
    "    log.info('an info line, not a warning')",
    "    log.warning('%s was left out: set keep=None to keep it', 'a.JPEG')",
    "    worker = threading.Thread(target=log.error, args=('a packing thread says so too',))",
    "    worker.start()",
    "    worker.join()",
    "    other = logging.getLogger('somebody.else')",
    "    other.addHandler(logging.NullHandler())",
    "    other.warning('not the core')",
    "    if fail:",
    "        from alexnet.errors import LayoutError",
    "        raise LayoutError('and then it failed')",
    "    return 7",
    sep = "\n"), convert = FALSE)
  warn <- alexnet:::core_callable(reticulate::py_get_attr(reticulate::import_main(convert = FALSE), "_alexnet_warn"))
  seen <- list()
  keep <- function(w) {
    seen[[length(seen) + 1L]] <<- w
    invokeRestart("muffleWarning")
  }
  value <- withCallingHandlers(warn(FALSE), warning = keep)
  expect_equal(value, 7L)
  expect_length(seen, 2L)
  for (w in seen) expect_s3_class(w, c("alexnet_warning", "warning", "condition"), exact = TRUE)
  expect_equal(vapply(seen, conditionMessage, ""),
               c("a.JPEG was left out: set keep=NULL to keep it", "a packing thread says so too"))
  # said once: the next call has nothing left to say
  expect_silent(alexnet:::core_callable(reticulate::py_eval("lambda: 1", convert = FALSE))())
  # a call that fails says its warnings first, then raises its error
  seen <- list()
  expect_error(withCallingHandlers(warn(TRUE), warning = keep), class = "alexnet_layout_error",
               regexp = "and then it failed")
  expect_length(seen, 2L)
})

test_that("a long message of the core arrives whole", {
  skip_if_no_alexnet()
  reticulate::py_run_string(paste(
    "def _alexnet_fail_long():",
    "    from alexnet.errors import IntegrityError",
    "    raise IntegrityError('start ' + 'x' * 5000 + ' end')",
    sep = "\n"), convert = FALSE)
  fail <- alexnet:::core_callable(reticulate::py_get_attr(reticulate::import_main(convert = FALSE), "_alexnet_fail_long"))
  error <- tryCatch(fail(), alexnet_integrity_error = identity)
  expect_equal(nchar(conditionMessage(error)), nchar("start  end") + 5000L)
})

test_that("an unexpected Python error is an alexnet_python_error that keeps its Python type", {
  skip_if_no_alexnet()
  int <- alexnet:::core_callable(reticulate::import_builtins(convert = FALSE)$int)
  error <- tryCatch(int("ten"), error = identity)
  expect_s3_class(error, "alexnet_python_error")
  expect_false(inherits(error, "alexnet_error"))
  expect_match(conditionMessage(error), "^ValueError: invalid literal")
  # errors raised in R pass through a core call unchanged
  r_error <- tryCatch(alexnet:::with_core_errors(stop("from R")), error = identity)
  expect_equal(conditionMessage(r_error), "from R")
  expect_false(inherits(r_error, "alexnet_python_error"))
})

test_that("every error class of the core has its R classes, and ?alexnet_errors lists them all", {
  python <- system.file("python", "alexnet", package = "alexnet")
  skip_if(!nzchar(python), "the installed package carries no Python core")
  files <- list.files(python, pattern = "[.]py$", recursive = TRUE, full.names = TRUE)
  lines <- unlist(lapply(files, readLines, warn = FALSE))
  defined <- regmatches(lines, regexec("^class (\\w+)\\((\\w+)\\)", lines))
  defined <- Filter(length, defined)
  parents <- stats::setNames(vapply(defined, `[[`, "", 3L), vapply(defined, `[[`, "", 2L))
  errors <- "AlexnetError"
  repeat {  # every class deriving from AlexnetError, through any depth
    more <- setdiff(names(parents)[parents %in% errors], errors)
    if (!length(more)) break
    errors <- c(errors, more)
  }
  expect_true(length(errors) >= 8L)
  expect_setequal(names(alexnet:::core_error_classes), errors)
  help <- paste(utils::capture.output(tools::Rd2txt(tools::Rd_db("alexnet")[["alexnet_errors.Rd"]])),
                collapse = "\n")
  for (class in unique(unlist(alexnet:::core_error_classes))) expect_match(help, class, fixed = TRUE)
})
