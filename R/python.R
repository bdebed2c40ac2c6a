# Finding and importing the Python core. Nothing here runs at package load time: the first call
# that needs Python resolves the environment, imports the core once and keeps it.

.alexnet <- new.env(parent = emptyenv())

#' The Python environment alexnet uses
#'
#' The core of alexnet is a Python package reached through 'reticulate'. The environment is looked
#' up in this order, the first that exists wins:
#'
#' 1. the `ALEXNET_PYTHON` environment variable: a Python executable or a virtual environment folder;
#' 2. the environment recorded by [install_alexnet()] or [alexnet_use_python()]
#'    (a file under `tools::R_user_dir("alexnet", "config")`);
#' 3. the virtual environment `r-alexnet` (what [install_alexnet()] creates by default).
#'
#' When Python is already running in this R session (for example after `reticulate::import("tensorflow")`),
#' that interpreter is used, and it must have the core installed.
#'
#' @returns `alexnet_python()`: the path of the Python executable, or `NULL` when none is configured.
#' @examples
#' alexnet_python()
#' @export
alexnet_python <- function() {
  candidates <- c(
    Sys.getenv("ALEXNET_PYTHON", unset = ""),
    read_python_config(),
    virtualenv_python_path(formals(install_alexnet)$envname)  # the environment it makes by default
  )
  for (candidate in candidates) {
    python <- python_executable(candidate)
    if (!is.null(python)) return(python)
  }
  NULL
}

#' @rdname alexnet_python
#' @param python A Python executable, or the folder of a virtual environment that has the core.
#' @param persist Record the choice for future R sessions (`TRUE`), or for this session only.
#' @returns `alexnet_use_python()`: the path of the Python executable, invisibly.
#' @examples
#' \dontrun{
#' alexnet_use_python("~/.virtualenvs/r-alexnet")
#' }
#' @export
alexnet_use_python <- function(python, persist = TRUE) {
  checked_args("alexnet_use_python", names(formals()))
  executable <- python_executable(python)
  if (is.null(executable)) {
    alexnet_abort("No Python executable found at \"", python, "\". Give a python binary or a virtual ",
                  "environment folder, or run alexnet::install_alexnet() to make one.")
  }
  ran <- tryCatch(suppressWarnings(system2(executable, c("-c", shQuote("import sys; print(sys.version_info[0])")),
                                           stdout = TRUE, stderr = TRUE)),
                  error = function(e) structure(conditionMessage(e), status = 1L))
  if (!is.null(attr(ran, "status")) || !identical(trimws(ran[length(ran)]), "3")) {
    alexnet_abort("\"", executable, "\" does not run as Python 3 here (", trimws(paste(ran, collapse = " ")),
                  "): give a python binary or a virtual environment folder, or run alexnet::install_alexnet() ",
                  "to make one. Nothing was recorded.")
  }
  if (isTRUE(persist)) {
    config <- python_config_file()
    dir.create(dirname(config), recursive = TRUE, showWarnings = FALSE)
    writeLines(executable, config)
  } else {
    Sys.setenv(ALEXNET_PYTHON = executable)
  }
  invisible(executable)
}

python_config_file <- function() {
  file.path(tools::R_user_dir("alexnet", which = "config"), "python")
}

read_python_config <- function() {
  config <- python_config_file()
  if (!file.exists(config)) return("")
  line <- readLines(config, n = 1L, warn = FALSE)
  if (length(line) == 0L) "" else trimws(line)
}

virtualenv_python_path <- function(envname) {
  home <- Sys.getenv("WORKON_HOME", unset = file.path(path.expand("~"), ".virtualenvs"))
  file.path(home, envname)
}

# A Python executable from a binary path or a virtual environment folder, or NULL. The path is made
# absolute but symbolic links are kept: a virtual environment's bin/python is a link to the base
# interpreter, and resolving it would lose the environment.
python_executable <- function(path) {
  if (!nzchar(path)) return(NULL)
  path <- absolute_path(path)
  if (dir.exists(path)) {
    for (candidate in file.path(path, c("bin/python", "Scripts/python.exe"))) {
      if (file.exists(candidate)) return(candidate)
    }
    return(NULL)
  }
  if (file.exists(path)) path else NULL
}

