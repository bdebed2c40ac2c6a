# Every exported function checks its arguments in R, from the table in R/arguments.R, before any call into the
# core: NA of any type, a vector where one value is meant and a wrong type are errors of class `alexnet_error`
# whose one-line message names the argument and shows the value as R does.

# A fake connection: sparklyr's connections have this class, and the check needs no sparklyr.
fake_connection <- structure(list(master = "local[2]"), class = c("spark_shell_connection", "spark_connection"))

# Valid values of the arguments without defaults, so that each call differs from a good one in one argument.
required_args <- list(
  imagenet_synthetic = list(dest = "/nowhere/imagenet"),
  imagenet_upload = list(source = "/nowhere/imagenet"),
  alexnet_use_python = list(python = "/nowhere/python"),
  tf_config_from_barrier = list(barrier = list(address = "10.0.0.1:4040", partition = 0)),
  alexnet_spark_train = list(sc = fake_connection, workers = 1),
  alexnet_evaluate = list(model = "/nowhere/model"),
  alexnet_predict = list(model = "/nowhere/model", images = "/nowhere/a.JPEG"),
  alexnet_features = list(model = "/nowhere/model", images = "/nowhere/a.JPEG"),
  alexnet_filters = list(model = "/nowhere/model"),
  alexnet_spark_evaluate = list(sc = fake_connection, model = "/nowhere/model", workers = 1)
)

# The bad values tried for each kind of scalar argument: every NA, two values, and a value of the wrong type.
bad_values <- function(kind) {
  two <- switch(kind, count = c(1, 2), number = c(0.5, 1), flag = c(TRUE, FALSE), c("a", "b"))
  wrong <- switch(kind, count = , number = "x", flag = 1, 1)
  list(`NA` = NA, `NA_integer_` = NA_integer_, `NA_real_` = NA_real_, `NA_character_` = NA_character_,
       `length 2` = two, `wrong type` = wrong)
}

scalar_kinds <- c("count", "number", "flag", "string", "location", "object", "connection", "choice")

# A kind without its NULL mark and its least value: "count>=0?" is a count.
base_kind <- function(kind) sub(">=.*$", "", sub("?", "", kind, fixed = TRUE))

argument_cases <- function() {
  kinds <- alexnet:::argument_kinds
  exports <- setdiff(getNamespaceExports("alexnet"), "%>%")
  cases <- list()
  for (fun in intersect(names(kinds), exports)) {
    for (name in names(kinds[[fun]])) {
      kind <- base_kind(kinds[[fun]][[name]])
      if (!kind %in% scalar_kinds) next
      for (label in names(bad_values(kind))) {
        cases[[length(cases) + 1L]] <- list(fun = fun, name = name, label = label, value = bad_values(kind)[[label]])
      }
    }
  }
  cases
}

test_that("every export has a row in the argument table, which covers each of its arguments", {
  kinds <- alexnet:::argument_kinds
  exports <- getNamespaceExports("alexnet")
  expect_equal(setdiff(exports, names(kinds)), character(), label = "exports without a row")
  for (fun in setdiff(exports, "%>%")) {
    formals <- names(formals(getExportedValue("alexnet", fun)))
    formal <- setdiff(formals, "...")
    if (!"..." %in% formals) {  # no row for an argument the function does not take
      expect_equal(as.character(setdiff(names(kinds[[fun]]), formal)), character(),
                   label = paste0(fun, "()'s extra rows"))
    }
    expect_equal(as.character(setdiff(formal, names(kinds[[fun]]))), character(), label = paste0(fun, "()'s missing rows"))
  }
  known <- c("count", "number", "flag", "string", "location", "numbers", "strings", "data", "partition", "object",
             "connection", "any", "counts", "choice")
  expect_true(all(base_kind(unlist(kinds)) %in% known))
  # every choice has its values, and least values are only on whole numbers
  for (fun in names(kinds)) {
    for (name in names(kinds[[fun]])[base_kind(kinds[[fun]]) == "choice"]) {
      expect_true(length(alexnet:::argument_choices[[name]]) >= 2L, label = paste0(fun, "(", name, ")'s choices"))
    }
    least <- kinds[[fun]][grepl(">=", kinds[[fun]], fixed = TRUE)]
    expect_true(all(base_kind(least) %in% c("count", "counts")), label = paste0(fun, "()'s least values"))
  }
})

