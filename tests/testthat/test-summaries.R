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

  # a partition made by hand, and fetched ones: what was downloaded, or nothing (the cache held it all)
  for (fetched in c("", ', "downloaded_bytes": 2345678, "seconds": 1.25', ', "downloaded_bytes": 0, "seconds": 0.01')) {
    partition <- py_result(paste0('{"image": ["/c/n01/a.JPEG", "/c/n01/b.JPEG"], "category": ["n01", "n01"],
      "categories": ["n01"], "label": [0, 0], "num_classes": 4, "val_image": [], "partition": 1, "total": 2,
      "board": "/boards/imagenet", "cache_dir": "/c"', fetched, '}'))
    printed <- capture.output(print(alexnet:::new_alexnet_partition(alexnet:::simplify_py(
      reticulate::py_to_r(partition)))))
    expect_identical(cli_lines("alexnet.cli.data", "partition_summary", partition), printed)
    expect_identical(printed[3], c(NA, "Downloaded 2.3 MB in 1.2 s",
                                   "Nothing downloaded: every category was in the cache")[match(fetched, c(
                                     "", ', "downloaded_bytes": 2345678, "seconds": 1.25',
                                     ', "downloaded_bytes": 0, "seconds": 0.01'))])
  }
  # a board's validation images fetched alone: all of them, or a share
  for (share in c('"partition": 0, "total": 1, "left_out_at_upload": 2', '"partition": 1, "total": 3')) {
    validation <- py_result(paste0('{"val_image": ["/c/n01/v1.JPEG", "/c/n02/v2.JPEG"], "val_label": [0, 1],
      "val_category": ["n01", "n02"], "categories": ["n01", "n02"], "num_classes": 4, "board": "/boards/imagenet",
      "cache_dir": "/c", ', share, '}'))
    fetched <- structure(alexnet:::simplify_py(reticulate::py_to_r(validation)),
                         class = c("alexnet_validation", "alexnet_partition"))
    expect_identical(cli_lines("alexnet.cli.data", "validation_summary", validation), capture.output(print(fetched)))
    if (!is.null(fetched$left_out_at_upload)) {
      expect_identical(capture.output(print(fetched))[3],
                       "2 validation images left out at upload (the board's bad_images pin names them)")
    }
  }
  expect_identical(capture.output(print(fetched)),
                   c("Share 1 of 3 (0-based) of the board's validation images: 2 images of 2 categories (of 4)",
                     "From board /boards/imagenet, cache /c"))
})

