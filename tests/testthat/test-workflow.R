# The seed's flow from R on a synthetic ImageNet and a local folder board: upload, categories,
# partition, train (piped, as the seed writes it), plot.

workflow_board <- function(dir) {
  src <- imagenet_synthetic(file.path(dir, "imagenet"), classes = 3, images_per_class = 10,
                            val_per_class = 2, quirks = TRUE, max_side = 96)
  board <- file.path(dir, "board")
  # the odd files (an empty one, one cut off) are named as they are left out
  expect_warning(report <- imagenet_upload(src$path, board = board, workers = 2),
                 "^2 bad images left out .*\n  n[0-9]+/n[0-9_]+\\.JPEG: empty file", class = "alexnet_warning")
  list(src = src, board = board, report = report)
}

test_that("imagenet_upload() makes its scratch folder where `scratch` says, and refuses one that is not local", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "src"), classes = 2, images_per_class = 3, val_per_class = 1,
                            max_side = 48)
  scratch <- file.path(dir, "disk", "scratch")
  report <- imagenet_upload(src$path, board = file.path(dir, "board"), workers = 2, scratch = scratch)
  expect_equal(report$categories, 2)
  expect_true(dir.exists(scratch))
  expect_length(list.files(scratch, all.files = TRUE, no.. = TRUE), 0)
  expect_error(imagenet_upload(src$path, board = file.path(dir, "other"), scratch = "gs://bucket/tmp"),
               '`scratch` = "gs://bucket/tmp" is not a local folder', class = "alexnet_error", fixed = TRUE)
  expect_false(dir.exists(file.path(dir, "other")))
})

test_that("upload, categories and partition work from R and give R types", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  setup <- workflow_board(dir)
  expect_s3_class(setup$report$bad_images, "data.frame")
  expect_setequal(basename(setup$report$bad_images$file),
                  basename(unlist(setup$src$quirks[c("truncated", "empty")])))

  expect_documented(names(setup$report), "imagenet_upload")
  expect_documented(names(setup$report$bad_images), "imagenet_upload")
  expect_documented(names(setup$src), "imagenet_synthetic")
  categories <- imagenet_categories(setup$board)
  expect_s3_class(categories, "data.frame")
  expect_equal(ncol(categories), 11L)
  expect_documented(names(categories), "imagenet_categories")
  expect_equal(categories$id, sort(setup$src$categories))
  expect_equal(categories$index, 0:2)
  expect_match(capture.output(print(categories))[1], "^3 categories: [0-9]+ training images and [0-9]+ validation")
  expect_false(any(grepl("sha256", capture.output(print(categories)))))  # short: no 64-character hashes
  expect_identical(class(as.data.frame(categories)), "data.frame")
  # a subset of its columns prints those columns (its print took `name` and `images` for granted), and of its rows
  # says how many those are
  some <- capture.output(print(categories[, c("id", "sha256")]))
  expect_equal(some[1], "3 categories")
  expect_true(any(grepl(categories$id[1], some, fixed = TRUE)))
  expect_true(any(grepl(paste0(substr(categories$sha256[1], 1, 9), "..."), some, fixed = TRUE)))
  expect_match(capture.output(print(categories[, c("id", "images")]))[1], "^3 categories: [0-9]+ training images$")
  expect_match(capture.output(print(categories[1, ]))[1], "^1 category: [0-9]+ training images and ")

  parts <- lapply(0:1, function(p) {
    imagenet_partition(partition = p, total = 2, board = setup$board, cache_dir = file.path(dir, "cache"))
  })
  expect_documented(names(parts[[1]]), "imagenet_partition")
  expect_type(parts[[1]]$image, "character")
  expect_true(all(file.exists(parts[[1]]$image)))
  expect_setequal(c(parts[[1]]$categories, parts[[2]]$categories), categories$id)
  expect_length(intersect(parts[[1]]$categories, parts[[2]]$categories), 0L)
  expect_equal(parts[[1]]$num_classes, 3L)
  expect_equal(parts[[2]]$label, categories$index[match(parts[[2]]$category, categories$id)])

  expect_error(imagenet_partition(partition = 2, total = 2, board = setup$board), "0\\.\\.1")

  # the board's validation images alone (into the same cache): all of them, and two shares that add up to them
  all_val <- imagenet_validation(board = setup$board, cache_dir = file.path(dir, "cache"))
  expect_s3_class(all_val, "alexnet_validation")
  expect_documented(names(all_val), "imagenet_validation")
  expect_setequal(all_val$val_image, c(parts[[1]]$val_image, parts[[2]]$val_image))
  expect_true(all(file.exists(all_val$val_image)))
  expect_equal(all_val$val_label, categories$index[match(all_val$val_category, categories$id)])
  expect_output(print(all_val), paste0("^All the board's validation images: ", length(all_val$val_image),
                                       " images of 3 categories \\(of 3\\)"))
  shares <- lapply(0:1, function(p) imagenet_validation(p, 2, board = setup$board, cache_dir = file.path(dir, "cache")))
  expect_setequal(unlist(lapply(shares, `[[`, "val_image")), all_val$val_image)
  expect_equal(nrow(as.data.frame(shares[[1]])), length(shares[[1]]$val_image))
  expect_error(imagenet_validation(workers = 0, board = setup$board), "`workers` must be a whole number >= 1",
               class = "alexnet_error")

  # the report names the source read as `source`; given by its old name, `path`, the same upload, with a warning
  expect_equal(normalizePath(setup$report$source), normalizePath(setup$src$path))
  expect_null(setup$report$path)
  expect_warning(renamed <- imagenet_upload(path = setup$src$path, board = setup$board, workers = 2),
                 "`path` is now `source`", fixed = TRUE)
  expect_equal(renamed$source, setup$report$source)
  expect_length(renamed$uploaded, 0L)
  expect_setequal(renamed$skipped, categories$id)

  # uploading re-encoded copies, keeping one version per pin: the originals leave the board
  expect_warning(again <- imagenet_upload(setup$src$path, board = setup$board, workers = 2, resize = 64,
                                          keep_versions = 1),
                 "^2 bad images left out", class = "alexnet_warning")  # read again, named again
  expect_setequal(again$uploaded, categories$id)
  expect_gte(again$pruned_versions, 3L)
  versions <- list.dirs(file.path(setup$board, categories$id[1]), recursive = FALSE)
  expect_length(versions, 1L)
  expect_error(imagenet_upload(setup$src$path, board = setup$board, keep_versions = 0), "keep_versions")
})

