# The training settings that are formals of alexnet_train() of their own, in the order of its usage line (the others
# reach it through `...`).
training_formals <- intersect(training_positional, names(training_settings))

#' Train AlexNet
#'
#' Trains AlexNet on a partition of ImageNet with a tf.data pipeline that keeps images compressed
#' until they are decoded, in parallel, with a random crop decoded straight from the JPEG, while the
#' previous batch trains.
#'
#' The data is the result of [imagenet_partition()], or a list made by hand with `image` (file
#' paths), `category` (category of each image) and `categories` (all categories); `label` and
#' `num_classes` are then derived from the sorted categories. A category's zip among the images (the file
#' `pins::pin_download()` gives of a category's pin) stands for the files it holds, extracted once into the user
#' cache. Because `data` is what
#' [imagenet_partition()] returns, the call can be piped:
#' `imagenet_partition(partition = 0) %>% alexnet_train(parallel = 6)`.
#'
#' @eval declared_params(training_settings[training_formals])
#' @param data The images, a partition (see Details): it must be given; its `NULL` default, kept from the
#'   original r-tensorflow/alexnet's usage line, is refused with an error that says to fetch one with
#'   [imagenet_partition()]. A partition (a list) given as the first argument, as a
#'   pipe gives it, is taken as `data`, and the arguments after it given by position take the places
#'   of the usage line from `batch_size` on: `alexnet_train(data, 8, 1)` is
#'   `alexnet_train(data = data, batch_size = 8, epochs = 1)`. Otherwise arguments given by position
#'   follow the usage line (`alexnet_train(64)` sets `batch_size`).
#' @param strategy `NULL` or `"default"` (one device), `"mirrored"` (every GPU of this machine),
#'   `"multi_worker"` (every worker in `TF_CONFIG`), or a `tf.distribute` strategy object such as
#'   `tf$distribute$MirroredStrategy()`. `"multi_worker"` bounds collectives by `collective_timeout` and
#'   waits a minute for a silent worker's heartbeats, and a worker sent SIGTERM stops as a one-process run does
#'   (TensorFlow alone would take the signal over and train on); a `MultiWorkerMirroredStrategy` object keeps
#'   its own options and TensorFlow's 10 s heartbeat timeout, and training warns when that may end a run. Every
#'   worker must be given the same settings of what the workers exchange and of how each step updates the
#'   weights (the communication settings, `batch_size`, `epochs`, steps, image sizes, the model, `precision`,
#'   the learning rate and its schedule): before their first exchange the workers compare them, and every
#'   worker stops with an `alexnet_error` naming each one that differs and every worker's value.
#' @param ... Further training settings, by name: every one is listed under "Training settings"
#'   below with its default (`image_size`, `learning_rate`, `precision`, `checkpoint_dir`,
#'   `model_pin`, ...), and `callbacks` (Keras callbacks, from Python objects). A value of the
#'   wrong type or out of range is an `alexnet_error` naming the setting, before any training.
#' @eval declared_params(training_settings[setdiff(names(training_settings), training_formals)],
#'   section = c("Training settings", training_settings_intro()))
#' @section Faster training:
#' Three arguments shorten the time to a given accuracy; the defaults use the first and the last, and
#' `image_size` takes several sizes to use the second.
#'
#' * `precision`: what the layers compute in. `NULL` (the default) takes the format that trains
#'   fastest here: on a CPU without bfloat16 or float16 instructions that is `"float32"`; where the
#'   hardware offers more (a CPU with `avx512_bf16` or `amx_bf16`, a GPU), a few training steps of
#'   the model about to train are timed in each format, in a child process so that the training
#'   process keeps none of the memory they took, and a 16-bit one is taken only when it is at
#'   least 1.1 times as fast as float32 (CPU flags do not decide it: an Intel Xeon listing
#'   `avx512_bf16` trained 0.6 times as fast in bfloat16, an AMD EPYC 1.5 to 1.8 times as fast). The
#'   result is remembered per machine, TensorFlow version and model shape in `precision.json` in the
#'   user's cache folder; the environment variable `ALEXNET_PRECISION_CACHE` names another file, or
#'   with `0` turns the memory off. The workers of a cluster agree: the format all of them chose, else
#'   `"float32"`. `"bfloat16"` and `"float16"` are mixed precision (weights stay float32; float16 is
#'   loss-scaled). Asking for one the CPU only emulates warns that it will be slower; bfloat16 on a GPU
#'   older than 8.0 is an error. The older `mixed_precision = TRUE` means `"float16"`, `FALSE`
#'   `"float32"`. The history's `params$precision`, `params$precision_reason` and
#'   `params$precision_rates` say what was used, why, and what was measured. `jit_compile` compiles the
#'   training step with XLA; left `NULL`, it is on for a run of one GPU only: off on CPUs, and off under
#'   `strategy = "multi_worker"` and with several replicas, where XLA-compiled steps that all-reduce the
#'   gradients have failed (tensorflow/tensorflow#58961, #45940). `params$jit_compile` and
#'   `params$jit_compile_reason` say which and why.
#' * `image_size = c(128, 160, 224)`: progressive resizing. The sizes are trained in order, the
#'   epochs split evenly among them (later sizes take any left over) unless `image_size_epochs`
#'   gives the epochs at each, such as `c(4, 4, 2)` for 10 `epochs`. Small early images make those
#'   epochs several times cheaper; the last size is used for validation and saved with the model,
#'   which takes any size (every side is at least 63). A resumed run continues the schedule.
#' * `learning_rate` is the rate for a global batch of 128 (the paper's 0.01). With
#'   `lr_scaling = "linear"` (the default) it is multiplied by the global batch / 128 (the linear
#'   scaling rule of Goyal et al., 2017) and reached by a linear warm-up over `warmup_epochs`
#'   (`NULL`: 5 epochs, at most half of `epochs`, when the rate grows more than twice, else none). `lr_scaling = "none"` keeps
#'   `learning_rate` whatever the batch. A batch of 8 on one CPU thus trains at
#'   0.01 * 8 / 128 = 0.000625: a small run that must learn quickly sets `lr_scaling = "none"` or its
#'   own `learning_rate`.
#'
#' @section A model at its best:
#' * `lr_schedule` says how the rate ends after its warm-up: `"linear"` (the default) straight down
#'   to zero at the last step, `"cosine"` down to zero along half a cosine, `"step"` divided by 10 at
#'   the epochs of `lr_drop_epochs`, `"plateau"` (the paper's rule) divided by 10 whenever the
#'   validation top-1 has not improved for `patience` epochs. An annealed rate ends on a settled
#'   model instead of wherever the last epoch's swing left it. The plateau decision is taken from the
#'   history's accuracies, the same on every worker, and a resumed run continues the same curve.
#' * `label_smoothing` (0.1) trains towards labels that give the true class 0.9 plus an even share
#'   of 0.1 over every class; 0 is the paper's hard labels.
#' * `keep_best = TRUE` saves (and publishes as `model_pin`) the weights of the epoch with the best
#'   validation top-1 instead of the last epoch's; the model card's `best_epoch` says which. With
#'   `checkpoint_dir` the best weights are kept beside the checkpoints, so a resumed run still has
#'   them. `lr_schedule = "plateau"` and `keep_best` need validation images.
#'
#' The history's `schedule` holds each epoch's `image_size` and `learning_rate`, apart from its
#' `metrics`; `print()` shows it as the run's schedule.
#'
#' @section Validation:
#' After every epoch the validation images (`val_image` of `data`) are scored as
#' [alexnet_evaluate()] scores them with `crops = 1`: the centre crop at the last image size, in
#' order, every image once. With several workers each scores its own validation images and the
#' counts are added over all of them, so `val_accuracy`, `val_top5_accuracy` and `val_loss` (the
#' mean loss per image) are over every worker's validation images, each counted once, the same
#' numbers on every worker: a worker with fewer images pads its last steps with images that count
#' for nothing, so that every worker runs as many steps as the largest share fills (at most one
#' batch of padding beyond it). The same holds on one machine over several replicas: no batch is
#' dropped, none repeated. `metrics$val_images` says how many images each epoch's `val_` metrics
#' cover, and `params$val_images` the same (`params$worker_val_images` is this worker's share).
#' `validation_steps` caps the steps; each worker then scores the first `validation_steps` times
#' its batch of its images.
#'
#' @section Your own categories:
#' `initial_model` starts a run from the weights of a trained model instead of random ones: a model
#' pin ([alexnet_model()]) or the location of a `model_dir` or `alexnet.keras`. Every layer takes its
#' weights; of the last one, the classes both models have (by category id) keep theirs and the others
#' start afresh. A model trained on ImageNet so starts training on your own categories, uploaded as a
#' folder of one folder per category (`imagenet_upload("photos/", board = "my-board", val_share = 0.1)`,
#' with folders such as `roses/` and `tulips/`, a tenth of each held out for validation); with few images, `train_from = "fc1"` leaves the convolutions as
#' they are and trains the dense layers only (`"logits"`: the last layer only), which also makes each
#' step cheaper, since the backward pass stops at the first layer that learns (full-size AlexNet at
#' 224 pixels on 2 CPU cores: 2.2 times as many images a second from `"fc1"`, 2.9 from `"logits"`),
#' and, on a cluster, sends only those layers' gradients between workers (the dense layers hold 94% of
#' the weights: `"logits"` sends almost nothing). `dense_units` and `grouped` must be the
#' initial model's (its card records them: a run of others is refused before any work). The history's
#' `params$started_from` says what was taken (`layers`, `classes_kept`, `classes_new`), and the model
#' card's `initial_model` names the model. The model pin is a model like any other, every layer of it
#' trainable; the `model_dir`'s `alexnet.keras` keeps the run as it ended, its optimizer and the layers
#' before `train_from` marked as not trainable. A run that resumes from `checkpoint_dir` takes the
#' checkpoint's weights without reading the initial model again; one whose checkpoints were written
#' from another initial model or with another `train_from` is refused, and so is one on data of other
#' classes than its checkpoints' (each output would stand for another class): to train on other classes from
#' a run's model, give that model as `initial_model` (the `checkpoint_dir` itself when the model was saved
#' there) and a new `checkpoint_dir`.
#' @returns An `alexnet_history`: a list with `metrics` (`loss`, `accuracy`, `top5_accuracy` and
#'   their `val_` counterparts, one value per epoch, and with validation `val_images`, the
#'   validation images each epoch counted over every worker), `schedule` (`image_size` and
#'   `learning_rate` per epoch, and `summary`, the schedule on one line) and `params` (the settings, `num_classes`,
#'   `precision` and `precision_reason`, `jit_compile` and `jit_compile_reason`, `initial_epoch` and
#'   `initial_step` where the run started,
#'   `settings_changed`, where a resumed run trained on other images (of the same classes) or learnt otherwise
#'   than its checkpoints' run
#'   (a list of the `epoch` and `step` each change began at and what `changed`, then and now; each is also a
#'   warning), ...; `communication` and `allreduce_bytes_per_step`: what the replicas exchange (the GPUs of a
#'   machine as the workers of a cluster: `allreduce_precision` and `allreduce_pack_mb` act between them), in words
#'   and in bytes each replica puts into the all-reduce a step (0 with one replica); with several workers
#'   `allreduce_seconds` and `compute_seconds`: one step's exchange and computation, each timed alone before training
#'   (`allreduce_bytes_per_step` and `allreduce_seconds` count local SGD's averages as the advice does: every one
#'   of an epoch, its end's and checkpoints' too, over its steps),
#'   `sixteen_bit_allreduce_seconds`: with float32 on the wire, the same exchange timed in 16 bits,
#'   `hidden_seconds`: on GPU workers that all-reduce their gradients every step, what of the exchange a step
#'   with packs hid, timed in the wire format the chief's timing advises and counted by the advice (CPU workers
#'   time none: what it hid there varied from probe to probe),
#'   `communication_efficiency`, the share of linear scaling they give if none of the exchange overlaps, and
#'   below 0.9 `advised_settings`, the settings that would send less, in the order to take them
#'   (16-bit gradients where timed a tenth faster or more, packs where they overlap the backward pass,
#'   `accumulate_steps` up to a global batch of `micro_batches_up_to` (`largest_global_batch`, or unset 1,024 on
#'   ImageNet's training images and as many times fewer on fewer),
#'   then local SGD, whose cost in accuracy is to be measured first), with `communication_advice`, the same in words, logged as a warning when training starts, and
#'   `adapted_settings`, what the run took of that advice with `adapt_communication = TRUE` (the chief's decision on
#'   every worker; the settings, timings, estimate and advice in `params` are then those it trained with, and where
#'   it took 16-bit gradients, `asked_allreduce_seconds` is the exchange in float32 as asked, timed before it took
#'   them; a relaunch, which takes what its checkpoints recorded before it measures, times only the exchange it
#'   trains with, and its chief keeps the launch's `asked_allreduce_seconds` as they recorded it)),
#'   `bad_images`, the images the check before training left out, `skipped_images`, those the worker could not
#'   read or decode during training and skipped one by one (changed since that check; each said as a warning at the
#'   end of its epoch, and more than `max_bad_fraction` of the worker's images stop the run, every worker at that
#'   epoch's end),
#'   `weights_sha256`, a digest of the final weights, and with several workers `weights_agree`: whether every
#'   worker ended with the chief's weights, compared when training ends (a warning names those that did not, and
#'   `print()` says so; a finished run given again returns the run's own, which its history file records, or
#'   compares them again when it saves the model from its last checkpoint); with
#'   `print()`,
#'   `summary()`, `plot()` and `as.data.frame()` methods (see [alexnet_history]). A run that resumed
#'   from `checkpoint_dir`, or found every epoch already done there, says so in its history: `params$initial_epoch`
#'   and `params$initial_step`, and the line `print()` shows (`Resumed from ... at epoch 3, step 0.`, or `All 2
#'   epochs were trained before, ...`).
#' @examples
#' if (alexnet_available()) {
#'   src <- imagenet_synthetic(tempfile(), classes = 2, images_per_class = 8, max_side = 96)
#'   board <- tempfile("board-")
#'   imagenet_upload(src$path, board = board)
#'   run <- tempfile("run-")
#'   history <- imagenet_partition(partition = 0, total = 1, board = board,
#'                                 cache_dir = tempfile("cache-")) %>%
#'     alexnet_train(batch_size = 8, epochs = 1, image_size = 96, verbose = 0, checkpoint_dir = run)
#'   history$metrics$accuracy
#'   alexnet_history(run)$metrics$accuracy  # read back later from its checkpoint_dir
#' }
#' @export
alexnet_train <- function(data = NULL, strategy = NULL, ...) {
  if (!missing(batch_size) && is.null(batch_size) && is.null(data)) {
    # alexnet_train(NULL), or NULL piped in: a partition that is not there rather than a batch size
    alexnet_abort("the first argument is NULL and `data` is not given: pass the partition imagenet_partition() ",
                  "returns (a pipe hands on NULL when the step before it gave nothing), or, for `batch_size`, a ",
                  "whole number >= 1.")
  }
  if (!missing(batch_size) && is.list(batch_size)) {
    # the first argument is the data, as in imagenet_partition() %>% alexnet_train(): the call again, by name
    return(do.call(alexnet_train, data_first_args(sys.call(), environment())))
  }
  args <- checked_args("alexnet_train", names(formals()))
  if (!is.null(args$data)) args$data <- train_data(args$data)
  # where a resumed run went on from is said once, by the history's print (`Resumed from ...`), not by a message too
  new_alexnet_history(simplify_py(do.call(core_function("alexnet_train"), args)))
}
# the training settings that are formals of their own (`batch_size`, `epochs`, `parallel`) from the core's
# declaration, in the places of the usage line the core declares (`training_positional`, the original
# r-tensorflow/alexnet's): `alexnet_train(64)` sets `batch_size`
alexnet_train <- with_declared(alexnet_train, declared_formals(training_settings[training_formals]),
                               first = training_positional)