test_that("NA, two values or a wrong type is an alexnet_error naming the argument, before any Python", {
  cases <- argument_cases()
  expect_gt(length(cases), 300L)
  # in an R without any Python for alexnet: a check that let a bad value through would reach the core, whose
  # absence is another error
  config <- withr::local_tempdir()
  results <- run_fresh_r(function(cases, required) {
    library(alexnet)
    lapply(cases, function(case) {
      args <- required[[case$fun]]
      args[case$name] <- list(case$value)
      error <- tryCatch({
        do.call(getExportedValue("alexnet", case$fun), args)
        NULL
      }, error = identity)
      list(class = class(error), message = if (is.null(error)) "" else conditionMessage(error),
           python = reticulate::py_available(initialize = FALSE))
    })
  }, args = list(cases, required_args), env = c(ALEXNET_PYTHON = file.path(config, "no-python"), RETICULATE_PYTHON = "",
             R_USER_CONFIG_DIR = config, WORKON_HOME = config))
  for (i in seq_along(cases)) {
    case <- cases[[i]]
    result <- results[[i]]
    label <- sprintf("%s(%s = <%s>)", case$fun, case$name, case$label)
    expect_true(all(c("alexnet_error", "error", "condition") %in% result$class),
                label = paste(label, "gives an alexnet_error:", result$message))
    expect_match(result$message, paste0("`", case$name, "`"), fixed = TRUE, label = label)
    expect_no_match(result$message, "\n", fixed = TRUE, label = label)
    expect_no_match(result$message, "TypeError|Traceback|None|nan|True|-2147483648", label = label)
    if (startsWith(case$label, "NA")) expect_match(result$message, "not NA", fixed = TRUE, label = label)
    if (case$label == "length 2") {
      expect_match(result$message, paste0("not ", paste(deparse(case$value), collapse = "")), fixed = TRUE,
                   label = label)
    }
    expect_false(result$python, label = label)
  }
})

test_that("values shown as R shows them", {
  show <- alexnet:::show_value
  expect_equal(show(NA_real_), "NA")
  expect_equal(show(c("a", "b")), 'c("a", "b")')
  expect_equal(show("x"), '"x"')
  expect_equal(show(NULL), "NULL")
  expect_equal(show(c(TRUE, FALSE)), "c(TRUE, FALSE)")
  expect_equal(show(1:100), "an integer vector of length 100")
  expect_equal(show(runif(50)), "a double vector of length 50")
  expect_equal(show(list(1, 2)), "a list of length 2")
})

test_that("good values pass and reach the core converted: whole numbers as integers, NULL where allowed", {
  check <- alexnet:::check_arg
  expect_identical(check(2, "total", "count"), 2L)
  expect_identical(check(1e12, "seed", "count?"), 1e12)
  expect_identical(check(NULL, "resize", "count?"), NULL)
  expect_identical(check(0.5, "dropout", "number"), 0.5)
  expect_identical(check(c(30, 60), "lr_drop_epochs", "numbers"), c(30, 60))
  expect_identical(check(c("decode", "io"), "stages", "strings?"), c("decode", "io"))
  expect_identical(check(character(), "extras", "strings"), character())
  strategy <- structure(list(), class = "python.builtin.object")
  expect_identical(check(strategy, "strategy", "object?"), strategy)
  expect_error(check(2.5, "total", "count"), "`total` must be a whole number, not 2.5", class = "alexnet_error")
  expect_error(check(NULL, "total", "count"), "`total` must be a whole number, not NULL", class = "alexnet_error")
  expect_error(check(c(1, NA), "area_range", "numbers"),
               "`area_range` must be numbers without NA or Inf, not c\\(1, NA\\)", class = "alexnet_error")
  # no number a setting takes is infinite (the core refuses them too): Inf is refused as NaN is
  for (value in c(Inf, -Inf, NaN)) {
    expect_error(check(value, "allreduce_pack_mb", "number"), "`allreduce_pack_mb` must be a number, not ",
                 class = "alexnet_error")
  }
  expect_error(check(c(0.5, Inf), "step_seconds", "numbers"), "`step_seconds` must be numbers without NA or Inf",
               class = "alexnet_error")
  expect_error(check(list(a = 1), "board", "location?"), "`board` must be one path or URL \\(a string\\) or NULL",
               class = "alexnet_error")
  # a factor stands for its labels, where strings are taken
  expect_identical(check(factor("Archives"), "layout", "choice"), "archives")
  expect_identical(check(factor(c("decode", "io")), "stages", "strings?"), c("decode", "io"))
  expect_identical(alexnet:::core_images(factor(c("b.jpg", "a.jpg"))), list("b.jpg", "a.jpg"))
  expect_error(check(factor("2"), "total", "count"), "`total` must be a whole number, not \"2\"",
               class = "alexnet_error")
  # the long form of a partition is for reading it: refused as data, naming what to pass
  long <- data.frame(image = "a.jpg", category = "n1", label = 0L, split = "train")
  for (kind in c("partition", "data")) {
    expect_error(check(long, "data", kind), paste0("`data` must be a partition .* not a data frame \\(as.data.frame\\(\\) ",
                                                   "of a partition is for reading it: pass the list imagenet_partition\\(\\) returns\\)"),
                 class = "alexnet_error")
  }
})

