# Generated from the declarations of a model's options (python/alexnet/model/options.py): do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_r R`, when a declaration changes.

# The options of an evaluation (alexnet_evaluate(), alexnet_spark_evaluate()), in the declaration's order: each one's
# argument kind (see R/arguments.R), default, values when it is a choice, and help.
evaluation_options <- list(
  crops = list(kind = "count", default = 1, choices = c(1, 10), help = "1: the centre crop; 10: the four corners and the centre of the image resized to 256/224 of the crop, and their mirrors (the paper's)"),
  batch_size = list(kind = "count>=1", default = 64, choices = NULL, help = "images scored at once"),
  parallel = list(kind = "count>=1?", default = NULL, choices = NULL, help = "images decoded at once (unset: one per CPU this process may use)"),
  image_size = list(kind = "count>=63?", default = NULL, choices = NULL, help = "the side of the crop scored (unset: the size the model trained at last; a model trained at a lower size often scores better 32 pixels above it)")
)

# Which of a board's validation images alexnet_evaluate() scores, and how they are fetched, in the declaration's
# order: each one's argument kind (see R/arguments.R), default, values when it is a choice, and help.
board_images_options <- list(
  partition = list(kind = "count>=0", default = 0, choices = NULL, help = "the 0-based share of the board's validation images scored"),
  total = list(kind = "count>=1", default = 1, choices = NULL, help = "the number of shares the board's validation images are split into (1: all of them)"),
  cache_dir = list(kind = "location?", default = NULL, choices = NULL, help = "where the validation images are extracted (unset: a folder under the user's cache directory)"),
  fetch_workers = list(kind = "count>=1", default = 8, choices = NULL, help = "parallel downloads of the validation images")
)

# The options of alexnet_predict(), in the declaration's order: each one's argument kind (see R/arguments.R), default,
# values when it is a choice, and help.
predict_options <- list(
  top = list(kind = "count>=1", default = 5, choices = NULL, help = "classes given for each image, the most probable first (a model with fewer classes gives all of them)"),
  batch_size = list(kind = "count>=1", default = 32, choices = NULL, help = "images scored at once"),
  skip_bad = list(kind = "flag", default = FALSE, choices = NULL, help = "leave out the images that cannot be read or decoded, with a warning naming each, and give the others' results (otherwise one error names them, and nothing is given)")
)

# The options of alexnet_features(), in the declaration's order: each one's argument kind (see R/arguments.R),
# default, values when it is a choice, and help.
features_options <- list(
  layer = list(kind = "choice", default = "fc2", choices = c("flatten", "fc1", "fc2", "logits"), help = "the layer whose values are returned: flatten, the last convolution's maps, max-pooled and pooled to 6x6, flattened (9216 values); fc1, the first hidden dense layer, after its ReLU (4096 values at full size); fc2, the second hidden dense layer, after its ReLU (4096 values at full size): the paper's image similarity; logits, the class scores before the softmax (one per class)"),
  batch_size = list(kind = "count>=1", default = 32, choices = NULL, help = "images scored at once"),
  skip_bad = list(kind = "flag", default = FALSE, choices = NULL, help = "leave out the images that cannot be read or decoded, with a warning naming each, and give the others' results (otherwise one error names them, and nothing is given)")
)

# The options of alexnet_export(), in the declaration's order: each one's argument kind (see R/arguments.R), default,
# values when it is a choice, and help.
export_options <- list(
  format = list(kind = "choice", default = "savedmodel", choices = c("savedmodel", "tflite"), help = "savedmodel: a TensorFlow SavedModel; tflite: its pixels signature as a TF Lite file"),
  top = list(kind = "count>=1", default = 5, choices = NULL, help = "classes the export returns for each image, the most probable first (at most the model's)"),
  overwrite = list(kind = "flag", default = FALSE, choices = NULL, help = "replace an earlier export at path (a folder holding anything else is never emptied)")
)

# Which model pin alexnet_model() reads and where it brings it, in the declaration's order: each one's argument kind
# (see R/arguments.R), default, values when it is a choice, and help.
model_pin_options <- list(
  name = list(kind = "string", default = "alexnet", choices = NULL, help = "the name of the model pin read (NAME@VERSION reads that version)"),
  version = list(kind = "string?", default = NULL, choices = NULL, help = "the version of the pin read (unset: its latest)"),
  cache_dir = list(kind = "location?", default = NULL, choices = NULL, help = "where the model's files are brought, here and by a Spark worker without a copy of them (a folder every such machine may write; unset: a folder under each machine's user cache directory)"),
  export = list(kind = "flag", default = FALSE, choices = NULL, help = "bring the export the pin carries beside the model too (a SavedModel extracted)")
)
