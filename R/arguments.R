#' @include settings.R bench-settings.R launch-options.R model-options.R data-options.R
NULL

# The arguments of the exported functions, checked in R before any call into the core, and turned into what the
# core expects. Each function's arguments have a kind in `argument_kinds`:
#
#   count     a whole number                       number    a finite number
#   flag      TRUE or FALSE                        string    one string
#   location  one string: a path or a URL          numbers   a numeric vector (any length, no NA or Inf)
#   strings   a character vector (no NA)           data      a list (a partition), or one string
#   object    one string or an object (a Python strategy, say)
#   connection  a sparklyr connection              any       not checked here
#   counts    whole numbers (one or more, no NA)   choice    one string among `argument_choices[[name]]`
#
# A kind ending in "?" also takes NULL (the core's None). A count or counts kind may carry a least value,
# "count>=0", which its declaration in the core gives (R/*-options.R, R/*settings.R). Ranges of several arguments
# together (`partition` below `total`, ...) are the core's to check: its messages say what to use; what is checked
# here is what the core cannot show the R way (NA, vectors, types) and each argument's least value.

# The settings of a declaration of the core (a table generated from it: R/settings.R for the training settings,
# R/bench-settings.R for the benchmark's, R/launch-options.R for a Spark job's options, R/model-options.R for an
# evaluation's (and which of a board's images), a prediction's, an export's and the model pin read,
# R/data-options.R for the data stage's), by name: their kinds.
declared_kinds <- function(table) vapply(table, function(setting) setting$kind, character(1))

# The training settings of alexnet_train() and alexnet_spark_train() come from the core's declaration, through
# R/settings.R (generated from it): their kinds, their choices and what each is for.
training_kinds <- declared_kinds(training_settings)

# The values of every "choice" setting of `settings` (the rows of declared tables, joined), by name, once per
# name. A name declared twice with other values is an error, which stops the package's installation: one name is
# one setting, whose values R checks against one list.
declared_choices <- function(settings) {
  choices <- lapply(settings, function(setting) {
    if (sub("[>?].*$", "", setting$kind) == "choice") setting$choices
  })
  choices <- Filter(Negate(is.null), choices)
  for (name in unique(names(choices)[duplicated(names(choices))])) {
    differ <- unique(choices[names(choices) == name])
    if (length(differ) > 1L) {
      stop("internal: `", name, "` is declared with other choices in two declarations: ",
           paste(vapply(differ, function(values) paste(values, collapse = ", "), character(1)), collapse = " / "),
           call. = FALSE)
    }
  }
  choices[!duplicated(names(choices))]
}

# The values a "choice" argument takes, by name (an optional one also takes NULL), from every declaration: a name
# is the same setting wherever it is declared (`precision`). Given in any case, the value reaches the core in lower
# case.
argument_choices <- local({
  declared_choices(c(training_settings, benchmark_settings, launch_options, training_job_options,
                     evaluation_options, board_images_options, predict_options, features_options, export_options,
                     model_pin_options, synthetic_options, upload_options, partition_options,
                     fetch_options))
})

# A declaration's settings as the formals of an R function: each with its declared default (`defaults` replaces
# some by R expressions, such as `python = alexnet_python()`).
declared_formals <- function(table, defaults = list()) {
  values <- lapply(table, function(setting) setting$default)
  values[names(defaults)] <- defaults
  values
}

# `fun` with `declared` (declared_formals()) as formals of its own: after its other formals, before its `...` (or
# after it, with `after_dots`, for options that must be named in full, so that a setting passed through `...`
# never matches one of them by a prefix: `cache` is not `cache_dir`), or right after its formal `after`; or, with
# `first` (names of its own formals and of declared ones), those first in that order, then the others.
with_declared <- function(fun, declared, after_dots = FALSE, after = NULL, first = NULL) {
  own <- as.list(formals(fun))
  if (!is.null(first)) {
    every <- c(own, declared)
    formals(fun) <- c(every[first], every[setdiff(names(every), first)])
    return(fun)
  }
  at <- if (!is.null(after)) match(after, names(own)) + 1L else if (after_dots) length(own) + 1L else
    match("...", names(own), nomatch = length(own) + 1L)
  formals(fun) <- c(own[seq_len(at - 1L)], declared, own[seq_along(own) >= at])
  fun
}

