test_that("library(alexnet) starts no Python", {
  started <- run_fresh_r(function() {
    Sys.unsetenv("RETICULATE_PYTHON")
    library(alexnet)
    reticulate::py_available(initialize = FALSE)
  })
  expect_false(started)
})

test_that("unloading the package unsets the variables loading it set, and keeps a user's own", {
  result <- run_fresh_r(function() {
    Sys.unsetenv(c("RETICULATE_PYTHON", "TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL"))
    Sys.setenv(TF_CPP_MIN_LOG_LEVEL = "1")  # the user's choice
    loadNamespace("alexnet")
    loaded <- Sys.getenv(c("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL"))
    unloadNamespace("alexnet")
    list(loaded = loaded, unloaded = Sys.getenv(c("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL"), unset = NA))
  })
  expect_equal(unname(result$loaded), c("1", "1"))
  expect_equal(unname(result$unloaded), c(NA, "1"))
})

test_that("without an environment, the first call says to run install_alexnet()", {
  config <- withr::local_tempdir()
  result <- run_fresh_r(function() {
    Sys.unsetenv("RETICULATE_PYTHON")
    library(alexnet)
    error <- tryCatch({
      imagenet_synthetic(tempfile(), classes = 1, images_per_class = 1)
      NULL
    }, error = identity)
    list(message = conditionMessage(error), class = class(error), available = alexnet_available())
  }, env = c(ALEXNET_PYTHON = file.path(config, "nowhere"),
             R_USER_CONFIG_DIR = config, WORKON_HOME = config))
  expect_false(result$available)
  expect_equal(result$class, c("alexnet_setup_error", "alexnet_error", "error", "condition"))
  expect_match(result$message, "install_alexnet()", fixed = TRUE)
  expect_match(result$message, "ALEXNET_PYTHON", fixed = TRUE)
})

test_that("alexnet_available() is FALSE for a core whose Python lacks TensorFlow", {
  skip_if_no_alexnet()
  result <- run_fresh_r(function() {
    before <- alexnet::alexnet_available()
    reticulate::py_run_string("import sys; sys.modules['tensorflow'] = None")  # what such a Python finds
    list(before = before, after = alexnet::alexnet_available())
  }, env = c(ALEXNET_PYTHON = alexnet_python()))
  expect_true(result$before)
  expect_false(result$after)
})