test_that("an evaluation: the command line says what R prints, and lists the bad images R keeps in $bad_images", {
  skip_if_no_alexnet()
  evaluation_text <- '{"images": 1000, "top1_correct": 612, "top5_correct": 850, "top1_accuracy": 0.612,
    "top5_accuracy": 0.85, "top_k": 5, "crops": 10, "protocol": "10 crops: corners, centre and their mirrors",
    "image_size": 224, "num_classes": 1000, "images_per_second": 81.24, "seconds": 12.3, "bad_images": ["/v/x.JPEG"],
    "left_out_at_upload": 3, "model": "alexnet@v1", "workers": 2,
    "per_worker": [{"worker": 0, "images": 500, "top1_correct": 300, "top5_correct": 420, "seconds": 6.0},
                   {"worker": 1, "images": 500, "top1_correct": 312, "top5_correct": 430, "seconds": 6.1}],
    "per_class": [{"index": 0, "id": "n01", "name": "tench, Tinca tinca", "images": 2, "top1_correct": 1,
                   "top5_correct": 2, "top1_accuracy": 0.5, "top5_accuracy": 1.0, "confused_with": "n02",
                   "confused_images": 1},
                  {"index": 1, "id": "n02", "name": "goldfish", "images": 1, "top1_correct": 1, "top5_correct": 1,
                   "top1_accuracy": 1.0, "top5_accuracy": 1.0, "confused_with": "", "confused_images": 0}],
    "confusions": [{"index": 0, "id": "n01", "name": "tench, Tinca tinca", "predicted_index": 1, "predicted_id": "n02",
                    "predicted_name": "goldfish", "images": 1}]}'
  evaluation <- py_result(evaluation_text)
  printed <- capture.output(print(alexnet:::new_alexnet_evaluation(reticulate::py_to_r(evaluation))))
  said <- cli_lines("alexnet.cli.model", "evaluation_summary", evaluation)
  expect_identical(said, c(printed, "Bad images left out:", "  /v/x.JPEG"))
  expect_match(printed[[2]], "; 2 workers; 1 bad image left out; 3 validation images left out at upload$")
  expect_identical(printed[[3]], "Lowest top-1: tench 50.0% (1 of 2)")  # goldfish, all right, is not low
  # a Spark evaluation's: the model scored and the attempt first, the rate the workers' own
  spark <- py_result(sub('"workers": 2,', '"workers": 2, "attempt": 3,', evaluation_text, fixed = TRUE))
  printed <- capture.output(print(alexnet:::new_alexnet_evaluation(reticulate::py_to_r(spark))))
  expect_identical(cli_lines("alexnet.cli.model", "evaluation_summary", spark),
                   c(printed, "Bad images left out:", "  /v/x.JPEG"))
  expect_identical(printed[1:3], c(
    "Evaluation of the model on every validation image of the board (alexnet@v1), on 2 Spark workers (attempt 3):",
    "Top-1 accuracy 61.2% (612 of 1,000 images), top-5 85.0% (850)",
    paste("10 crops: corners, centre and their mirrors; 224 pixels; 1,000 classes; 81.2 images/s over the slowest",
          "worker's 6.1 s; 2 workers; 1 bad image left out; 3 validation images left out at upload")))
  # not known, or none: nothing said
  for (left_out in c("null", "0")) {
    evaluation <- py_result(sub('"left_out_at_upload": 3', paste0('"left_out_at_upload": ', left_out),
                                evaluation_text, fixed = TRUE))
    printed <- capture.output(print(alexnet:::new_alexnet_evaluation(reticulate::py_to_r(evaluation))))
    expect_match(printed[[2]], "; 2 workers; 1 bad image left out$")
    expect_identical(cli_lines("alexnet.cli.model", "evaluation_summary", evaluation),
                     c(printed, "Bad images left out:", "  /v/x.JPEG"))
  }
})

test_that("a Spark evaluation's rows say where each worker's log is, as a Spark training's rows do", {
  skip_if_no_alexnet()
  # what each worker's score_share() returns, with the log its launch added; the core adds up their flat rows
  shares <- py_result('[
    {"worker": 0, "workers": 2, "images": 3, "top1_correct": 1, "top5_correct": 2, "top_k": 5, "crops": 1,
     "protocol": "centre crop", "image_size": 64, "num_classes": 4, "seconds": 1.5, "model": "m", "bad_images": [],
     "log": "node1:/tmp/alexnet-logs/worker0-20261207-120000-41.log"},
    {"worker": 1, "workers": 2, "images": 2, "top1_correct": 2, "top5_correct": 2, "top_k": 5, "crops": 1,
     "protocol": "centre crop", "image_size": 64, "num_classes": 4, "seconds": 1.2, "model": "m", "bad_images": [],
     "log": "node2:/tmp/alexnet-logs/worker1-20261207-120000-42.log"}]')
  core <- reticulate::import("alexnet.launch.evaluation", convert = FALSE)
  rows <- lapply(0:1, function(i) core$evaluate_row(reticulate::py_get_item(shares, i)))
  evaluation <- alexnet:::new_alexnet_evaluation(
    c(reticulate::py_to_r(core$combine_shares(rows, 2.0)), list(attempt = 1L)))
  expect_identical(as.data.frame(evaluation)$log, c("node1:/tmp/alexnet-logs/worker0-20261207-120000-41.log",
                                                    "node2:/tmp/alexnet-logs/worker1-20261207-120000-42.log"))
  expect_identical(as.data.frame(evaluation)$images, c(3L, 2L))
})