# The value of the calling function's formal `name`: its default when its caller left it out (a formal that comes
# from a declaration is not a name the function's body shows).
formal_value <- function(name, env = parent.frame()) get(name, envir = env)

# The R session's defaults of the launch options where they differ from the core's: the workers run the Python
# alexnet uses here.
launch_defaults <- list(python = quote(alexnet_python()))

# A declaration's settings as roxygen2 `@param` lines (through `@eval`): each one's help and default (R's, where
# `defaults` has one, as declared_formals() takes them), with the stage it is for when it is one stage's. With
# `section` (its title, then the paragraphs before the list), they are instead the items of a list in a section of
# that title: "`name` (default `value`): help".
declared_params <- function(table, defaults = list(), section = NULL) {
  lines <- vapply(names(table), function(name) {
    setting <- table[[name]]
    value <- if (name %in% names(defaults)) defaults[[name]] else setting$default
    default <- paste(deparse(value, width.cutoff = 500L), collapse = " ")
    stage <- if (length(setting$stage) && nzchar(setting$stage)) paste0("for the `", setting$stage, "` stage: ")
    help <- paste0(stage, setting$help)
    if (!is.null(section)) return(sprintf("* `%s` (default `%s`): %s.", name, default, help))
    sprintf("@param %s %s%s. Default `%s`.", name, toupper(substr(help, 1, 1)), substring(help, 2), default)
  }, character(1), USE.NAMES = FALSE)
  if (is.null(section)) lines else c(paste0("@section ", section[[1]], ":"), section[-1], "", lines)
}


argument_kinds <- list(
  `%>%` = character(),
  alexnet_available = character(),
  alexnet_python = character(),
  tf_version = character(),
  alexnet_use_python = c(python = "location", persist = "flag"),
  install_alexnet = c(envname = "location", python = "location?", extras = "strings", constraints = "flag",
                      dependencies = "flag", pip_options = "strings", gpu = "flag"),
  imagenet_synthetic = c(dest = "location", declared_kinds(synthetic_options)),
  imagenet_classes = character(),
  imagenet_upload = c(source = "location", board = "location?", declared_kinds(upload_options)),
  imagenet_categories = c(board = "location?"),
  imagenet_partition = c(declared_kinds(partition_options), board = "location?", declared_kinds(fetch_options)),
  imagenet_validation = c(declared_kinds(validation_partition_options), board = "location?",
                          declared_kinds(validation_fetch_options)),
  alexnet_train = c(data = "partition?", strategy = "object?", callbacks = "any", training_kinds),
  alexnet_history = c(checkpoint_dir = "location"),
  alexnet_benchmark = c(data = "data?", declared_kinds(benchmark_settings)),
  tf_config_from_barrier = c(barrier = "any", declared_kinds(launch_options["base_port"])),
  alexnet_spark_train = c(sc = "connection", workers = "count", board = "location?",
                          declared_kinds(training_job_options), declared_kinds(launch_options), training_kinds),
  alexnet_model = c(board = "location?", declared_kinds(model_pin_options)),
  alexnet_export = c(model = "object", path = "location?", declared_kinds(export_options), board = "location?",
                     name = "string?"),
  alexnet_evaluate = c(model = "object", data = "partition?", board = "location?", declared_kinds(evaluation_options),
                       declared_kinds(board_images_options)),
  alexnet_predict = c(model = "object", images = "strings", declared_kinds(predict_options)),
  alexnet_features = c(model = "object", images = "strings", declared_kinds(features_options)),
  alexnet_filters = c(model = "object", path = "location?"),
  alexnet_spark_evaluate = c(sc = "connection", model = "object", workers = "count", board = "location?",
                             declared_kinds(evaluation_options), declared_kinds(launch_options))
)

