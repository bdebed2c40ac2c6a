# The command line's summary of a result and R's print of the same result say the same lines in the same words
# (python/alexnet/cli/*.py and R's print methods): each front end names things its own way only where it must, R
# saying which field holds what the command line lists.

py_result <- function(text) reticulate::import("json", convert = FALSE)$loads(text)

cli_lines <- function(module, summary, result) {
  strsplit(reticulate::py_to_r(reticulate::import(module, convert = FALSE)[[summary]](result)), "\n")[[1L]]
}

test_that("a synthetic ImageNet, an upload and a partition: the command line says what R prints", {
  skip_if_no_alexnet()
  synth <- py_result('{"path": "/data/imagenet", "layout": "archives", "classes": 3, "images": 1234, "val_images": 6,
    "bytes": 1234567, "categories": ["n01", "n02", "n03"], "quirks": {"cmyk": ["/a.JPEG"], "png": [], "empty": ["/e"]}}')
  expect_identical(cli_lines("alexnet.cli.data", "synth_summary", synth),
                   capture.output(print(alexnet:::new_alexnet_imagenet(alexnet:::simplify_py(reticulate::py_to_r(synth))))))

  upload <- py_result('{"board": "/boards/imagenet", "source": "/data/imagenet", "layout": "kaggle", "categories": 1003,
    "uploaded": ["n01440764", "n01443537"], "skipped": ["n01484850"], "val_uploaded": ["n01440764", "n01484850"],
    "excluded": [{"category": "n09", "images": 2}], "images": 12028, "val_images": 6, "bytes": 2500000,
    "uploaded_bytes": 1700000, "seconds": 2.34, "mb_per_s": 1234.5,
    "bad_images": [{"category": "n01440764", "split": "train", "file": "t.JPEG", "reason": "empty file"}],
    "pruned_versions": 2}')
  report <- alexnet:::simplify_py(reticulate::py_to_r(upload))  # as imagenet_upload() makes it
  report$bad_images <- alexnet:::records_table(report$bad_images, c(category = "character", split = "character",
                                                                    file = "character", reason = "character"))
  report$excluded <- alexnet:::records_table(report$excluded, c(category = "character", images = "integer"))
  printed <- capture.output(print(alexnet:::new_alexnet_upload(report)))
  said <- cli_lines("alexnet.cli.data", "upload_summary", upload)
  expect_identical(said[1:3], printed[1:3])
  expect_identical(printed[1], paste("ImageNet on board /boards/imagenet: 1,003 categories (2 uploaded, 1 already",
                                     "there, validation images of 1 added), 12,028 training images and 6 validation",
                                     "images, 2.5 MB"))
  expect_identical(said[3], "Wrote 1.7 MB in 2.3 s (1230 MB/s)")
  # what R has in a field the command line lists; the rest in the same words
  expect_identical(printed[-(1:3)], c("1 bad image left out (see $bad_images)",
                                      "1 category left out under `min_images` (see $excluded)",
                                      "2 older versions deleted"))
  expect_identical(said[-(1:3)], c("1 bad image left out:", "  n01440764/t.JPEG: empty file",
                                   "1 category left out under `min_images`: n09 (2)", "2 older versions deleted"))

  partition <- py_result('{"image": ["/c/n01/a.JPEG", "/c/n01/b.JPEG"], "category": ["n01", "n01"],
    "categories": ["n01"], "label": [0, 0], "num_classes": 4, "val_image": [], "partition": 1, "total": 2,
    "board": "/boards/imagenet", "cache_dir": "/c"}')
  expect_identical(cli_lines("alexnet.cli.data", "partition_summary", partition),
                   capture.output(print(alexnet:::new_alexnet_partition(alexnet:::simplify_py(
                     reticulate::py_to_r(partition))))))
})

test_that("an evaluation: the command line says what R prints, and lists the bad images R keeps in $bad_images", {
  skip_if_no_alexnet()
  evaluation <- py_result('{"images": 1000, "top1_correct": 612, "top5_correct": 850, "top1_accuracy": 0.612,
    "top5_accuracy": 0.85, "top_k": 5, "crops": 10, "protocol": "10 crops: corners, centre and their mirrors",
    "image_size": 224, "num_classes": 1000, "images_per_second": 81.24, "seconds": 12.3, "bad_images": ["/v/x.JPEG"],
    "model": "alexnet@v1", "workers": 2,
    "per_worker": [{"worker": 0, "images": 500, "top1_correct": 300, "top5_correct": 420, "seconds": 6.0},
                   {"worker": 1, "images": 500, "top1_correct": 312, "top5_correct": 430, "seconds": 6.1}],
    "per_class": [{"index": 0, "id": "n01", "name": "tench, Tinca tinca", "images": 2, "top1_correct": 1,
                   "top5_correct": 2, "top1_accuracy": 0.5, "top5_accuracy": 1.0, "confused_with": "n02",
                   "confused_images": 1},
                  {"index": 1, "id": "n02", "name": "goldfish", "images": 1, "top1_correct": 1, "top5_correct": 1,
                   "top1_accuracy": 1.0, "top5_accuracy": 1.0, "confused_with": "", "confused_images": 0}],
    "confusions": [{"index": 0, "id": "n01", "name": "tench, Tinca tinca", "predicted_index": 1, "predicted_id": "n02",
                    "predicted_name": "goldfish", "images": 1}]}')
  printed <- capture.output(print(alexnet:::new_alexnet_evaluation(reticulate::py_to_r(evaluation))))
  said <- cli_lines("alexnet.cli.model", "evaluation_summary", evaluation)
  expect_identical(said, c(printed, "Bad images left out:", "  /v/x.JPEG"))
  expect_match(printed[[2]], "; 2 workers; 1 bad image left out$")
})