test_that("a training history: the command line says what R prints, the model and where a run resumed included", {
  skip_if_no_alexnet()
  # as the core's alexnet_train() returns it (python/alexnet/train/run.py), of a run resumed inside an epoch
  history <- py_result('{"params": {"strategy": "multi_worker", "replicas": 2, "workers": 2, "batch_size": 32,
      "global_batch_size": 64, "steps": 100, "image_size": 224, "num_classes": 1000, "epochs": 5, "initial_epoch": 2,
      "initial_step": 8, "checkpoint_dir": "/runs/1", "precision": "float32",
      "started_from": {"model": "alexnet@v1", "text": "Started from alexnet@v1: its weights in every layer."},
      "communication_advice": "With `adapt_communication` the run took `allreduce_precision` = \'bfloat16\'. To keep the workers busy: allreduce_pack_mb = 25 (overlap)."},
    "metrics": {"loss": [2.5, 1.41421356], "accuracy": [0.25, 0.5], "top5_accuracy": [0.75, 1.0],
      "val_loss": [0.5, 0.000123456], "val_accuracy": [0.25, 0.6], "val_top5_accuracy": [0.5, 0.0001],
      "val_images": [12000, 12000]},
    "schedule": {"image_size": [224, 224], "learning_rate": [0.01, 0.005],
      "summary": "image size 224, learning rate 0.01 -> 0.005, precision float32 (asked for)"},
    "best_epoch": 2, "weights_agree": false, "weights_sha256": "ab", "model_path": "/models/run/alexnet.keras",
    "model_pin": {"board": "/boards/imagenet", "name": "alexnet", "version": "20261204T021816Z-a7b93"}}')
  printed <- capture.output(print(alexnet:::new_alexnet_history(alexnet:::simplify_py(reticulate::py_to_r(history)))))
  # the same lines but the exchange's, which R says in R's words, each setting named as R code
  said <- cli_lines("alexnet.cli.train", "history_summary", history)
  expect_identical(said[-6], printed[-6])
  expect_identical(said[[6]], paste("Communication: With `adapt_communication` the run took `allreduce_precision` =",
                                    "'bfloat16'. To keep the workers busy: allreduce_pack_mb = 25 (overlap)."))
  expect_identical(printed, c(
    "AlexNet training history: 2 epochs, multi_worker strategy, 2 replicas",
    "batch_size: 32, global_batch_size: 64, steps: 100, image_size: 224, num_classes: 1000",
    "Resumed from /runs/1 at epoch 3, step 8.",
    "Started from alexnet@v1: its weights in every layer.",
    "Schedule: image size 224, learning rate 0.01 -> 0.005, precision float32 (asked for)",
    paste("Communication: With `adapt_communication` the run took allreduce_precision = \"bfloat16\". To keep the",
          "workers busy: allreduce_pack_mb = 25 (overlap)."),
    paste("Final epoch: loss = 1.414, accuracy = 0.5, top5_accuracy = 1, val_loss = 0.0001235, val_accuracy = 0.6,",
          "val_top5_accuracy = 1e-04 (validation over 12,000 images)"),
    "Kept the best epoch: 2 (val_accuracy = 0.6)",
    paste("The workers ended with different weights: the chief's model is the one saved and published (its log",
          "names the workers apart)."),
    "Weights: sha256 ab",
    "Model: /models/run/alexnet.keras",
    "Model pin: alexnet version 20261204T021816Z-a7b93 on /boards/imagenet"))

  # workers that ended with the same weights: said in the words of a Spark run's print
  agreed <- py_result('{"params": {"strategy": "multi_worker", "replicas": 2, "workers": 2},
    "metrics": {"loss": [1.0]}, "weights_agree": true, "weights_sha256": "ab", "model_path": null, "model_pin": null}')
  printed <- capture.output(print(alexnet:::new_alexnet_history(alexnet:::simplify_py(reticulate::py_to_r(agreed)))))
  expect_identical(cli_lines("alexnet.cli.train", "history_summary", agreed), printed)
  expect_identical(printed, c("AlexNet training history: 1 epoch, multi_worker strategy, 2 replicas",
                              "Final epoch: loss = 1", "Every worker holds the same weights",
                              "Weights: sha256 ab"))

  # a run that found every epoch done, of few classes (no top-5 accuracy), without a model saved or pinned
  done <- py_result('{"params": {"strategy": "default", "replicas": 1, "batch_size": 8, "image_size": [64, 96],
      "num_classes": 4, "epochs": 3, "initial_epoch": 3, "initial_step": 0, "checkpoint_dir": "/runs/2"},
    "metrics": {"loss": [1.2, 1.1, 1.0], "top5_accuracy": [1.0, 1.0, 1.0]}, "model_path": null, "model_pin": null}')
  printed <- capture.output(print(alexnet:::new_alexnet_history(alexnet:::simplify_py(reticulate::py_to_r(done)))))
  expect_identical(cli_lines("alexnet.cli.train", "history_summary", done), printed)
  expect_identical(printed, c("AlexNet training history: 3 epochs, default strategy, 1 replica",
                              "batch_size: 8, num_classes: 4",
                              paste("All 3 epochs were trained before, in /runs/2: nothing was left to train",
                                    "(a larger `epochs` trains further)."),
                              "Final epoch: loss = 1"))
})

