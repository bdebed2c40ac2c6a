# The training settings reach R from the core's declaration (R/settings.R, generated from it): each one is an
# argument of alexnet_train() and alexnet_spark_train() with the declared kind and default, is documented on
# ?alexnet_train, and a bad value of it stops alexnet_train() with an alexnet_error naming it. The walk is over the
# declaration, so a setting added there alone is covered. (Python's side: python/tests/test_settings.py.)

# A value of each setting that the declaration refuses (NULL where every value of its type is taken).
bad_setting <- function(setting) {
  kind <- sub("\\?$", "", setting$kind)
  least <- if (grepl(">=", kind, fixed = TRUE)) as.numeric(sub("^.*>=", "", kind)) else NULL
  base <- sub(">=.*$", "", kind)
  switch(base,
    count = if (!is.null(least)) least - 1 else 1.5,
    counts = c(if (is.null(least)) -1 else least - 1),
    number = -1,
    choice = "nonsense",
    location = "",
    string = "categories",
    numbers = c(5, 2),
    NULL
  )
}

test_that("every training setting is an argument of both training functions, with the declared kind", {
  kinds <- alexnet:::argument_kinds
  for (fun in c("alexnet_train", "alexnet_spark_train")) {
    for (name in names(training_settings <- alexnet:::training_settings)) {
      expect_identical(unname(kinds[[fun]][name]), training_settings[[name]]$kind, label = paste0(fun, "(", name, ")"))
    }
  }
  for (name in names(alexnet:::argument_choices)) {
    expect_identical(alexnet:::argument_choices[[name]], alexnet:::training_settings[[name]]$choices)
  }
})

test_that("alexnet_train()'s own formals have the declared defaults", {
  formals <- formals(alexnet_train)
  settings <- alexnet:::training_settings
  for (name in intersect(names(formals), names(settings))) {
    expect_identical(eval(formals[[name]]), settings[[name]]$default, label = name)
  }
})

test_that("?alexnet_train documents every training setting with its default", {
  expect_documented(names(alexnet:::training_settings), "alexnet_train")
})

test_that("a bad value of every setting stops alexnet_train() with an alexnet_error naming it", {
  skip_if_no_alexnet()
  settings <- alexnet:::training_settings
  data <- list(image = "/nowhere/a.JPEG", category = "n00000001", categories = "n00000001")
  tried <- 0L
  for (name in names(settings)) {
    bad <- bad_setting(settings[[name]])
    if (is.null(bad)) next
    args <- list(data = data)
    args[[name]] <- bad
    error <- tryCatch({
      do.call(alexnet_train, args)
      NULL
    }, error = identity)
    expect_s3_class(error, "alexnet_error")
    expect_match(conditionMessage(error), if (name == "model_pin") "model_pin" else paste0("`", name, "`"),
                 fixed = TRUE, label = name)
    tried <- tried + 1L
  }
  expect_gt(tried, 25L)
})
