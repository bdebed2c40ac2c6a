# Generated from the evaluation options' declaration (python/alexnet/model/options.py): do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_r R`, when a declaration changes.

# The options of an evaluation (alexnet_evaluate(), alexnet_spark_evaluate()), in the declaration's order: each one's
# argument kind (see R/arguments.R), default, values when it is a choice, and help.
evaluation_options <- list(
  crops = list(kind = "count", default = 1, choices = c(1, 10), help = "1: the centre crop; 10: the four corners and the centre of the image resized to 256/224 of the crop, and their mirrors (the paper's)"),
  batch_size = list(kind = "count>=1", default = 64, choices = NULL, help = "images scored at once"),
  parallel = list(kind = "count>=1?", default = NULL, choices = NULL, help = "images decoded at once (unset: one per CPU this process may use)"),
  image_size = list(kind = "count>=63?", default = NULL, choices = NULL, help = "the side of the crop scored (unset: the size the model trained at last; a model trained at a lower size often scores better 32 pixels above it)")
)