test_that("a Spark run: the command line says from the core's rows what R prints from the workers' flat rows", {
  skip_if_no_alexnet()
  # what each worker's train_work() returns; R's frame holds their flat rows (train_row()), as the R workers send
  # them, each with the launch that succeeded
  results_text <- '[
    {"worker": 0, "workers": 2, "address": "10.0.0.1:4040", "tf_address": "10.0.0.1:8000", "chief": true,
     "categories": ["n01", "n02"], "train_images": 1042, "val_images": 4, "fetch_seconds": 1.5, "attempt": 2,
     "history": {"params": {"steps": 10, "global_batch_size": 64, "seconds": 30.0,
                            "communication_advice": "One exchange alone takes 2.92 s a step."},
                 "metrics": {"loss": [2.0, 1.4987], "accuracy": [0.3, 0.45], "val_accuracy": [0.2, 0.4]},
                 "images_per_second": 12.5, "weights_sha256": "abc", "model_path": "/m/alexnet.keras",
                 "model_pin": {"board": "/boards/b", "name": "m2", "version": "20261207T000000Z-abcde"},
                 "warnings": []}},
    {"worker": 1, "workers": 2, "address": "10.0.0.2:4040", "tf_address": "10.0.0.2:8001", "chief": false,
     "categories": ["n03"], "train_images": 40, "val_images": 0, "fetch_seconds": 1.2, "attempt": 2,
     "log": "node2:/tmp/alexnet-logs/worker1-20261207-120000-42.log",
     "history": {"params": {"steps": 10, "global_batch_size": 64, "seconds": 30.0},
                 "metrics": {"loss": [2.1, 1.51], "accuracy": [0.3, 0.4]},
                 "images_per_second": 12.34, "weights_sha256": "abc", "model_path": null, "warnings": []}}]'
  training <- reticulate::import("alexnet.launch.training", convert = FALSE)
  printed_of <- function(results) {
    flat <- lapply(0:1, function(i) {
      row <- reticulate::py_to_r(training$train_row(reticulate::py_get_item(results, i)))
      c(row, attempt = 2L)
    })
    capture.output(print(alexnet:::spark_train_result(alexnet:::records_to_df(flat))))
  }
  results <- py_result(results_text)
  printed <- printed_of(results)
  expect_identical(cli_lines("alexnet.cli.cluster", "_train_summary", results), printed)
  expect_identical(printed, c(
    "AlexNet trained on 2 Spark workers (attempt 2)",
    paste("  worker 0 (chief) at 10.0.0.1:8000: 2 categories, 1,042 images, 2 epochs, loss 1.499, accuracy 0.450,",
          "val_accuracy 0.400, 12.5 images/s"),
    paste("  worker 1 at 10.0.0.2:8001: 1 category, 40 images, 2 epochs, loss 1.510, accuracy 0.400, 12.3 images/s;",
          "log node2:/tmp/alexnet-logs/worker1-20261207-120000-42.log"),
    "Every worker holds the same weights",
    "Weights: sha256 abc",
    "Communication: One exchange alone takes 2.92 s a step.",
    "Model: /m/alexnet.keras",
    "Model pin: m2 version 20261207T000000Z-abcde on /boards/b"))

  # a worker where no step ran (a relaunch that found every epoch trained before): no rate said
  idle <- py_result(sub('"images_per_second": 12.5,', '"images_per_second": null,', results_text, fixed = TRUE))
  printed <- printed_of(idle)
  expect_identical(cli_lines("alexnet.cli.cluster", "_train_summary", idle), printed)
  expect_identical(printed[[2]], paste("  worker 0 (chief) at 10.0.0.1:8000: 2 categories, 1,042 images, 2 epochs,",
                                       "loss 1.499, accuracy 0.450, val_accuracy 0.400"))

  # a run called again on its checkpoints, every epoch trained before: said, as a history's print says it, in R
  # as `epochs` and on the command line as --epochs
  done_text <- sub('"steps": 10, "global_batch_size": 64, "seconds": 30.0,',
                   '"steps": 10, "global_batch_size": 64, "seconds": 30.0, "epochs": 2, "initial_epoch": 2,
                    "initial_step": 0, "checkpoint_dir": "/runs/3",', results_text, fixed = TRUE)
  done <- py_result(done_text)
  printed <- printed_of(done)
  said <- paste("All 2 epochs were trained before, in /runs/3: nothing was left to train (a larger `epochs` trains",
                "further).")
  expect_identical(printed[4:6], c(said, "Every worker holds the same weights", "Weights: sha256 abc"))
  expect_identical(cli_lines("alexnet.cli.cluster", "_train_summary", done), printed)
})

