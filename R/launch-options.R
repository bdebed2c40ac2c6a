# Generated from the declaration of a Spark job's options (python/alexnet/launch/options.py): do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_r R`, when a declaration changes.

# The options of every Spark job (alexnet_spark_train(), alexnet_spark_evaluate()), in the declaration's order: each
# one's argument kind (see R/arguments.R), default, values when it is a choice, and help.
launch_options <- list(
  base_port = list(kind = "count>=1", default = 8000, choices = NULL, help = "worker k of a training listens on its host at this port + k (an evaluation's workers listen on none; tasks on one host must not collide; below the hosts' ephemeral ports, 32768 on Linux, which outgoing connections take)"),
  cache_dir = list(kind = "location?", default = NULL, choices = NULL, help = "where each worker extracts its share of the board (unset: under the user cache directory)"),
  fetch_workers = list(kind = "count>=1", default = 8, choices = NULL, help = "parallel downloads of each worker"),
  timeout = list(kind = "number?", default = NULL, choices = NULL, help = "seconds a launch may take before the whole job is cancelled, and not launched again (unset: no bound)"),
  python = list(kind = "location?", default = NULL, choices = NULL, help = "the Python each worker runs (unset: the executor's; from R, the R session's alexnet_python())"),
  env = list(kind = "any?", default = NULL, choices = NULL, help = "extra environment variables of the workers' processes"),
  retries = list(kind = "count>=0", default = 0, choices = NULL, help = "launches of the job again after a failure (a training resumes from the last checkpoint of `checkpoint_dir`, an evaluation scores every image again); after a lost Spark worker, a relaunch first waits for the task slots it took (saying so), as long as Spark waits for a barrier stage's (10 minutes by default)"),
  progress = list(kind = "flag", default = TRUE, choices = NULL, help = "show the workers' progress on the driver (from R, also how a failed worker's own error reaches it: sparklyr's error of the stage does not carry it)"),
  probe = list(kind = "flag", default = TRUE, choices = NULL, help = "first check, in a short job, that the executors' Python imports alexnet and TensorFlow, naming those that do not")
)

# The options of a training job's own (alexnet_spark_train()), in the declaration's order: each one's argument kind
# (see R/arguments.R), default, values when it is a choice, and help.
training_job_options <- list(
  evaluate = list(kind = "flag", default = FALSE, choices = NULL, help = "after the last epoch, each worker scores its partition's validation images with the model it holds: the evaluation of every validation image of the board, recorded in the model card and in the one version of `model_pin` the job writes"),
  crops = list(kind = "count", default = 1, choices = c(1, 10), help = "with `evaluate`, 1: the centre crop; 10: the four corners and the centre of the image resized to 256/224 of the crop, and their mirrors (the paper's)")
)
