# The articles are installed with the package (built from the precomputed vignettes/*.Rmd, without Python), and
# their code ran when they were knitted.

test_that("the installed package lists both articles, with their figures", {
  skip_if(is.null(utils::packageDescription("alexnet")$Packaged),
          "alexnet was installed from a source folder, not from a package built by R CMD build")
  articles <- utils::vignette(package = "alexnet")$results
  expect_setequal(articles[, "Item"], c("training-imagenet", "distributed-training"))
  for (name in articles[, "Item"]) {
    html <- system.file("doc", paste0(name, ".html"), package = "alexnet")
    expect_true(file.exists(html), info = name)
    expect_gt(file.size(html), 10000)
  }
  training <- paste(readLines(system.file("doc", "training-imagenet.html", package = "alexnet"), warn = FALSE),
                    collapse = "\n")
  expect_match(training, "<img src=\"data:image/png;base64,", fixed = TRUE)  # the figures travel inside
})