test_that("R's pins reads every version of a board served over http, through the manifest an upload writes", {
  skip_if_no_alexnet()
  skip_if_not_installed("pins")
  dir <- withr::local_tempdir()
  src <- imagenet_synthetic(file.path(dir, "imagenet"), classes = 2, images_per_class = 3, val_per_class = 1,
                            max_side = 48)
  board <- file.path(dir, "served", "board")
  imagenet_upload(src$path, board = board)
  first <- imagenet_categories(board)
  # one more image in a category: its zip and the categories table get a second version
  wnid <- src$categories[[1]]
  folder <- file.path(src$path, "ILSVRC", "Data", "CLS-LOC", "train", wnid)
  file.copy(list.files(folder, full.names = TRUE)[[1]], file.path(folder, paste0(wnid, "_99999.JPEG")))
  expect_equal(imagenet_upload(src$path, board = board)$uploaded, wnid)
  second <- imagenet_categories(board)

  # the board's folder served over http by Python's own server, in a process of its own
  port <- free_port()
  subprocess <- reticulate::import("subprocess")
  server <- subprocess$Popen(c(reticulate::py_config()$python, "-m", "http.server", as.character(port),
                               "--bind", "127.0.0.1", "--directory", file.path(dir, "served")),
                             stdout = subprocess$DEVNULL, stderr = subprocess$DEVNULL)
  withr::defer({
    server$terminate()
    server$wait(timeout = 10)
  })
  url <- sprintf("http://127.0.0.1:%d/board/", port)
  answers <- function() {
    !is.null(tryCatch(readLines(paste0(url, "_pins.yaml"), warn = FALSE), error = function(e) NULL,
                      warning = function(w) NULL))
  }
  for (attempt in 1:100) if (!answers()) Sys.sleep(0.1)
  expect_true(answers())

  served <- pins::board_url(url, cache = file.path(dir, "pins-cache"))
  tables <- pins::pin_versions(served, "categories")$version
  expect_length(tables, 2L)
  expect_equal(pins::pin_versions(served, wnid)$version, c(first$version[[1]], second$version[[1]]))
  expect_equal(pins::pin_versions(served, src$categories[[2]])$version, second$version[[2]])
  # the older table, and the older zip it names, are read over http as the newer ones are
  old <- pins::pin_read(served, "categories", version = tables[[1]])
  expect_equal(old$version, first$version)
  expect_equal(pins::pin_read(served, "categories")$version, second$version)
  zip <- pins::pin_download(served, wnid, version = first$version[[1]])
  expect_equal(unname(tools::md5sum(zip)),
               unname(tools::md5sum(file.path(board, wnid, first$version[[1]], paste0(wnid, ".zip")))))
})

test_that("imagenet_upload()'s `source`, given by its old name `path`, warns; both names are an error", {
  # checked in R, before any Python: the value given as `path` is checked as `source`
  expect_warning(
    expect_error(imagenet_upload(path = NA_character_), "`source` must be one path or URL", class = "alexnet_error"),
    "`path` is now `source`: write imagenet_upload(source = ...).", fixed = TRUE
  )
  both <- "Give `source` only: `path` is its old name"
  expect_error(imagenet_upload("/nowhere/imagenet", path = "/nowhere/imagenet"), both, fixed = TRUE,
               class = "alexnet_error")
  expect_error(imagenet_upload(source = "/nowhere/imagenet", path = "/nowhere/imagenet"), both, fixed = TRUE,
               class = "alexnet_error")
})