# The arguments of the calling exported function that its caller gave (its formals, from `names`, and whatever
# `...` holds), checked against its row of `argument_kinds` and converted (whole numbers to integers), as a list
# for one call into the core. The arguments left out are not passed on, so that the core's defaults apply (see
# given_args()). A bad value is an `alexnet_error` naming the argument, before anything else runs. `renamed`
# maps an argument's old name to its new one: given by its old name (through `...`), it is passed on under the
# new one, with a warning (see renamed_args()).
checked_args <- function(fun, names, env = parent.frame(), renamed = character(), others = TRUE) {
  kinds <- argument_kinds[[fun]]
  if (is.null(kinds)) stop("internal: no argument kinds for ", fun, "()", call. = FALSE)
  args <- given_args(setdiff(names, "..."), env)
  if ("..." %in% names) {
    dots <- eval(quote(list(...)), env)
    if (!others) refuse_unknown_args(fun, dots, setdiff(names, "..."))
    args <- c(args, dots)
  }
  args <- renamed_args(args, renamed, fun)
  for (i in seq_along(args)) {
    name <- names(args)[i]
    if (is.null(name) || !nzchar(name)) next
    kind <- kinds[name]
    if (is.na(kind)) next  # not one of ours: the core names it when it does not know it
    value <- check_arg(args[[i]], name, kind, fun)
    args[i] <- list(value)
  }
  args
}

# An `alexnet_error` for what `...` of `fun` holds (`dots`), when the function takes nothing there: each name said
# with the nearest of `known` (its formals), as the core says a name it does not take; one given without a name too.
refuse_unknown_args <- function(fun, dots, known) {
  if (!length(dots)) return(invisible())
  given <- names(dots) %||% rep("", length(dots))
  said <- vapply(given, function(name) {
    if (!nzchar(name)) return("an argument without a name")
    distance <- utils::adist(name, known)[1L, ]
    near <- known[distance == min(distance) & distance <= max(1L, floor(nchar(name) * 0.4))]
    paste0("`", name, "`", if (length(near)) paste0(" (did you mean `", near[[1L]], "`?)") else "")
  }, character(1))
  alexnet_abort(fun, "() does not take ", paste(said, collapse = ", "), ": fix the name, or leave it out. Its ",
                "arguments are: ", paste(known, collapse = ", "), ".")
}

# `args` with those given by an old name (a name of `renamed`) under their new name (its value), each with a
# warning that says the new name; both names at once are an `alexnet_error`.
renamed_args <- function(args, renamed, fun) {
  for (old in intersect(names(renamed), names(args))) {
    new <- renamed[[old]]
    if (new %in% names(args)) {
      alexnet_abort("Give `", new, "` only: `", old, "` is its old name (", fun, "(", new, " = ...)).")
    }
    warning("`", old, "` is now `", new, "`: write ", fun, "(", new, " = ...).", call. = FALSE)
    names(args)[names(args) == old] <- new
  }
  args
}

# `value` checked against `kind` (see above); returned as the core wants it.
check_arg <- function(value, name, kind, fun = NULL) {
  optional <- endsWith(kind, "?")
  kind <- sub("?", "", kind, fixed = TRUE)
  least <- if (grepl(">=", kind, fixed = TRUE)) as.numeric(sub("^.*>=", "", kind)) else NULL
  kind <- sub(">=.*$", "", kind)
  if (is.factor(value)) value <- as.character(value)  # a factor stands for its labels
  if (is.null(value)) {
    if (optional || kind == "any") return(NULL)
    argument_error(name, kind, value, optional, fun, least)
  }
  ok <- switch(kind,
    any = TRUE,
    count = is_scalar(value, is.numeric) && is.finite(value) && value == round(value) &&
      (is.null(least) || value >= least),
    counts = is.numeric(value) && length(value) >= 1L && is.null(dim(value)) && all(is.finite(value)) &&
      all(value == round(value)) && (is.null(least) || all(value >= least)),
    choice = is_scalar(value, is.character) && tolower(trimws(value)) %in% argument_choices[[name]],
    number = is_scalar(value, is.numeric) && is.finite(value),
    flag = is_scalar(value, is.logical),
    string = , location = is_scalar(value, is.character),
    numbers = is.numeric(value) && all(is.finite(value)) && is.null(dim(value)),
    strings = is.character(value) && !anyNA(value) && is.null(dim(value)),
    data = (is.list(value) && !is.data.frame(value)) || is_scalar(value, is.character),
    partition = is.list(value) && !is.data.frame(value),
    object = !is.atomic(value) || is_scalar(value, is.character),
    connection = inherits(value, "spark_connection"),
    stop("internal: unknown argument kind ", kind, call. = FALSE)
  )
  if (!isTRUE(ok)) argument_error(name, kind, value, optional, fun, least)
  if (kind %in% c("count", "counts") && all(abs(value) <= .Machine$integer.max)) return(as.integer(value))
  if (kind == "choice") return(tolower(trimws(value)))
  if (kind == "number") return(as.numeric(value))
  if (kind %in% c("string", "location")) return(as.character(value))
  if (kind == "object") return(core_model(value))  # a model pin as the plain list the core reads
  value
}

