#' Install the Python core of alexnet
#'
#' Creates a Python virtual environment and installs into it the Python core of alexnet, which the
#' installed R package carries under `system.file("python", package = "alexnet")`, with
#' TensorFlow, tf-keras, pins, gcsfs and the other dependencies at the versions the package was
#' tested with. Then records the environment (see [alexnet_python()]) so that later R sessions,
#' including Spark's R workers on this machine, find it. Run it once per machine.
#'
#' Credentials are not part of the environment: Google Cloud Storage boards use Application Default
#' Credentials (`gcloud auth application-default login` or `GOOGLE_APPLICATION_CREDENTIALS`), S3
#' boards the usual AWS variables or profiles.
#'
#' @param envname A virtual environment name (created under `~/.virtualenvs`, or `WORKON_HOME`) or
#'   a path to a folder.
#' @param python The Python (>= 3.10) used to create the environment; by default `python3` on the
#'   `PATH`.
#' @param extras Optional parts of the core to install as well: `"s3"` (s3fs), `"spark"` (pyspark) and
#'   `"tensorboard"` (TensorBoard and its profiler plugin, to watch `log_dir`).
#' @param constraints Install the exact versions the package was tested with (`TRUE`), or let pip
#'   choose within the declared ranges (`FALSE`).
#' @param dependencies Install the dependencies (`TRUE`); `FALSE` installs the core alone, into an
#'   environment that already has them.
#' @param pip_options Further options for `pip install`, such as `"--index-url=..."`.
#' @param gpu Install TensorFlow's `and-cuda` extra as well (`tensorflow[and-cuda]`, at the version
#'   the package was tested with unless `constraints = FALSE`): the CUDA libraries (cuDNN, cuBLAS,
#'   NCCL, ...) TensorFlow needs to compute on an NVIDIA GPU, about 3 GB of wheels. Without them
#'   TensorFlow finds no GPU and trains on the CPU (the core then warns, naming this argument). The
#'   default is whether this machine has an NVIDIA GPU (a device `/dev/nvidia0`, `/dev/nvidia1`, ...):
#'   a machine with one gets them, one without is spared them; run it again with `gpu = TRUE` on a
#'   machine whose GPU is not seen that way (or `FALSE` to leave them out). Linux only, as TensorFlow's
#'   GPU wheels are; with `dependencies = FALSE` nothing but the core is installed.
#' @returns The path of the environment's Python executable, invisibly.
#' @seealso [alexnet_python()] for how the environment is found, [alexnet_available()].
#' @examples
#' \dontrun{
#' install_alexnet()
#' install_alexnet("~/envs/alexnet", extras = c("spark", "tensorboard"))
#' install_alexnet(gpu = TRUE)  # with TensorFlow's CUDA libraries, whatever the machine
#' }
#' @export
install_alexnet <- function(envname = "r-alexnet", python = NULL, extras = c("s3", "spark"),
                            constraints = TRUE, dependencies = TRUE, pip_options = character(),
                            gpu = nvidia_gpu()) {
  checked_args("install_alexnet", names(formals()))
  unknown <- setdiff(extras, core_extras)
  if (length(unknown)) {
    alexnet_abort("Unknown `extras`: ", paste0("\"", unknown, "\"", collapse = ", "),
                  "; choose from ", and_list(paste0("\"", core_extras, "\"")), ".")
  }
  source <- core_source()

  envdir <- if (grepl("[/\\\\]", envname) || startsWith(envname, "~")) {
    path.expand(envname)
  } else {
    virtualenv_python_path(envname)
  }
  env_python <- python_executable(envdir)
  if (is.null(env_python)) {
    python <- python %||% Sys.which("python3")
    if (!nzchar(python)) {
      alexnet_abort("No python3 found on the PATH: install Python 3.10 or newer, or pass `python =`.")
    }
    if (!nzchar(Sys.which(python))) {  # a name on the PATH, or a path, that can be run
      alexnet_abort("`python` = \"", python, "\" does not exist or cannot be run: give the path of a Python 3.10 ",
                    "or newer, or leave `python` unset for python3 on the PATH.")
    }
    message("Creating the Python environment ", envdir)
    run_checked(python, c("-m", "venv", shQuote(envdir)))
    env_python <- python_executable(envdir)
  }

  # pip builds in the folder it is given: copy the core out of the (possibly read-only) R library.
  build <- tempfile("alexnet-core-")
  dir.create(build)
  on.exit(unlink(build, recursive = TRUE), add = TRUE)
  file.copy(list.files(source, full.names = TRUE), build, recursive = TRUE)

  args <- pip_install_args(build, extras, constraints, dependencies, pip_options, gpu)
  cuda <- cuda_requirement(build, constraints, dependencies, gpu)
  message("Installing the alexnet core", if (isTRUE(dependencies)) " and its dependencies" else "",
          if (!is.null(cuda)) paste0(", with TensorFlow's CUDA libraries (", cuda, "),") else "",
          " into ", envdir,
          # measured: 4 minutes and 3.2 GB with the default extras, TensorFlow's wheels not yet in pip's cache
          if (isTRUE(dependencies)) paste0(": a few minutes and about 3 GB with TensorFlow ",
                                           "(pip's own lines are shown only if it fails)") else "")
  run_checked(env_python, args)

  alexnet_use_python(env_python, persist = TRUE)
  if (reticulate::py_available(initialize = FALSE) &&
      !identical(reticulate::py_config()$python, env_python)) {
    message("Python is already running in this R session with another interpreter: ",
            "restart R to use the new environment.")
  }
  invisible(env_python)
}