test_that("an export: the command line says what R prints", {
  skip_if_no_alexnet()
  export <- py_result('{"path": "/serving/alexnet/1", "format": "savedmodel",
    "files": ["saved_model.pb", "alexnet-model.json"], "bytes": 250224850, "model": "alexnet@20250101T000000Z-abcde",
    "image_size": 224, "num_classes": 1000, "top": 5,
    "signatures": {"serving_default": {"inputs": {"images": "string[?]"},
                                       "outputs": {"ids": "string[?,5]", "ok": "bool[?]"}},
                   "pixels": {"inputs": {"pixels": "float32[?,224,224,3]"}, "outputs": {"ids": "string[?,5]"}}},
    "pin": {"board": "/boards/imagenet", "name": "alexnet", "version": "20250102T000000Z-fghij"}}')
  printed <- capture.output(print(alexnet:::new_alexnet_export(reticulate::py_to_r(export))))
  expect_identical(cli_lines("alexnet.cli.model", "export_summary", export), printed)
  expect_identical(printed, c(
    "SavedModel export of alexnet@20250101T000000Z-abcde: 1,000 classes, images of 224 pixels, top 5",
    "Written to /serving/alexnet/1 (2 files, 250.2 MB)",
    "Pinned as alexnet version 20250102T000000Z-fghij on /boards/imagenet",
    "Signature serving_default: images string[?] -> ids string[?,5], ok bool[?]",
    "Signature pixels: pixels float32[?,224,224,3] -> ids string[?,5]"))
  # published only, as TF Lite: no folder written
  pinned <- py_result('{"path": null, "format": "tflite", "files": [], "bytes": 0, "model": null, "image_size": 96,
    "num_classes": 1, "top": 1, "signatures": {}, "pin": {"board": "/b", "name": "small", "version": "v2"}}')
  printed <- capture.output(print(alexnet:::new_alexnet_export(reticulate::py_to_r(pinned))))
  expect_identical(cli_lines("alexnet.cli.model", "export_summary", pinned), printed)
  expect_identical(printed, c("TF Lite export of a model: 1 class, images of 96 pixels, top 1",
                              "Pinned as small version v2 on /b"))
})