test_that("whole numbers of a vector, least values and choices are checked and converted in R", {
  check <- alexnet:::check_arg
  # image sizes: one, or several in order, as integers (a vector of more than one reaches Python as a list)
  expect_identical(check(224, "image_size", "counts>=63"), 224L)
  expect_identical(check(c(128, 160, 224), "image_size", "counts>=63"), c(128L, 160L, 224L))
  expect_identical(check(NULL, "image_size_epochs", "counts>=1?"), NULL)
  expect_identical(check(c(4, 4, 2), "image_size_epochs", "counts>=1?"), c(4L, 4L, 2L))
  expect_error(check(c(32, 96), "image_size", "counts>=63"),
               "`image_size` must be whole numbers >= 63, not c\\(32, 96\\): image side in pixels \\(at least 63",
               class = "alexnet_error")
  expect_error(check(c(64, 96.5), "image_size", "counts>=63"), "not c\\(64, 96.5\\)", class = "alexnet_error")
  expect_error(check(numeric(), "image_size", "counts>=63"), "`image_size` must be whole numbers", class = "alexnet_error")
  expect_error(check(c(2, 0), "image_size_epochs", "counts>=1?"),
               "`image_size_epochs` must be whole numbers >= 1 or NULL, not c\\(2, 0\\): epochs at each size",
               class = "alexnet_error")
  # a least value on one whole number
  expect_identical(check(0, "warmup_epochs", "count>=0?"), 0L)
  expect_error(check(-1, "warmup_epochs", "count>=0?"), "`warmup_epochs` must be a whole number >= 0 or NULL, not -1",
               class = "alexnet_error")
  # choices: any case, reaching the core in lower case; the message lists them
  expect_identical(check("BFloat16", "precision", "choice?"), "bfloat16")
  expect_identical(check(NULL, "precision", "choice?"), NULL)
  expect_identical(check("none", "lr_scaling", "choice"), "none")
  expect_error(check("float64", "precision", "choice?"),
               '`precision` must be one of "float32", "bfloat16", "float16" or NULL, not "float64": what the layers',
               class = "alexnet_error")
  expect_error(check("cubic", "lr_scaling", "choice"), '`lr_scaling` must be "linear" or "none", not "cubic"',
               class = "alexnet_error")
  expect_error(check(NULL, "lr_scaling", "choice"), '`lr_scaling` must be "linear" or "none", not NULL',
               class = "alexnet_error")
  # an evaluation's one image size keeps its own kind and message
  expect_error(check(c(64, 96), "image_size", "count?"), "`image_size` must be a whole number or NULL, not c\\(64, 96\\)\\.$",
               class = "alexnet_error")
})