# The arguments of install_alexnet()'s `python -m pip install`: the core copied to `build` with its `extras`, at the
# versions of its constraints.txt (`constraints`), with its dependencies (or none), and TensorFlow's CUDA libraries
# with `gpu` (see cuda_requirement()).
pip_install_args <- function(build, extras, constraints, dependencies, pip_options, gpu) {
  target <- if (length(extras)) paste0(build, "[", paste(extras, collapse = ","), "]") else build
  args <- c("-m", "pip", "install", "--disable-pip-version-check", "--upgrade")
  if (isTRUE(constraints) && isTRUE(dependencies)) {
    args <- c(args, "-c", shQuote(file.path(build, "constraints.txt")))
  }
  if (!isTRUE(dependencies)) args <- c(args, "--no-deps")
  cuda <- cuda_requirement(build, constraints, dependencies, gpu)
  c(args, pip_options, shQuote(target), if (!is.null(cuda)) shQuote(cuda))
}

# What install_alexnet(gpu = TRUE) adds to pip's line: TensorFlow with its `and-cuda` extra (the CUDA wheels), at the
# version constraints.txt in `build` pins (any the core takes without `constraints`); NULL without `gpu` or without
# the dependencies (pip's --no-deps would install TensorFlow alone, without them).
cuda_requirement <- function(build, constraints, dependencies, gpu) {
  if (!isTRUE(gpu) || !isTRUE(dependencies)) return(NULL)
  pinned <- if (isTRUE(constraints)) pinned_version(file.path(build, "constraints.txt"), "tensorflow") else NULL
  paste0("tensorflow[and-cuda]", if (!is.null(pinned)) paste0("==", pinned) else "")
}

# The version a constraints file pins `package` at (`package==version`), or NULL.
pinned_version <- function(file, package) {
  lines <- if (file.exists(file)) trimws(readLines(file, warn = FALSE)) else character()
  pinned <- sub(paste0("^", package, "=="), "", lines[startsWith(lines, paste0(package, "=="))])
  if (length(pinned)) pinned[[1]] else NULL
}

# Does this machine have an NVIDIA GPU: a device /dev/nvidia0, /dev/nvidia1, ... (as the core's tfimport.has_gpu()
# asks; `dev`: another folder, for tests)? install_alexnet()'s default for `gpu`.
nvidia_gpu <- function(dev = "/dev") {
  length(Sys.glob(file.path(dev, "nvidia[0-9]*"))) > 0L
}

# The optional parts of the core that install_alexnet() installs on request: the extras of its pyproject.toml
# ([project.optional-dependencies]) but the developers' (`test`, and `all`, which takes `test` too).
core_extras <- c("s3", "spark", "tensorboard")

