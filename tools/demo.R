# The main job on the embedded default: a synthetic ImageNet, uploaded to a local folder board,
# split into two partitions, a short training run on one of them, its model evaluated, used and
# shared as a pin, exported for serving without alexnet; then two workers through Spark, ending with the
# evaluation of the whole validation set in the same job, and that model evaluated again, all from R.
# Run with `make demo`; outputs go to demo-output/ (or ALEXNET_DEMO_DIR), its board too.
library(alexnet)
options(width = 120)

out <- Sys.getenv("ALEXNET_DEMO_DIR", "demo-output")
dir.create(out, recursive = TRUE, showWarnings = FALSE)
out <- normalizePath(out)
# the demo's own board, never the one ALEXNET_BOARD names (a board of the user's, which the demo's upload would
# change): every call below that takes no board uses this one too
board <- file.path(out, "board")
Sys.setenv(ALEXNET_BOARD = board)
step <- function(...) cat("\n==> ", paste(...), "\n", sep = "")

step("Synthetic ImageNet (Kaggle layout, with the odd files real ImageNet has)")
unlink(file.path(out, "imagenet"), recursive = TRUE)  # drawn again on every run (the same images: the same seed)
imagenet <- imagenet_synthetic(file.path(out, "imagenet"), classes = 8, images_per_class = 60,
                               val_per_class = 10, quirks = TRUE, max_side = 160)
cat(imagenet$images, " training and ", imagenet$val_images, " validation images, ",
    round(imagenet$bytes / 2^20, 1), " MB in ", imagenet$path, "\n", sep = "")

step("Upload: one zip per category to the board", board)
# the upload's warning that names the bad images it left out: said here as a table instead
report <- withCallingHandlers(imagenet_upload(imagenet$path, board = board), alexnet_warning = function(w) {
  if (grepl("bad images? left out", conditionMessage(w))) invokeRestart("muffleWarning")
})
cat(length(report$uploaded), " categories uploaded, ", length(report$skipped), " already on the board, ",
    nrow(report$bad_images), " bad images left out:\n", sep = "")
if (nrow(report$bad_images)) print(report$bad_images[, c("category", "file", "reason")], row.names = FALSE)

step("Categories on the board")
categories <- imagenet_categories(board)
categories$name <- sub(",.*", "", categories$name)
categories$MB <- round(categories$bytes / 2^20, 2)
print(categories[, c("index", "id", "images", "MB", "name")], row.names = FALSE)

step("Two balanced partitions, fetched in parallel into the local cache")
cache <- file.path(out, "cache")
parts <- lapply(0:1, function(p) imagenet_partition(partition = p, total = 2, board = board, cache_dir = cache))
for (p in 0:1) {
  cat("partition ", p, ": ", length(parts[[p + 1]]$image), " images of ",
      paste(parts[[p + 1]]$categories, collapse = " "), "\n", sep = "")
}

step("Train AlexNet on partition 0 of 2 (small images, a few epochs; labels are global)")
logs <- file.path(out, "logs")
data <- imagenet_partition(partition = 0, total = 2, board = board, cache_dir = cache)
history <- data %>%
  alexnet_train(epochs = 3, batch_size = 16, image_size = 112, parallel = 2, seed = 0,
                model_dir = file.path(out, "model"), model_pin = "alexnet-partition-0", log_dir = logs,
                log_every = 5, verbose = 2)
print(history)
png(file.path(out, "history.png"), width = 800, height = 900, res = 110)
plot(history)
invisible(dev.off())

step("The model as a versioned pin beside its data, read back with its SHA-256 checked")
model <- alexnet_model(board, "alexnet-partition-0")
print(model)

step("Evaluate on the partition's validation images: the centre crop, then the paper's 10 crops")
print(alexnet_evaluate(model, data = data))
print(alexnet_evaluate(model, data = data, crops = 10))

step("Predict: three validation images to category names")
named <- alexnet_predict(model, data$val_image[c(1, 11, 21)], top = 3)
named$image <- basename(named$image)
named$probability <- round(named$probability, 4)
print(named, row.names = FALSE)
cat("(their categories: ", paste(data$val_category[c(1, 11, 21)], collapse = ", "), ")\n", sep = "")

step("Exported for serving: a float32 SavedModel that TensorFlow alone loads, without alexnet or Keras")
served <- alexnet_export(model, file.path(out, "served"), top = 3, overwrite = TRUE)
print(served)
# one call of the served signature: the Python three-liner, in a Python that never imports alexnet
three_lines <- paste(
  "import sys, tensorflow as tf",
  "served = tf.saved_model.load(sys.argv[1]).signatures['serving_default']",
  "answer = served(images=tf.constant([open(p, 'rb').read() for p in sys.argv[2:]] + [b'not an image']))",
  "for i in range(len(sys.argv) - 1): print(answer['ok'][i].numpy(), answer['error'][i].numpy().decode() or '-',",
  "                                        [n.decode().split(',')[0] for n in answer['names'][i].numpy()])",
  sep = "\n")