# The arguments of an alexnet_train() `call` whose first argument given by position is a partition (a list), all
# by name, for the rule of ?alexnet_train: that argument is `data`, and the ones after it given by position take
# the places of the usage line from `batch_size` on (alexnet_train(data, 8, 1): batch_size 8, epochs 1). `env`
# is the call's frame, where every argument is bound (so that none is evaluated twice).
data_first_args <- function(call, env) {
  slots <- training_positional
  given <- names(as.list(call)[-1]) %||% character(length(call) - 1L)
  named <- slots[pmatch(given[nzchar(given)], slots, nomatch = 0L)]
  if ("data" %in% named) {
    alexnet_abort("`data` was given twice: as the first argument (a partition) and as `data =`. Give it once.")
  }
  by_position <- setdiff(slots, named)  # the places R filled by position, in order
  n <- min(sum(!nzchar(given)), length(by_position))
  values <- mget(by_position[seq_len(n)], envir = env)
  names(values) <- c("data", setdiff(by_position, "data"))[seq_len(n)]
  c(values, mget(named, envir = env), eval(quote(list(...)), env))
}

# A partition (an `alexnet_partition`, or a list made by hand) as the core takes it: a plain list, whose fields
# that hold one value per image or category stay lists on the Python side, even with one element.
train_data <- function(data) {
  as_py_lists(unclass(data), c("image", "category", "categories", "label", "val_image", "val_label", "val_category",
                               "partition_sizes", "val_partition_sizes", "class_ids", "class_names"))
}

# The first paragraph of the section of ?alexnet_train that lists the training settings (see declared_params()): all
# but those that are formals of their own, which are documented among the arguments.
training_settings_intro <- function() {
  paste0("Every setting of a run besides ", and_list(paste0("`", training_formals, "`")), " (see Arguments), ",
         "declared once in the core: the same names, defaults and checks from R, Python (`alexnet.alexnet_train`) ",
         "and the command line (`alexnet train --help`).")
}
