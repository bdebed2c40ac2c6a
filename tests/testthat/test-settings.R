# The training settings reach R from the core's declaration (R/settings.R, generated from it): each one is an
# argument of alexnet_train() and alexnet_spark_train() with the declared kind and default, is documented on
# ?alexnet_train, and a bad value of it stops alexnet_train() with an alexnet_error naming it. The walk is over the
# declaration, so a setting added there alone is covered. (Python's side: python/tests/test_settings.py.)

test_that("every training setting is an argument of both training functions, with the declared kind", {
  kinds <- alexnet:::argument_kinds
  for (fun in c("alexnet_train", "alexnet_spark_train")) {
    for (name in names(training_settings <- alexnet:::training_settings)) {
      expect_identical(unname(kinds[[fun]][name]), training_settings[[name]]$kind, label = paste0(fun, "(", name, ")"))
    }
  }
  # a choice's values are its declaration's, the same wherever a setting of that name is declared
  for (name in names(alexnet:::argument_choices)) {
    for (table in list(alexnet:::training_settings, alexnet:::benchmark_settings)) {
      if (!is.null(table[[name]])) expect_identical(alexnet:::argument_choices[[name]], table[[name]]$choices)
    }
  }
})

test_that("alexnet_train()'s own formals have the declared defaults", {
  formals <- formals(alexnet_train)
  settings <- alexnet:::training_settings
  for (name in intersect(names(formals), names(settings))) {
    expect_identical(eval(formals[[name]]), settings[[name]]$default, label = name)
  }
})

test_that("alexnet_train()'s usage line is the declared one: the places the core gives, then `...`", {
  expect_identical(names(formals(alexnet_train)), c(alexnet:::training_positional, "..."))
  expect_identical(alexnet:::training_formals, c("batch_size", "epochs", "parallel"))
  # the original r-tensorflow/alexnet's places: alexnet_train(64) sets `batch_size` (and see test-args.R)
  expect_identical(alexnet:::training_positional[1:3], c("batch_size", "epochs", "data"))
})

test_that("?alexnet_train documents every training setting with its default, once", {
  expect_documented(names(alexnet:::training_settings), "alexnet_train")
  # the settings that are formals are arguments, with the declaration's help; the others are listed in a section
  formals <- alexnet:::training_formals
  expect_arguments_documented(formals, "alexnet_train")
  rd <- tools::Rd_db("alexnet")[["alexnet_train.Rd"]]
  text <- gsub("\\s+", " ", paste(utils::capture.output(tools::Rd2txt(rd)), collapse = " "))
  for (name in names(alexnet:::training_settings)) {
    listed <- grepl(paste0("['`\u2018]", name, "['`\u2019] \\(default "), text)
    expect_identical(listed, !name %in% formals, label = name)
  }
  help <- alexnet:::training_settings$batch_size$help
  expect_match(text, substring(help, 2L, 40L), fixed = TRUE)
  expect_length(gregexpr(substring(help, 2L, 40L), text, fixed = TRUE)[[1]], 1L)
})

test_that("a name declared twice with other choices stops the build; with the same ones it is one setting", {
  same <- list(precision = list(kind = "choice?", choices = c("a", "b")), crops = list(kind = "count", choices = 1),
               precision = list(kind = "choice", choices = c("a", "b")), crops = list(kind = "count", choices = 2))
  expect_identical(alexnet:::declared_choices(same), list(precision = c("a", "b")))
  other <- list(precision = list(kind = "choice?", choices = c("a", "b")),
                precision = list(kind = "choice", choices = c("a", "c")))
  expect_error(alexnet:::declared_choices(other), "`precision` is declared with other choices")
})

test_that("a bad value of every setting stops alexnet_train() with an alexnet_error naming it", {
  skip_if_no_alexnet()
  data <- list(image = "/nowhere/a.JPEG", category = "n00000001", categories = "n00000001")
  tried <- expect_settings_refused(alexnet_train, alexnet:::training_settings, list(data = data))
  expect_gt(tried, 25L)
})
