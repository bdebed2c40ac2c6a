# Generated from the benchmark's declaration (python/alexnet/bench/plan.py): do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_r R`, when a declaration changes.

# Every setting of alexnet_benchmark(), in the declaration's order: each one's argument kind (see R/arguments.R),
# default, values when it is a choice, and help; and the stage it belongs to ("": every stage's).
benchmark_settings <- list(
  stages = list(kind = "strings", default = c("decode", "naive", "naive_auto", "io", "synthetic", "train"), choices = c("decode", "naive", "naive_auto", "io", "synthetic", "train", "fetch", "time_to_accuracy"), stage = "", help = "the stages to run, in this order, among decode, naive, naive_auto, io, synthetic, train, fetch, time_to_accuracy (fetch needs `board`; time_to_accuracy trains for minutes)"),
  images = list(kind = "count>=1", default = 2000, choices = NULL, stage = "", help = "images used; each measurement also runs over at least this many"),
  batch_size = list(kind = "count>=1", default = 32, choices = NULL, stage = "", help = "images per batch"),
  image_size = list(kind = "count>=1", default = 224, choices = NULL, stage = "", help = "pixels of the model's square input (at least 63 when synthetic or train runs)"),
  cores = list(kind = "count>=1?", default = NULL, choices = NULL, stage = "", help = "most cores the pipelines are measured on (unset: every CPU this process may use); they run on 1, 2 and this many"),
  seconds = list(kind = "number", default = 5.0, choices = NULL, stage = "", help = "least seconds each measurement runs, after its warm-up"),
  parallel = list(kind = "count>=1?", default = NULL, choices = NULL, stage = "", help = "images the pipeline decodes at once (unset: one per CPU, as in training)"),
  cache = list(kind = "flag", default = TRUE, choices = NULL, stage = "", help = "keep the compressed bytes in memory after the first pass, as the decode reference does"),
  resize = list(kind = "count>=1?", default = NULL, choices = NULL, stage = "", help = "the io and train stages read the images re-encoded to this short side, as imagenet_upload(resize = ) stores them (decode and naive still read the originals)"),
  quality = list(kind = "count>=1", default = 90, choices = NULL, stage = "", help = "JPEG quality of the images re-encoded for `resize`"),
  model_steps = list(kind = "count>=1", default = 5, choices = NULL, stage = "", help = "training steps synthetic and train time"),
  dense_units = list(kind = "count>=1", default = 4096, choices = NULL, stage = "", help = "units of the model's two hidden dense layers"),
  isolation = list(kind = "choice?", default = NULL, choices = c("process", "threads"), stage = "", help = "each core count measured in a child process pinned to that many CPUs (\"process\"), or in this process with tf.data's threads limited (\"threads\"); unset: process where CPUs can be pinned (Linux)"),
  output_dir = list(kind = "location?", default = NULL, choices = NULL, stage = "", help = "the folder of alexnet-benchmark.json and alexnet-benchmark.png (unset: a new temporary folder)"),
  seed = list(kind = "count>=0", default = 0, choices = NULL, stage = "", help = "random seed of the images' sample, the synthetic data and the models"),
  precision = list(kind = "choice?", default = NULL, choices = c("float32", "bfloat16", "float16"), stage = "", help = "what synthetic, train and the defaults recipe of time_to_accuracy compute in (unset: the one measured to train faster here, as alexnet_train() picks it)"),
  board = list(kind = "location?", default = NULL, choices = NULL, stage = "fetch", help = "the board a partition is downloaded from (the command line's --board)"),
  fetch_partition = list(kind = "count>=0", default = 0, choices = NULL, stage = "fetch", help = "the 0-based partition downloaded (the command line's --partition)"),
  fetch_total = list(kind = "count>=1", default = 1, choices = NULL, stage = "fetch", help = "the number of partitions (the command line's --total)"),
  fetch_workers = list(kind = "count>=2", default = 8, choices = NULL, stage = "fetch", help = "parallel downloads, against one at a time"),
  target_accuracy = list(kind = "number", default = 0.75, choices = NULL, stage = "time_to_accuracy", help = "the top-1 validation accuracy to reach (a share between 0 and 1)"),
  max_epochs = list(kind = "count>=1", default = 8, choices = NULL, stage = "time_to_accuracy", help = "epochs each recipe trains in full (no early stop)"),
  repeats = list(kind = "count>=1", default = 3, choices = NULL, stage = "time_to_accuracy", help = "seeds each recipe trains from (`seed` and those after it); the verdict is on the medians"),
  accuracy_classes = list(kind = "count>=2", default = 10, choices = NULL, stage = "time_to_accuracy", help = "categories of its synthetic ImageNet (used when `data` is unset)"),
  accuracy_images_per_class = list(kind = "count>=1", default = 150, choices = NULL, stage = "time_to_accuracy", help = "training images per category of its synthetic ImageNet"),
  accuracy_val_per_class = list(kind = "count>=1", default = 50, choices = NULL, stage = "time_to_accuracy", help = "validation images per category of its synthetic ImageNet"),
  accuracy_image_size = list(kind = "count>=63", default = 176, choices = NULL, stage = "time_to_accuracy", help = "the final image size (the defaults train at about half, three quarters and all of it)"),
  accuracy_batch_size = list(kind = "count>=1", default = 128, choices = NULL, stage = "time_to_accuracy", help = "images per batch (128: the batch the paper's rate is for)"),
  accuracy_dense_units = list(kind = "count>=1", default = 512, choices = NULL, stage = "time_to_accuracy", help = "units of the two hidden dense layers")
)