cat(three_lines, "\n", sep = "")
# (started from R, a Python needs the library path it would have outside R; TensorFlow's start-up lines go to a log)
library_path <- reticulate::import("alexnet.child")$python_environment()[["LD_LIBRARY_PATH"]]
if (is.null(library_path)) library_path <- ""
log <- file.path(out, "served.log")
status <- system2(alexnet_python(), c("-I", "-c", shQuote(three_lines), shQuote(served$path),
                                      shQuote(data$val_image[c(1, 11, 21)])),
                  stderr = log, env = paste0("LD_LIBRARY_PATH=", shQuote(library_path)))
if (!identical(status, 0L)) stop("the served signature failed:\n", paste(readLines(log), collapse = "\n"))

step("Two workers at once: Spark barrier tasks in local[2], MultiWorkerMirroredStrategy, one partition each,",
     "ending with the model's evaluation on every validation image of the board, in the same job")
# The Python launcher, called from R; with a cluster and sparklyr, alexnet_spark_train(sc, ..., evaluate = TRUE)
# does the same through sparklyr::spark_apply(barrier = TRUE).
launcher <- reticulate::import("alexnet.launch.api")
training <- reticulate::import("alexnet.launch.training")
spark <- reticulate::import("alexnet.launch.spark")$spark_session("local[2]", "alexnet demo")
run <- launcher$alexnet_spark_train(spark, 2L, board, evaluate = TRUE, cache_dir = file.path(out, "spark-cache"),
                                    model_dir = file.path(out, "spark-model"), model_pin = "alexnet",
                                    epochs = 2L, batch_size = 16L, image_size = 96L, verbose = 0L)
rows <- reticulate::import_builtins()$list(run)  # the workers, as an R list (the run keeps its evaluation)
flat <- lapply(rows, function(row) training$train_row(row))
cat("Training, one row per worker:\n")
print(do.call(rbind, lapply(flat, function(s) {
  data.frame(worker = s$worker, chief = s$chief, categories = s$categories, images = s$train_images,
             steps = s$steps, loss = round(s$loss, 3), accuracy = round(s$accuracy, 3),
             val_images = s$val_images, val_accuracy = round(s$val_accuracy, 4))
})), row.names = FALSE)
weights <- vapply(flat, function(s) substr(s$weights_sha256, 1, 12), character(1))
cat(if (length(unique(weights)) == 1L) paste0("Both workers ended with the same weights (", weights[[1]], "...).\n")
    else "The workers' weights differ!\n")
cat("The evaluation at the end of the job, one row per worker (each scores its partition's validation images):\n")
print(do.call(rbind, lapply(flat, function(s) {
  data.frame(worker = s$worker, images_scored = s$eval_images, top1_correct = s$eval_top1_correct,
             top5_correct = s$eval_top5_correct)
})), row.names = FALSE)
in_job <- run$evaluation
cat("Added up: ", in_job$top1_correct, " of ", in_job$images, " top-1 correct, recorded in the card of pin ",
    in_job$model, ", written once\n", sep = "")

step("The whole validation set: the pinned two-worker model evaluated again, on one machine and over two Spark tasks")
whole <- alexnet_model(board, "alexnet")
print(whole)
one_machine <- alexnet_evaluate(whole, board = board, cache_dir = file.path(out, "val-cache"))
print(one_machine)
# split over two Spark tasks, each scoring its share; the counts add up to the one-machine result
split <- launcher$alexnet_spark_evaluate(spark, unclass(whole), 2L, board,
                                         cache_dir = file.path(out, "spark-val-cache"))
spark$stop()
cat("Top-1 correct over 2 Spark workers: ", split$top1_correct, " of ", split$images, "; in the training's job: ",
    in_job$top1_correct, " of ", in_job$images, "; on one machine: ", one_machine$top1_correct, " of ",
    one_machine$images, "\n", sep = "")
# training's last validation counted every worker's validation images once: the same images, the same weights
metrics <- rows[[1]]$history$metrics
validated <- metrics$val_images[[length(metrics$val_images)]]
accuracy <- metrics$val_accuracy[[length(metrics$val_accuracy)]]
cat("The two-worker run's last validation: val_accuracy ", format(accuracy, digits = 4), " (",
    round(accuracy * validated), " of ", validated, " images, both workers' validation images); the whole board: ",
    format(one_machine$top1_accuracy, digits = 4), " (", one_machine$top1_correct, " of ", one_machine$images,
    " images).\n", sep = "")
agree <- validated == one_machine$images && round(accuracy * validated) == one_machine$top1_correct
cat("Training's validation and the whole-board evaluation ", if (agree) "agree.\n" else "differ!\n", sep = "")

step("Done. Outputs in", out)
tools_dir <- dirname(alexnet_python())  # TensorBoard's and TensorFlow's commands, beside the core's Python
cat("  board:   ", board, "\n  cache:   ", cache, "\n  model:   ", history$model_path,
    "\n  plot:    ", file.path(out, "history.png"),
    "\n  logs:    ", logs, " (", file.path(tools_dir, "tensorboard"), " --logdir ", logs, ")",
    "\n  served:  ", served$path, " (", file.path(tools_dir, "saved_model_cli"), " show --dir ", served$path,
    " --all)",
    "\n  spark:   ", file.path(out, "spark-model"), "\n", sep = "")