# The Python core shipped inside the installed R package.
core_source <- function() {
  source <- system.file("python", package = "alexnet")
  if (!nzchar(source) || !file.exists(file.path(source, "pyproject.toml"))) {
    alexnet_abort("This installation of the alexnet R package does not carry its Python core ",
                  "(inst/python). Reinstall the package from a source tarball or, in a checkout of the ",
                  "repository, run `make setup`.")
  }
  source
}

# Runs `command` with `args`; a failure is an error that names the command, keeps its whole output in a log file
# and quotes what of it says why (failure_excerpt()).
run_checked <- function(command, args) {
  output <- tryCatch(
    with_python_environment(suppressWarnings(system2(command, args, stdout = TRUE, stderr = TRUE))),
    error = function(e) alexnet_abort("Could not run ", command, ": ", conditionMessage(e))
  )
  status <- attr(output, "status") %||% 0L
  if (!identical(as.integer(status), 0L)) {
    log <- tempfile("alexnet-install-", fileext = ".log")
    writeLines(output, log)
    alexnet_abort("Command failed (exit ", status, "): ", command, " ", paste(args, collapse = " "), "\n",
                  paste(failure_excerpt(output), collapse = "\n"), "\n",
                  "Its whole output: ", log)
  }
  invisible(output)
}

# What of a failed command's `output` an error quotes: the lines that name an error, a timeout or a refusal (at
# most `named`, first ones first), then the last `last` lines. pip's own reason often lies far above its last
# lines: a build dependency's failed download ends in a traceback and two notes about subprocesses.
failure_excerpt <- function(output, named = 15L, last = 10L) {
  n <- length(output)
  if (n <= named + last) return(output)
  tail_from <- n - last + 1L
  reasons <- grep("error|exception|timed out|timeout|refused|denied|no space|not found|could not",
                  output[seq_len(tail_from - 1L)], ignore.case = TRUE)
  reasons <- utils::head(reasons, named)
  c(output[reasons], if (length(reasons) && max(reasons) < tail_from - 1L) "...", output[tail_from:n])
}

`%||%` <- function(x, y) if (is.null(x)) y else x

# `words` as a list in a sentence: "a", "a and b", "a, b and c".
and_list <- function(words) {
  if (length(words) < 2L) return(paste(words, collapse = ""))
  paste(paste(words[-length(words)], collapse = ", "), "and", words[[length(words)]])
}

# R puts its own library folders in front of LD_LIBRARY_PATH (etc/ldpaths); a Python started from R then
# loads the system's libpython from there instead of its own, and its compiled modules (ssl, ...) fail to
# load. `expr` runs with the LD_LIBRARY_PATH the process would have had outside R. (Processes the core
# starts get the same from alexnet.child.python_environment.)
with_python_environment <- function(expr) {
  old <- Sys.getenv("LD_LIBRARY_PATH", unset = NA)
  new <- library_path_outside_r(old)
  on.exit(if (is.na(old)) Sys.unsetenv("LD_LIBRARY_PATH") else Sys.setenv(LD_LIBRARY_PATH = old), add = TRUE)
  if (is.na(new)) Sys.unsetenv("LD_LIBRARY_PATH") else Sys.setenv(LD_LIBRARY_PATH = new)
  force(expr)
}

# `path` without the prefix R's etc/ldpaths added (as often as nested R processes added it); NA when
# nothing else is left.
library_path_outside_r <- function(path = Sys.getenv("LD_LIBRARY_PATH", unset = NA)) {
  prefix <- r_library_prefix()
  if (is.na(path) || !nzchar(prefix)) return(path)
  while (identical(path, prefix) || startsWith(path, paste0(prefix, ":"))) {
    path <- substring(path, nchar(prefix) + 2L)
  }
  if (nzchar(path)) path else NA_character_
}

# What R's etc/ldpaths puts in front of LD_LIBRARY_PATH, computed again the way R does (R does not export it).
r_library_prefix <- function() {
  ldpaths <- file.path(R.home("etc"), "ldpaths")
  if (!file.exists(ldpaths) || !nzchar(Sys.which("sh"))) return("")
  out <- suppressWarnings(system2("env", c("-u", "LD_LIBRARY_PATH", "sh", "-c",
                                           shQuote('. "$1"; printf %s "$LD_LIBRARY_PATH"'), "sh",
                                           shQuote(ldpaths)), stdout = TRUE, stderr = FALSE))
  if (length(out) == 1L) out else ""
}