absolute_path <- function(path) {
  path <- path.expand(path)
  if (!grepl("^(/|[A-Za-z]:[/\\\\])", path)) path <- file.path(getwd(), path)
  sub("/+$", "", gsub("/\\./", "/", path))
}

missing_core_message <- function(detail = NULL) {
  paste0(
    "The Python core of alexnet is not available",
    if (!is.null(detail)) paste0(" (", detail, ")") else "", ".\n",
    "Run alexnet::install_alexnet() once to create a Python environment with it, or point alexnet at ",
    "an environment that has it: Sys.setenv(ALEXNET_PYTHON = \"/path/to/venv\") or ",
    "alexnet::alexnet_use_python(\"/path/to/venv\")."
  )
}

setup_error <- c("alexnet_setup_error", "alexnet_error")

# Why no Python environment is found: one is named where alexnet looks but is not there, or none is named.
configured_elsewhere <- function() {
  named <- Sys.getenv("ALEXNET_PYTHON", unset = "")
  if (nzchar(named)) return(paste0("ALEXNET_PYTHON names \"", named, "\", which has no Python"))
  recorded <- read_python_config()
  if (nzchar(recorded)) {
    return(paste0("alexnet_use_python() recorded \"", recorded, "\", which is no longer there"))
  }
  "no Python environment is configured"
}

# Python in this session: alexnet's environment, unless Python already runs. Returns its configuration.
use_alexnet_python <- function() {
  if (!reticulate::py_available(initialize = FALSE)) {
    python <- alexnet_python()
    if (is.null(python)) alexnet_condition(missing_core_message(configured_elsewhere()), setup_error)
    named <- Sys.getenv("ALEXNET_PYTHON", unset = "")
    if (nzchar(named) && is.null(python_executable(named))) {
      # a misspelt path would otherwise go unnoticed, another environment quietly used in its place
      warning(structure(class = c("alexnet_warning", "warning", "condition"), list(
        message = paste0("ALEXNET_PYTHON names \"", named, "\", which has no Python: using ", python,
                         " instead. Correct ALEXNET_PYTHON, or unset it."),
        call = NULL)))
    }
    reticulate::use_python(python, required = TRUE)
  }
  reticulate::py_config()
}

# The imported Python module `alexnet`, imported on first use and kept for the session.
alexnet_core <- function() {
  if (!is.null(.alexnet$core)) return(.alexnet$core)
  config <- use_alexnet_python()
  imported <- tryCatch({
    reticulate::py_run_string(import_core_code, local = TRUE, convert = FALSE)
    TRUE
  }, error = function(e) conditionMessage(e))
  if (!isTRUE(imported)) {
    detail <- if (grepl("No module named 'alexnet'", imported, fixed = TRUE)) {
      paste0("Python at ", config$python, " has no module 'alexnet'")
    } else {
      paste0("importing it with Python at ", config$python, " failed: ", imported)
    }
    alexnet_condition(missing_core_message(detail), setup_error)
  }
  .alexnet$core <- reticulate::import("alexnet", convert = TRUE)
  reg.finalizer(.alexnet, remove_autograph_files, onexit = TRUE)
  .alexnet$core
}

# At R's exit (a finalizer of .alexnet, registered when the core is imported): the source files TensorFlow's
# autograph wrote for this session's converted functions, which Python embedded in R would leave in the temporary
# folder (the core's remove_autograph_files() says why). Nothing when Python is no longer there to ask.
remove_autograph_files <- function(env) {
  if (is.null(env$core) || !reticulate::py_available(initialize = FALSE)) return(invisible())
  try(reticulate::import("alexnet.tfimport")$remove_autograph_files(), silent = TRUE)
  invisible()
}

# Imports the core with the working directory left off sys.path: a folder named `alexnet` there
# (an R library, or R CMD check's folder) would otherwise shadow the core as an empty namespace package.
import_core_code <- "
def _import_core():
    import importlib, os, sys
    saved = list(sys.path)
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ('', '.', cwd)]
    try:
        shadow = sys.modules.get('alexnet')
        if shadow is not None and getattr(shadow, '__file__', None) is None:
            del sys.modules['alexnet']
        importlib.import_module('alexnet')
    finally:
        sys.path[:] = saved

