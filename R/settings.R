# Generated from the training settings' declaration (python/alexnet/train/settings.py): do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_r R`, when a declaration changes.

# Every training setting of alexnet_train() and alexnet_spark_train(), in the declaration's order: each one's argument
# kind (see R/arguments.R), default, values when it is a choice, and help.
training_settings <- list(
  batch_size = list(kind = "count>=1", default = 32, choices = NULL, help = "images per batch on each replica (GPU, or worker without GPUs); the global batch is this times the replicas"),
  epochs = list(kind = "count>=1", default = 2, choices = NULL, help = "passes over the data"),
  parallel = list(kind = "count>=1?", default = NULL, choices = NULL, help = "images decoded at once (unset: one per CPU this process may use)"),
  image_size = list(kind = "counts>=63", default = 224, choices = NULL, help = "image side in pixels (at least 63; 224, the paper's), or several trained in order (128, 160, 224)"),
  image_size_epochs = list(kind = "counts>=1?", default = NULL, choices = NULL, help = "epochs at each size of `image_size`, adding up to `epochs` (unset: split evenly, later sizes taking the epochs left over)"),
  learning_rate = list(kind = "number", default = 0.01, choices = NULL, help = "the learning rate for a global batch of 128 (the paper's 0.01), scaled with the batch by `lr_scaling`"),
  lr_scaling = list(kind = "choice", default = "linear", choices = c("linear", "none"), help = "how the rate follows the global batch: \"linear\" multiplies `learning_rate` by global batch / 128 (reached by a warm-up), \"none\" keeps it"),
  lr_schedule = list(kind = "choice", default = "linear", choices = c("linear", "cosine", "step", "plateau"), help = "how the rate ends after the warm-up: \"linear\" straight down to zero at the last step, \"cosine\" down to zero along half a cosine, \"step\" divided by 10 at `lr_drop_epochs`, \"plateau\" divided by 10 when the validation top-1 has not improved for `patience` epochs (the paper)"),
  warmup_epochs = list(kind = "count>=0?", default = NULL, choices = NULL, help = "epochs of linear warm-up to the scaled rate (unset: 5, at most half the epochs, when the rate grows more than twice, else 0)"),
  momentum = list(kind = "number", default = 0.9, choices = NULL, help = "SGD momentum"),
  weight_decay = list(kind = "number", default = 0.0005, choices = NULL, help = "L2 weight decay added to the gradient of every kernel"),
  lr_drop_epochs = list(kind = "counts>=1?", default = c(30, 60, 80), choices = NULL, help = "with lr_schedule = \"step\": epochs (0-based) at whose start the rate is divided by 10 (from 1: epoch 0 starts at the peak)"),
  patience = list(kind = "count>=1", default = 2, choices = NULL, help = "with lr_schedule = \"plateau\": epochs without a better validation top-1 before the rate is divided by 10"),
  label_smoothing = list(kind = "number", default = 0.1, choices = NULL, help = "the share of each label's probability spread evenly over all classes (0: the paper's hard labels)"),
  checkpoint_dir = list(kind = "location?", default = NULL, choices = NULL, help = "checkpoints, to resume after an interruption"),
  model_dir = list(kind = "location?", default = NULL, choices = NULL, help = "where the trained model is saved (unset: `checkpoint_dir`)"),
  checkpoint_every = list(kind = "count>=1?", default = NULL, choices = NULL, help = "also checkpoint every this many steps inside an epoch (needs `checkpoint_dir`)"),
  steps_per_epoch = list(kind = "count>=1?", default = NULL, choices = NULL, help = "training steps per epoch (unset: as many whole batches as the images fill, at least one)"),
  validation = list(kind = "flag", default = TRUE, choices = NULL, help = "evaluate the validation images (centre crop at the last image size) after each epoch, every worker's, each once"),
  validation_steps = list(kind = "count>=1?", default = NULL, choices = NULL, help = "validation steps per epoch (unset: as many as every validation image once takes; set: at most this many, covering the first `validation_steps` x `batch_size` x its replicas of each worker's images)"),
  keep_best = list(kind = "flag", default = FALSE, choices = NULL, help = "save, and publish, the weights of the epoch with the best validation top-1 rather than the last epoch's (the model card says which epoch)"),
  cache = list(kind = "flag", default = FALSE, choices = NULL, help = "keep the compressed image bytes in memory after the first epoch (as much memory as this worker's images take on disk: said when more than half of what is free)"),
  max_bad_fraction = list(kind = "number", default = 0.01, choices = NULL, help = "the share of images that may be unusable (skipped) before training stops with an error naming them"),
  check_images = list(kind = "flag", default = TRUE, choices = NULL, help = "check every image once before training and skip the bad ones"),
  seed = list(kind = "count>=0?", default = NULL, choices = NULL, help = "random seed of the weights and of the order and crops of the images"),
  verbose = list(kind = "count>=0", default = 1, choices = NULL, help = "Keras fit verbosity (0 silent, 1 progress bar, 2 one line per epoch); 1 gives a line per epoch too where no bars are drawn (ALEXNET_PROGRESS=0) or standard output is not a terminal"),
  dense_units = list(kind = "count>=1", default = 4096, choices = NULL, help = "units of each of the two hidden dense layers (the paper's 4096)"),
  dropout = list(kind = "number", default = 0.5, choices = NULL, help = "dropout rate after each hidden dense layer"),
  grouped = list(kind = "flag", default = FALSE, choices = NULL, help = "split conv2, conv4 and conv5 into two groups, as the paper's two GPUs"),
  initial_model = list(kind = "object?", default = NULL, choices = NULL, help = "start from the weights of this trained model: the location of a model_dir or alexnet.keras, or, from R and Python, a model pin as alexnet_model returns it; its last layer's weights are kept for the classes both have and the other classes start afresh, so a model trained on ImageNet starts training on categories of your own (a resumed run, which must name the same model, takes its checkpoint's weights without reading it)"),
  train_from = list(kind = "choice", default = "conv1", choices = c("conv1", "conv2", "conv3", "conv4", "conv5", "fc1", "fc2", "logits"), help = "the first layer that learns: the layers before it keep the weights they start with, those of `initial_model` (\"fc1\": only the dense layers learn, \"logits\": only the last)"),
  area_range = list(kind = "numbers", default = c(0.08, 1.0), choices = NULL, help = "the least and most share of an image that a random training crop covers"),
  lighting = list(kind = "number", default = 0.0, choices = NULL, help = "the AlexNet paper's colour augmentation: each training image's light shifted along the three principal components of ImageNet's colours, by weights drawn with this standard deviation (the paper's 0.1; 0: none)"),
  precision = list(kind = "choice?", default = NULL, choices = c("float32", "bfloat16", "float16"), help = "what the layers compute in (unset: the hardware's; bfloat16 and float16 are mixed precision)"),
  mixed_precision = list(kind = "flag?", default = NULL, choices = NULL, help = "the older form of `precision`: on means \"float16\", off \"float32\""),
  jit_compile = list(kind = "flag?", default = NULL, choices = NULL, help = "compile the training step with XLA (unset: on one GPU; off on CPUs, under multi_worker and with several replicas, where XLA-compiled steps that all-reduce the gradients have failed (tensorflow/tensorflow#58961, #45940); set, on or off as asked)"),
  collective_timeout = list(kind = "number?", default = 1800.0, choices = NULL, help = "seconds a worker waits for the others in a collective operation, or for them all to join at the start, before failing (unset: for ever); a worker silent for as long, or for a minute if less, is declared lost"),
  allreduce_precision = list(kind = "choice", default = "float32", choices = c("float32", "bfloat16", "float16"), help = "the number format of the gradients on the wire between replicas (the GPUs of a machine, and the workers): \"float32\", or \"bfloat16\" / \"float16\", half the bytes (each replica's gradients rounded to 16 bits and every partial sum of the all-reduce rounded again; the sum comes back as float32)"),
  allreduce_pack_mb = list(kind = "number", default = 0.0, choices = NULL, help = "all-reduce the gradients between replicas in packs of about this many megabytes, last layer first, so that packs travel while the backward pass computes the rest (0: one all-reduce of every gradient after the backward pass)"),
  accumulate_steps = list(kind = "count>=1", default = 1, choices = NULL, help = "micro-batches of `batch_size` whose gradients are added up before one all-reduce and optimizer step: a step trains `accumulate_steps` x `batch_size` images a replica, and the rate and schedules count these steps"),
  sync_every = list(kind = "count>=1", default = 1, choices = NULL, help = "local SGD: each worker takes this many optimizer steps alone, then the workers average their weights and momentum (1: synchronous training, the gradients all-reduced every step; one worker: nothing to average)"),
  local_sgd_after = list(kind = "count>=0", default = 0, choices = NULL, help = "with `sync_every` above 1: epochs trained synchronously before local SGD begins (post-local SGD: the models the workers train alone drift apart most while the rate is high, early in training)"),
  adapt_communication = list(kind = "flag", default = FALSE, choices = NULL, help = "with several workers: take what the measurement before training advises of 16-bit gradients, packs where they overlap the backward pass (on GPUs, and on CPUs with two or more inter-op threads) and `accumulate_steps` (up to `largest_global_batch`, and at most as many micro-batches as an epoch had steps), as the chief decides, on every worker (local SGD, which changes what is learnt, is only advised; a resumed run keeps what it took when it began)"),
  largest_global_batch = list(kind = "count>=1?", default = NULL, choices = NULL, help = "with several workers: the largest global batch (images of one optimizer step over every worker) that the micro-batches advised before training, and taken by `adapt_communication`, may make (unset: 1024 on ImageNet's 1,281,167 training images, the largest AlexNet keeps its accuracy at with the rate scaled linearly, and as many times fewer on fewer images, down to none; it never stops a batch you set yourself, which the chief warns about beyond 1024 and beyond this bound)"),
  progress_file = list(kind = "location?", default = NULL, choices = NULL, help = "where the chief reports progress as lines of JSON (a file, or tcp://host:port of a launcher's monitor)"),
  log_dir = list(kind = "location?", default = NULL, choices = NULL, help = "TensorBoard logs, watched with `tensorboard --logdir`"),
  log_every = list(kind = "count>=1", default = 100, choices = NULL, help = "write step scalars to `log_dir` every this many steps"),
  profile_steps = list(kind = "numbers?", default = NULL, choices = NULL, help = "profile these training steps (first, last; counted from 1) into `log_dir`"),
  model_pin = list(kind = "string?", default = NULL, choices = NULL, help = "after training, publish the model (without optimizer state) as a new version of this pin"),
  model_board = list(kind = "location?", default = NULL, choices = NULL, help = "board of `model_pin` (unset: the board the data came from)"),
  model_format = list(kind = "choice", default = "keras", choices = c("keras", "keras+savedmodel", "keras+tflite"), help = "what `model_pin` carries: \"keras\", alexnet.keras (what evaluation and prediction read); \"keras+savedmodel\" or \"keras+tflite\", also its alexnet_export() beside it, for serving without this package")
)

# The arguments of alexnet_train() that may be given by position, in order (the original r-tensorflow/alexnet's): its
# first formals, training settings and others (`data`, `strategy`).
training_positional <- c("batch_size", "epochs", "data", "strategy", "parallel")