is_scalar <- function(value, type) {
  type(value) && length(value) == 1L && !is.na(value) && is.null(dim(value))
}

argument_wants <- c(
  count = "a whole number", number = "a number", flag = "TRUE or FALSE", string = "one string",
  location = "one path or URL (a string)", numbers = "numbers without NA or Inf", strings = "strings without NA",
  data = "a partition (a list such as imagenet_partition() returns) or one path",
  partition = "a partition (a list such as imagenet_partition() returns)",
  object = "one string or an object", counts = "whole numbers"
)

# What an argument is for, after its error's first sentence, where a bare type would not say what to give: the help
# of the setting of that name in the declaration of `fun`'s settings (the training settings' when no function is
# named; `image_size` is one size when evaluating, several when training).
argument_hint <- function(name, kind, fun = NULL) {
  setting <- declared_tables[[fun %||% "alexnet_train"]][[name]]
  if (is.null(setting) || sub("[>?].*$", "", setting$kind) != kind) return("")
  paste0(": ", setting$help)
}

# The declaration of each function's settings, by function.
declared_tables <- list(imagenet_synthetic = synthetic_options, imagenet_upload = upload_options,
                        imagenet_partition = c(partition_options, fetch_options),
                        imagenet_validation = c(validation_partition_options, validation_fetch_options),
                        alexnet_train = training_settings,
                        alexnet_spark_train = c(training_settings, training_job_options, launch_options),
                        alexnet_benchmark = benchmark_settings,
                        alexnet_evaluate = c(evaluation_options, board_images_options),
                        alexnet_predict = predict_options, alexnet_features = features_options,
                        alexnet_export = export_options,
                        alexnet_model = model_pin_options,
                        alexnet_spark_evaluate = c(evaluation_options, launch_options))

argument_error <- function(name, kind, value, optional, fun = NULL, least = NULL) {
  if (kind == "connection") {
    alexnet_abort("`", name, "` must be a Spark connection, not ", show_value(value), ": pass the connection ",
                  "sparklyr::spark_connect(...) returns, as in ", fun %||% "alexnet_spark_train",
                  "(sc = sparklyr::spark_connect(master = \"yarn\"), ...).")
  }
  wants <- if (kind == "choice") {
    choices <- paste0("\"", argument_choices[[name]], "\"")
    if (optional) choices <- c(choices, "NULL")
    paste(c(if (length(choices) > 2L) "one of", paste(choices[-length(choices)], collapse = ", "), "or",
            choices[[length(choices)]]), collapse = " ")
  } else {
    paste0(argument_wants[[kind]], if (!is.null(least)) paste0(" >= ", least), if (optional) " or NULL")
  }
  alexnet_abort("`", name, "` must be ", wants, ", not ", show_value(value), argument_hint(name, kind, fun), ".")
}

# `value` as R shows it, on one short line: NA, "x", c("a", "b"), 2.5, NULL; longer values by type and length.
show_value <- function(value) {
  if (is.null(value)) return("NULL")
  if (is.data.frame(value)) {
    return(paste0("a data frame (as.data.frame() of a partition is for reading it: pass the list ",
                  "imagenet_partition() returns)"))
  }
  if (is.atomic(value) && length(value) == 1L && is.na(value)) return("NA")
  if (is.atomic(value) && is.null(dim(value)) && length(value) <= 6L) {
    shown <- paste(deparse(unname(value), width.cutoff = 200L), collapse = " ")
    if (nchar(shown) <= 80L) return(shown)
  }
  if (is.atomic(value)) {
    type <- typeof(value)
    return(sprintf("%s %s vector of length %d", if (type == "integer") "an" else "a", type, length(value)))
  }
  if (is.list(value) && !is.object(value)) return(sprintf("a list of length %d", length(value)))
  if (is.function(value)) return("a function")
  paste("an object of class", class(value)[[1L]])
}

# An error of class `alexnet_error` (also `error` and `condition`) with the message pasted from `...`, without
# the call: the message names the argument and says what it must be.
alexnet_abort <- function(...) {
  stop(structure(class = c("alexnet_error", "error", "condition"),
                 list(message = paste0(...), call = NULL)))
}