_import_core()
"

#' Is the Python core available?
#'
#' `TRUE` when the Python environment alexnet would use has the core installed with its dependencies (TensorFlow
#' among them, looked for without importing it). Unlike the other functions, this one never fails: use it to skip
#' work (and tests) that need Python. When it is `FALSE`, [install_alexnet()] makes the environment.
#'
#' @returns `TRUE` or `FALSE`.
#' @examples
#' alexnet_available()
#' @export
alexnet_available <- function() {
  tryCatch({
    alexnet_core()
    missing <- reticulate::py_to_r(reticulate::import("alexnet.errors", convert = FALSE)$missing_dependencies())
    length(missing) == 0L
  }, error = function(e) FALSE)
}

# A function of the core, callable from R. Looking it up with py_get_attr() first makes an import
# error inside the core (a missing dependency, say) surface with its own message instead of
# reticulate's "module has no attribute".
# Every call into the core goes through core_function() or core_module(): its Python errors become alexnet's R
# conditions (see with_core_errors() in errors.R).
core_function <- function(name) {
  core <- alexnet_core()
  sync_python_environment()
  with_core_errors(reticulate::py_get_attr(core, name))
  core_callable(core[[name]])
}

# A submodule of the Python core (alexnet.launch.spark, ...), whose functions raise R conditions (core_proxy()).
core_module <- function(name, convert = TRUE) {
  alexnet_core()
  sync_python_environment()
  core_proxy(with_core_errors(reticulate::import(paste0("alexnet.", name), convert = convert)), convert)
}

# Python copies the environment once, when it starts: a Sys.setenv() made in R after that would not
# reach the core. This is the one way R's environment reaches Python: before each call into the core, and
# after each top-level call (sync_environment_callback), the variables the core and its storage libraries
# read are copied over when they changed, and those copied before and since unset in R are removed.
# TF_CONFIG goes through the core's normalise_tf_config(), the one place that turns the bare string
# jsonlite::toJSON(auto_unbox = TRUE) writes for a one-worker cluster into the list TensorFlow needs, so
# that a strategy created after the copy (tf$distribute$MultiWorkerMirroredStrategy()) reads it as is.
synced_variables <- "^(ALEXNET_|TF_CONFIG$|STORAGE_EMULATOR_HOST$|GOOGLE_APPLICATION_CREDENTIALS$|AWS_)"

synced_environment <- function() {
  env <- Sys.getenv()
  env <- env[grepl(synced_variables, names(env))]
  env[order(names(env))]
}

sync_python_environment <- function() {
  env <- synced_environment()
  if (identical(env, .alexnet$synced_values)) return(invisible())
  gone <- setdiff(names(.alexnet$synced_values), names(env))
  os <- reticulate::import("os", convert = FALSE)
  for (name in gone) os$environ$pop(name, NULL)
  values <- as.list(env)
  if (!is.null(values$TF_CONFIG)) values$TF_CONFIG <- normalised_tf_config(values$TF_CONFIG)
  if (length(values)) os$environ$update(reticulate::dict(values))
  # os.environ writes through to the process environment: R now reads the normalised TF_CONFIG too
  .alexnet$synced_values <- synced_environment()
  invisible()
}

normalised_tf_config <- function(value) {
  tryCatch(reticulate::import("alexnet.train.cluster")$normalise_tf_config(value), error = function(e) value)
}

# The same after every top-level call, once Python runs (registered by .onLoad), so that variables set in
# R reach Python code called directly through reticulate: the original r-tensorflow/alexnet's stand-alone
# multi-worker script sets TF_CONFIG at top level and creates its MultiWorkerMirroredStrategy with
# reticulate on the next line, with no alexnet call in between. Starts no Python; imports the core's
# cluster module (no TensorFlow) only when TF_CONFIG changed.
sync_environment_callback <- function(expr, value, ok, visible) {
  if (isNamespaceLoaded("reticulate") && reticulate::py_available(initialize = FALSE)) {
    try(sync_python_environment(), silent = TRUE)
  }
  TRUE
}