test_that("the new training arguments are checked in R for both training functions, before any Python", {
  # in an R without any Python for alexnet: a check that let a bad value through would reach the core, whose
  # absence is another error
  config <- withr::local_tempdir()
  calls <- list(
    list("alexnet_train", list(epochs = 1, precision = "float64"), "`precision` must be one of"),
    list("alexnet_train", list(epochs = 1, image_size = c(32, 64)), "`image_size` must be whole numbers >= 63"),
    list("alexnet_train", list(epochs = 1, image_size = 48), "`image_size` must be whole numbers >= 63, not 48"),
    list("alexnet_train", list(epochs = 2, image_size = c(64, 96), image_size_epochs = c(1, NA)),
         "`image_size_epochs` must be whole numbers >= 1 or NULL, not c\\(1, NA\\)"),
    list("alexnet_train", list(epochs = 1, lr_scaling = "cubic"), '`lr_scaling` must be "linear" or "none"'),
    list("alexnet_train", list(epochs = 1, warmup_epochs = -1), "`warmup_epochs` must be a whole number >= 0"),
    list("alexnet_train", list(epochs = 1, learning_rate = "fast"), "`learning_rate` must be a number"),
    list("alexnet_spark_train", list(sc = fake_connection, workers = 1, precision = "double"),
         "`precision` must be one of"),
    list("alexnet_spark_train", list(sc = fake_connection, workers = 1, image_size = c(224, 10)),
         "`image_size` must be whole numbers >= 63"),
    list("alexnet_spark_train", list(sc = fake_connection, workers = 1, lr_scaling = "cubic"), "`lr_scaling` must be"),
    list("alexnet_spark_train", list(sc = fake_connection, workers = 1, warmup_epochs = -2),
         "`warmup_epochs` must be a whole number >= 0")
  )
  results <- run_fresh_r(function(calls) {
    library(alexnet)
    lapply(calls, function(call) {
      error <- tryCatch({
        do.call(getExportedValue("alexnet", call[[1]]), call[[2]])
        NULL
      }, error = identity)
      list(class = class(error), message = if (is.null(error)) "" else conditionMessage(error),
           python = reticulate::py_available(initialize = FALSE))
    })
  }, args = list(calls), env = c(ALEXNET_PYTHON = file.path(config, "no-python"), RETICULATE_PYTHON = "",
                                 R_USER_CONFIG_DIR = config, WORKON_HOME = config))
  for (i in seq_along(calls)) {
    label <- paste0(calls[[i]][[1]], "(", paste(names(calls[[i]][[2]]), collapse = ", "), ")")
    expect_true("alexnet_error" %in% results[[i]]$class, label = paste(label, results[[i]]$message))
    expect_match(results[[i]]$message, calls[[i]][[3]], label = label)
    expect_false(results[[i]]$python, label = label)
  }
})

test_that("arguments given through ... are checked by name; unknown ones are left to the core", {
  args <- local({
    f <- function(batch_size = 32, ...) alexnet:::checked_args("alexnet_train", names(formals()))
    f(image_size = 96, something_new = NA, checkpoint_dir = "/tmp/ckpt")
  })
  expect_identical(args, list(image_size = 96L, something_new = NA, checkpoint_dir = "/tmp/ckpt"))
  expect_error(alexnet_train(epochs = 1, model_dir = c("a", "b")), '`model_dir` .* not c\\("a", "b"\\)',
               class = "alexnet_error")
  expect_error(alexnet_spark_train(fake_connection, workers = 1, image_size = NA), "`image_size` .* not NA",
               class = "alexnet_error")
})

