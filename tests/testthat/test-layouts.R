# ImageNet as people have it, from R: the class list, and a synthetic ImageNet written as the official archives,
# Kaggle's zip and Hugging Face's parquet shards uploads to the board its extracted tree gives.

test_that("imagenet_classes() is the table of the 1000 ILSVRC2012 classes in label order", {
  skip_if_no_alexnet()
  classes <- imagenet_classes()
  expect_s3_class(classes, "data.frame")
  expect_equal(names(classes), c("index", "id", "name"))
  expect_documented(names(classes), "imagenet_classes")
  expect_equal(nrow(classes), 1000L)
  expect_identical(classes$index, 0:999)
  expect_identical(classes$id, sort(classes$id))
  expect_equal(anyDuplicated(classes$id), 0L)
  expect_equal(classes$name[classes$id == "n01440764"], "tench, Tinca tinca")
})

test_that("each layout uploads the categories, labels and zips of the extracted tree", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  sizes <- list(classes = 3, images_per_class = 3, val_per_class = 1, max_side = 32, seed = 2)
  kaggle <- do.call(imagenet_synthetic, c(list(file.path(dir, "kaggle")), sizes))
  expected <- imagenet_categories(imagenet_upload(kaggle$path, board = file.path(dir, "board-kaggle"))$board)
  compared <- c("id", "name", "index", "images", "sha256", "val_images", "val_sha256")
  for (layout in c("archives", "kaggle_zip", "kaggle_targz", "parquet", "imagefolder")) {
    src <- do.call(imagenet_synthetic, c(list(file.path(dir, layout)), sizes, layout = layout))
    expect_equal(src$layout, layout)
    expect_output(print(src), paste0("(", layout, " layout)"), fixed = TRUE)
    report <- imagenet_upload(src$path, board = file.path(dir, paste0("board-", layout)))
    expect_equal(report$layout, layout)
    expect_equal(imagenet_categories(report$board)[compared], expected[compared], info = layout)
  }
  expect_error(imagenet_synthetic(file.path(dir, "x"), layout = "tarball"), "layout")
})

test_that("an upload without validation images warns with where its layout keeps them", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "archives"), classes = 2, images_per_class = 2, val_per_class = 0,
                            max_side = 32, layout = "archives")
  expect_warning(report <- imagenet_upload(src$path, board = file.path(dir, "board")),
                 "ILSVRC2012_img_val.tar and ILSVRC2012_devkit_t12.tar.gz beside ILSVRC2012_img_train.tar",
                 fixed = TRUE, class = "alexnet_warning")
  expect_equal(report$val_images, 0L)
  with_val <- imagenet_synthetic(file.path(dir, "with-val"), classes = 2, images_per_class = 2, val_per_class = 1,
                                 max_side = 32, layout = "archives")
  expect_no_warning(imagenet_upload(with_val$path, board = file.path(dir, "board-val")))
})

test_that("the categories left out under min_images are a data frame, as the bad images are", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "folders"), classes = 2, images_per_class = 3, max_side = 32,
                            layout = "folders")
  first <- sort(list.dirs(src$path, recursive = FALSE))[[1]]
  unlink(utils::head(sort(list.files(first, full.names = TRUE)), 2L))  # one image left of the first category
  report <- suppressWarnings(imagenet_upload(src$path, board = file.path(dir, "board"), min_images = 2))
  expect_equal(report$excluded, data.frame(category = basename(first), images = 1L, stringsAsFactors = FALSE))
  expect_output(print(report), "1 category left out under `min_images` (see $excluded)", fixed = TRUE)
  again <- suppressWarnings(imagenet_upload(src$path, board = file.path(dir, "board-all")))
  expect_equal(again$excluded, data.frame(category = character(), images = integer(), stringsAsFactors = FALSE))
  expect_named(again$bad_images, c("category", "split", "file", "reason"))
})