test_that("imagenet_partition() %>% alexnet_train() returns a history that prints and plots", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  setup <- workflow_board(dir)
  history <- imagenet_partition(partition = 0, total = 1, board = setup$board,
                                cache_dir = file.path(dir, "cache")) %>%
    alexnet_train(parallel = 2, epochs = 2, batch_size = 8, image_size = 96, verbose = 0,
                  model_dir = file.path(dir, "model"))
  expect_s3_class(history, "alexnet_history")
  expect_length(history$metrics$accuracy, 2L)
  expect_true(all(is.finite(history$metrics$loss)))
  expect_length(history$metrics$val_accuracy, 2L)
  expect_equal(history$params$num_classes, 3L)

  expect_output(print(history), "2 epochs")
  df <- as.data.frame(history)
  expect_true(all(c("loss", "accuracy") %in% df$metric))
  file <- file.path(dir, "history.png")
  grDevices::png(file, width = 480, height = 960)
  plot(history, metrics = c("loss", "accuracy"))
  grDevices::dev.off()
  skip_if_not_installed("png")
  image <- png::readPNG(file)
  expect_equal(dim(image)[1:2], c(960L, 480L))
  for (colour in c("#1b6ca8", "#d1495b")) {  # the training and the validation curve, in both panels
    rgb <- grDevices::col2rgb(colour)[, 1] / 255
    hit <- abs(image[, , 1] - rgb[[1]]) < 0.03 & abs(image[, , 2] - rgb[[2]]) < 0.03 & abs(image[, , 3] - rgb[[3]]) < 0.03
    rows <- which(rowSums(hit) > 0)
    expect_true(any(rows < 480) && any(rows > 480), info = colour)
  }
})

test_that("the original r-tensorflow/alexnet's list built from the board's pins with pins 1.x trains on their images", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  setup <- workflow_board(dir)
  # the zips' files are extracted into the user cache: this test's own
  environ <- reticulate::import("os")$environ
  before <- environ$get("XDG_CACHE_HOME")
  environ$`__setitem__`("XDG_CACHE_HOME", file.path(dir, "user-cache"))
  withr::defer(if (is.null(before)) environ$pop("XDG_CACHE_HOME") else environ$`__setitem__`("XDG_CACHE_HOME", before))
  categories <- imagenet_categories(board = setup$board)$id
  # pins 1.x: pin_download() gives the file a category's pin holds, its zip, where pins 0.x's pin_get() extracted it
  pin_download <- if (requireNamespace("pins", quietly = TRUE)) {
    function(cat) pins::pin_download(pins::board_folder(setup$board), cat)
  } else {
    function(cat) Sys.glob(file.path(setup$board, cat, "*", paste0(cat, ".zip")))
  }
  data <- list(
    image = unlist(lapply(categories, function(cat) pin_download(cat))),
    category = unlist(lapply(categories, function(cat) rep(cat, length(pin_download(cat))))),
    categories = categories
  )
  expect_true(all(grepl("\\.zip$", data$image)))
  result <- suppressWarnings(alexnet_train(data = data, epochs = 1, batch_size = 4, image_size = 64, verbose = 0))
  expect_equal(result$params$train_images + length(result$bad_images),
               sum(imagenet_categories(board = setup$board)$images))
  expect_equal(result$params$num_classes, length(categories))
  expect_true(all(startsWith(result$bad_images, file.path(dir, "user-cache", "alexnet", "unzipped"))))
})

test_that("the original r-tensorflow/alexnet's hand-made data list and a strategy made through reticulate are accepted", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  setup <- workflow_board(dir)
  part <- imagenet_partition(partition = 0, total = 1, board = setup$board, cache_dir = file.path(dir, "cache"))
  data <- list(image = part$image, category = part$category, categories = part$categories)

  tf <- reticulate::import("tensorflow")
  strategy <- tf$distribute$MirroredStrategy(cross_device_ops = tf$distribute$ReductionToOneDevice())
  # the original's call keeps no model, which is said
  expect_warning(result <- alexnet::alexnet_train(data = data, strategy = strategy, parallel = 2, epochs = 1,
                                                  batch_size = 8, image_size = 96, verbose = 0),
                 "Nothing of this run is kept once it ends", fixed = TRUE)
  expect_length(result$metrics$accuracy, 1L)
  expect_equal(result$params$num_classes, length(part$categories))

  expect_error(alexnet_train(data = list(image = "a.JPEG")), "`data\\$categories` is missing or empty")
  expect_error(alexnet_train(data = data, strategy = "nope", epochs = 1), "nope")
})