test_that("alexnet_spark_train() without a Spark connection says to pass sparklyr::spark_connect()", {
  for (sc in list("local", NULL, list(master = "local"))) {
    expect_error(alexnet_spark_train(sc, workers = 2), "`sc` must be a Spark connection.*sparklyr::spark_connect",
                 class = "alexnet_error")
  }
  expect_error(alexnet_spark_train(workers = 2), "`sc` is missing", class = "alexnet_error")
  # the connection and the workers, said alike by each Spark job
  expect_error(alexnet_spark_evaluate(model = "m", workers = 2), "^`sc` is missing: pass the connection",
               class = "alexnet_error")
  fake <- structure(list(), class = "spark_connection")
  for (job in list(function() alexnet_spark_train(fake), function() alexnet_spark_evaluate(fake, "m"))) {
    expect_error(job(), "^`workers` is missing: give the number of workers, one barrier task each\\.$",
                 class = "alexnet_error")
  }
  # called with nothing: the first argument a call needs is named, before any other
  expect_error(alexnet_spark_evaluate(), "^`sc` is missing: pass the connection", class = "alexnet_error")
  installed <- requireNamespace("sparklyr", quietly = TRUE)
  expect_identical(grepl("install.packages(\"sparklyr\")",
                         conditionMessage(tryCatch(alexnet_spark_train(), error = identity)), fixed = TRUE),
                   !installed)
  expect_error(alexnet_history(), "^`checkpoint_dir` is missing: give the `checkpoint_dir` a training wrote",
               class = "alexnet_error")
  expect_error(tf_config_from_barrier(), "^`barrier` is missing: pass the barrier list", class = "alexnet_error")
  expect_error(alexnet_train(NULL), "^the first argument is NULL and `data` is not given: pass the partition",
               class = "alexnet_error")
  expect_error(NULL %>% alexnet_train(epochs = 1), "^the first argument is NULL", class = "alexnet_error")
  expect_error(alexnet_train(data = "/d", batch_size = NULL), "^`batch_size` must be a whole number >= 1, not NULL",
               class = "alexnet_error")
  expect_error(imagenet_synthetic(), "^`dest` is missing: give the folder", class = "alexnet_error")
  # training and evaluation take a partition; the benchmark, a partition or an ImageNet folder
  expect_error(alexnet_train(data = "/some/folder"),
               "^`data` must be a partition \\(a list such as imagenet_partition\\(\\) returns\\) or NULL, not",
               class = "alexnet_error")
  expect_error(alexnet_evaluate("m", data = "/some/folder"), "`data` must be a partition .* or NULL, not",
               class = "alexnet_error")
})

test_that("a partition first takes `data`, and the arguments after it the usage line's places from batch_size on", {
  part <- list(image = "a.JPEG", category = "n1", categories = "n1")
  # wrong values on purpose: R names the argument each one reached, before any Python runs
  expect_error(alexnet_train(part, "eight"), "`batch_size` must be", class = "alexnet_error")
  expect_error(alexnet_train(part, 8, "one"), "`epochs` must be", class = "alexnet_error")
  expect_error(alexnet_train(part, 8, 1, 7), "`strategy` must be", class = "alexnet_error")
  expect_error(alexnet_train(part, epochs = "one"), "`epochs` must be", class = "alexnet_error")
  expect_error(alexnet_train(part, 8, image_size = "big"), "`image_size` must be", class = "alexnet_error")
  expect_error(part %>% alexnet_train(epochs = "one"), "`epochs` must be", class = "alexnet_error")
  expect_error(alexnet_train(part, batch_size = 8, "one"), "`epochs` must be", class = "alexnet_error")
  # without a partition first, positions follow the usage line
  expect_error(alexnet_train("eight"), "`batch_size` must be", class = "alexnet_error")
  expect_error(alexnet_train(8, "one"), "`epochs` must be", class = "alexnet_error")
  # given twice, really
  expect_error(alexnet_train(part, data = part), "`data` was given twice", class = "alexnet_error")
})

test_that("the rule of a partition first reaches the core by name", {
  env <- local({
    f <- function(batch_size = 32, epochs = 2, data = NULL, strategy = NULL, parallel = NULL, ...) environment()
    f(list(image = "a"), 8, 1, image_size = 64)
  })
  args <- alexnet:::data_first_args(quote(alexnet_train(d, 8, 1, image_size = 64)), env)
  expect_equal(args, list(data = list(image = "a"), batch_size = 8, epochs = 1, image_size = 64))
})

test_that("a misspelt strategy is refused with the closest name before TensorFlow is imported", {
  skip_if_no_alexnet()
  got <- run_fresh_r(function() {
    library(alexnet)
    part <- list(image = "a.JPEG", category = "n1", categories = "n1")
    said <- tryCatch(alexnet_train(data = part, strategy = "mirored"), alexnet_error = conditionMessage)
    list(said = said, tensorflow = reticulate::py_eval("'tensorflow' in __import__('sys').modules"))
  })
  expect_identical(got$said, paste0("`strategy` must be NULL, one of \"default\", \"mirrored\", \"multi_worker\" or a ",
                                    "tf.distribute.Strategy object, not `mirored` (did you mean `mirrored`?)."))
  expect_false(got$tensorflow)
})