test_that("an ALEXNET_PYTHON with no Python behind it is said when another environment is used instead", {
  skip_if_no_alexnet()
  config <- withr::local_tempdir()
  dir.create(file.path(config, "R", "alexnet"), recursive = TRUE)
  writeLines(alexnet_python(), file.path(config, "R", "alexnet", "python"))  # what alexnet_use_python() records
  result <- run_fresh_r(function() {
    Sys.unsetenv("RETICULATE_PYTHON")
    said <- character()
    classes <- withCallingHandlers(nrow(alexnet::imagenet_classes()), warning = function(w) {
      said <<- c(said, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
    list(said = said, classes = classes)
  }, env = c(ALEXNET_PYTHON = file.path(config, "misspelt"), R_USER_CONFIG_DIR = config, WORKON_HOME = config))
  expect_equal(result$classes, 1000L)
  expect_length(result$said, 1L)
  expect_match(result$said, "ALEXNET_PYTHON names \".*misspelt\", which has no Python: using .* instead")
})

test_that("a Python without the core gets the same advice, naming that Python", {
  skip_if(!nzchar(Sys.which("python3")), "no python3 on the PATH")
  config <- withr::local_tempdir()
  venv <- file.path(config, "empty-venv")
  system2(Sys.which("python3"), c("-m", "venv", "--without-pip", venv))
  result <- run_fresh_r(function() {
    Sys.unsetenv("RETICULATE_PYTHON")
    tryCatch(alexnet::imagenet_categories(), error = conditionMessage)
  }, env = c(ALEXNET_PYTHON = venv, R_USER_CONFIG_DIR = config))
  expect_match(result, "has no module 'alexnet'", fixed = TRUE)
  expect_match(result, "install_alexnet()", fixed = TRUE)
  expect_match(result, "empty-venv", fixed = TRUE)
})

test_that("alexnet_python() prefers ALEXNET_PYTHON, then the recorded environment", {
  dir <- withr::local_tempdir()
  withr::local_envvar(R_USER_CONFIG_DIR = dir, WORKON_HOME = file.path(dir, "venvs"))
  recorded <- file.path(dir, "recorded", "bin", "python")
  explicit <- file.path(dir, "explicit", "bin", "python")
  for (p in c(recorded, explicit)) {  # a stand-in that answers as Python 3 does
    dir.create(dirname(p), recursive = TRUE)
    writeLines(c("#!/bin/sh", "echo 3"), p)
    Sys.chmod(p, "755")
  }
  withr::local_envvar(ALEXNET_PYTHON = "")
  expect_null(alexnet_python())
  expect_equal(alexnet:::configured_elsewhere(), "no Python environment is configured")
  alexnet_use_python(file.path(dir, "recorded"))
  expect_equal(alexnet_python(), recorded)
  withr::local_envvar(ALEXNET_PYTHON = file.path(dir, "explicit"))
  expect_equal(alexnet_python(), explicit)
  expect_error(alexnet_use_python(file.path(dir, "missing")), "install_alexnet")
  # a file that is not a Python is refused, and nothing is recorded
  not_python <- file.path(dir, "notes.txt")
  writeLines("not a program", not_python)
  expect_error(alexnet_use_python(not_python), "does not run as Python 3 here .*Nothing was recorded",
               class = "alexnet_error")
  expect_equal(alexnet:::read_python_config(), recorded)
  # an environment named where alexnet looks but gone is named as such
  unlink(file.path(dir, "recorded"), recursive = TRUE)
  withr::local_envvar(ALEXNET_PYTHON = "")
  expect_null(alexnet_python())
  expect_match(alexnet:::configured_elsewhere(), "alexnet_use_python() recorded \"", fixed = TRUE)
  expect_match(alexnet:::configured_elsewhere(), "which is no longer there", fixed = TRUE)
  withr::local_envvar(ALEXNET_PYTHON = file.path(dir, "gone"))
  expect_match(alexnet:::configured_elsewhere(), "^ALEXNET_PYTHON names \".*gone\", which has no Python$")
  # last, the environment install_alexnet() makes by default, under WORKON_HOME
  default <- file.path(dir, "venvs", formals(install_alexnet)$envname, "bin", "python")
  dir.create(dirname(default), recursive = TRUE)
  file.copy(explicit, default)
  withr::local_envvar(ALEXNET_PYTHON = "")
  expect_equal(alexnet_python(), default)
  expect_equal(basename(dirname(dirname(default))), "r-alexnet")
})

test_that("install_alexnet() names a `python` that cannot be run, before creating anything", {
  dir <- withr::local_tempdir()
  env <- file.path(dir, "env")
  expect_error(install_alexnet(env, python = file.path(dir, "no-python3")),
               "`python` = \"[^\"]*no-python3\" does not exist or cannot be run", class = "alexnet_error")
  expect_false(dir.exists(env))
})

test_that("the core is imported once, on first use", {
  skip_if_no_alexnet()
  core <- alexnet:::alexnet_core()
  expect_true(inherits(core, "python.builtin.module"))
  expect_identical(alexnet:::alexnet_core(), core)
  expect_equal(reticulate::py_get_attr(core, "__name__", silent = TRUE) |> reticulate::py_to_r(), "alexnet")
})

test_that("install_alexnet() installs the core carried by the R package into a new environment", {
  skip_if(!nzchar(Sys.which("python3")), "no python3 on the PATH")
  skip_if(!nzchar(system.file("python", "pyproject.toml", package = "alexnet")),
          "this installation does not carry the Python core")
  dir <- withr::local_tempdir()
  withr::local_envvar(R_USER_CONFIG_DIR = dir)
  env <- file.path(dir, "env")
  # The dependencies are large; --no-deps checks the mechanism: venv, build from inst/python, record. pip still
  # downloads setuptools from PyPI to build the core.
  python <- retry_on_network(function() {
    suppressMessages(install_alexnet(env, extras = character(), dependencies = FALSE))
  })
  expect_true(file.exists(python))
  version <- system2(python, c("-c", shQuote("import alexnet; print(alexnet.__version__)")),
                     stdout = TRUE)
  expect_equal(version, as.character(utils::packageVersion("alexnet")))
  expect_equal(alexnet:::read_python_config(), python)
})

test_that("a folder named alexnet in the working directory does not shadow the core", {
  skip_if_no_alexnet()
  dir <- withr::local_tempdir()
  dir.create(file.path(dir, "alexnet"))
  python <- alexnet_python()
  result <- callr::r(function(dir) {
    setwd(dir)
    library(alexnet)
    version <- tryCatch(reticulate::py_to_r(reticulate::py_get_attr(alexnet:::alexnet_core(), "__version__")),
                        error = conditionMessage)
    version
  }, args = list(dir), env = c(callr::rcmd_safe_env(), ALEXNET_PYTHON = python))
  expect_equal(result, as.character(utils::packageVersion("alexnet")))
})

test_that("variables set in R after Python started reach the core", {
  skip_if_no_alexnet()
  alexnet:::alexnet_core()
  board <- file.path(withr::local_tempdir(), "env-board")
  withr::local_envvar(ALEXNET_BOARD = board)
  expect_equal(alexnet:::core_module("storage.board")$default_board(), board)
})

test_that("a variable unset in R is unset for the core too", {
  skip_if_no_alexnet()
  withr::with_envvar(c(ALEXNET_TEST_SYNC = "on"), {
    expect_equal(alexnet:::core_module("storage.board")$os$environ$get("ALEXNET_TEST_SYNC"), "on")
  })
  expect_null(alexnet:::core_module("storage.board")$os$environ$get("ALEXNET_TEST_SYNC"))
})

test_that("after each top-level call, variables set in R reach Python without a core call", {
  skip_if_no_alexnet()
  alexnet:::alexnet_core()
  expect_true("alexnet-environment" %in% getTaskCallbackNames())
  os <- reticulate::import("os", convert = TRUE)
  withr::with_envvar(c(TF_CONFIG = '{"cluster": {"worker": ["127.0.0.1:1"]}}'), {
    expect_null(os$environ$get("TF_CONFIG"))  # within this call, Python still has its old copy
    expect_true(alexnet:::sync_environment_callback(quote(x), NULL, TRUE, FALSE))  # what R runs after it
    expect_equal(os$environ$get("TF_CONFIG"), '{"cluster": {"worker": ["127.0.0.1:1"]}}')
  })
  alexnet:::sync_environment_callback(quote(x), NULL, TRUE, FALSE)
  expect_null(os$environ$get("TF_CONFIG"))
})

test_that("a one-worker TF_CONFIG written by jsonlite reaches Python with its worker as a list", {
  skip_if_no_alexnet()
  alexnet:::alexnet_core()
  os <- reticulate::import("os", convert = TRUE)
  withr::with_envvar(c(TF_CONFIG = '{"cluster":{"worker":"127.0.0.1:1"},"task":{"type":"worker","index":0}}'), {
    alexnet:::sync_environment_callback(quote(x), NULL, TRUE, FALSE)
    seen <- jsonlite::fromJSON(os$environ$get("TF_CONFIG"), simplifyVector = FALSE)
    expect_equal(seen$cluster$worker, list("127.0.0.1:1"))  # what TensorFlow needs
    expect_equal(Sys.getenv("TF_CONFIG"), os$environ$get("TF_CONFIG"))  # R and Python agree
  })
  alexnet:::sync_environment_callback(quote(x), NULL, TRUE, FALSE)
  expect_null(os$environ$get("TF_CONFIG"))
})

test_that("the R functions show the core's defaults, which are defined once, in the core", {
  skip_if_no_alexnet()
  alexnet:::alexnet_core()
  inspect <- reticulate::py_run_string(paste(
    "def _alexnet_defaults(name):",
    "    import alexnet, inspect",
    "    function = getattr(alexnet, name)  # the package's one map of public functions",
    "    return {k: v.default for k, v in inspect.signature(function).parameters.items()",
    "            if v.default is not inspect.Parameter.empty}",
    sep = "\n"), local = TRUE)
  pairs <- list(
    list(alexnet_train, "alexnet_train"),
    list(imagenet_partition, "imagenet_partition"),
    list(imagenet_upload, "imagenet_upload"),
    list(imagenet_synthetic, "imagenet_synthetic"),
    list(alexnet_benchmark, "alexnet_benchmark"),
    list(alexnet_spark_train, "alexnet_spark_train"),
    list(tf_config_from_barrier, "tf_config_json")
  )
  expect_true(all(vapply(pairs, `[[`, "", 2L) %in% reticulate::import("alexnet")$`__all__`))
  compared <- 0L
  for (pair in pairs) {
    core <- inspect$`_alexnet_defaults`(pair[[2]])
    for (name in intersect(names(formals(pair[[1]])), names(core))) {
      # none in R: an argument to give (imagenet_upload()'s `source`, whose None in the core stands for its old name)
      if (identical(formals(pair[[1]])[[name]], quote(expr = ))) next
      shown <- formals(pair[[1]])[[name]]
      if (is.call(shown) || is.symbol(shown)) next  # computed in R (the Python environment, say)
      expect_equal(unlist(shown), unlist(core[[name]]), ignore_attr = TRUE,
                   label = paste0(pair[[2]], "(", name, ") in R"), expected.label = "the core's default")
      compared <- compared + 1L
    }
  }
  expect_gt(compared, 30L)
})

test_that("library(alexnet) sets the core's tensorflow.env, each variable only where it is not set", {
  declared <- alexnet:::tensorflow_environment()
  expect_true(all(c(TF_USE_LEGACY_KERAS = "1", TF_CPU_ALLOCATOR_USE_BFC = "true") %in% declared))
  expect_setequal(names(declared), c("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL", "TF_CPU_ALLOCATOR_USE_BFC",
                                     "TF_FORCE_GPU_ALLOW_GROWTH", "ALEXNET_MALLOC"))
  seen <- run_fresh_r(function(names) {
    Sys.unsetenv(names)
    Sys.setenv(TF_CPU_ALLOCATOR_USE_BFC = "false")  # the user's choice
    Sys.setenv(TF_USE_LEGACY_KERAS = "")  # set empty: taken for unset, as the core takes it
    library(alexnet)
    Sys.getenv(names)
  }, args = list(names(declared)))
  expect_equal(seen[["TF_CPU_ALLOCATOR_USE_BFC"]], "false")
  others <- setdiff(names(declared), "TF_CPU_ALLOCATOR_USE_BFC")
  expect_equal(seen[others], declared[others])
})

test_that("TensorFlow used from R before the core trains with the allocator the core asks for", {
  skip_if_no_alexnet()
  # as the original r-tensorflow/alexnet's multi-worker script does: TensorFlow computes (a strategy, a tensor)
  # before the first call of the core
  allocator <- run_fresh_r(function() {
    Sys.unsetenv("TF_CPU_ALLOCATOR_USE_BFC")
    library(alexnet)
    tf <- reticulate::import("tensorflow")
    tf$ones(1L)
    reticulate::import("alexnet.tfimport")$cpu_allocator()
  }, env = c(ALEXNET_PYTHON = alexnet_python(), RETICULATE_PYTHON = alexnet_python()))
  expect_equal(allocator, "bfc")
})

test_that("the core sets R's own malloc as ALEXNET_MALLOC says, unless the user chose otherwise", {
  skip_if_no_alexnet()
  skip_if_not(Sys.info()[["sysname"]] == "Linux", "mallopt is glibc's")
  declared <- alexnet:::tensorflow_environment()[["ALEXNET_MALLOC"]]
  in_effect <- function(value) {
    run_fresh_r(function(value) {
      Sys.unsetenv(c("ALEXNET_MALLOC", "GLIBC_TUNABLES"))
      if (!is.null(value)) Sys.setenv(ALEXNET_MALLOC = value)
      library(alexnet)
      # R and its Python are one process: the core, imported by the first call, sets the malloc they share
      reticulate::import("alexnet.environment")$malloc_in_effect()
    }, args = list(value), env = c(ALEXNET_PYTHON = alexnet_python(), RETICULATE_PYTHON = alexnet_python()))
  }
  expect_equal(in_effect(NULL), declared)
  expect_equal(in_effect("default"), "default")
})

test_that("an R session leaves none of the files TensorFlow's autograph writes in the temporary folder", {
  skip_if_no_alexnet()
  # Python embedded in R never ends the way that removes them: R has the core remove them as it exits
  temporary <- withr::local_tempdir()
  module <- withr::local_tempdir()
  writeLines(c("import tensorflow as tf", "", "", "@tf.function", "def absolute(x):", "    if x < 0:",
               "        return -x", "    return x"), file.path(module, "converted.py"))
  during <- run_fresh_r(function(module) {
    alexnet:::alexnet_core()
    converted <- reticulate::import_from_path("converted", module)
    tf <- reticulate::import("tensorflow")
    value <- reticulate::import_builtins()$int(converted$absolute(tf$constant(-3L)))
    folder <- reticulate::import("tempfile")$gettempdir()
    list(value = as.integer(value), folder = folder,
         files = list.files(folder, pattern = "^__autograph_generated_file"))
  }, env = c(TMPDIR = temporary), args = list(module = module))
  expect_equal(during$value, 3L)
  expect_equal(normalizePath(during$folder), normalizePath(temporary))
  expect_gte(length(during$files), 1L)  # written while the session ran
  expect_length(list.files(temporary, pattern = "^__autograph_generated_file"), 0L)  # and gone with it
})
