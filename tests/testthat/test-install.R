# Installing the way R users do: plain `R CMD build` at the root of a clean clone (what
# remotes::install_github() and pak run), `R CMD INSTALL` into a temporary library, install_alexnet()
# into a temporary environment with the machine's python3 (started from R, with R's library path), and a
# small imagenet_partition() through it. Runs in a checkout only (R CMD check tests a copy without git).

test_that("a package built by plain R CMD build carries the core, and install_alexnet() works from it", {
  skip_unless_long()
  root <- normalizePath(file.path(testthat::test_path(), "..", ".."), mustWork = FALSE)
  skip_if_not(dir.exists(file.path(root, ".git")), "not in a git checkout")
  skip_if(!nzchar(Sys.which("git")) || !nzchar(Sys.which("python3")), "git or python3 is missing")
  skip_if_not_installed("callr")
  dir <- withr::local_tempdir()
  clone <- file.path(dir, "clone")
  expect_equal(system2("git", c("clone", "--quiet", shQuote(root), shQuote(clone))), 0L)
  r <- file.path(R.home("bin"), "R")
  withr::with_dir(dir, {
    expect_equal(system2(r, c("CMD", "build", "--no-build-vignettes", shQuote(clone)), stdout = FALSE), 0L)
  })
  tarball <- list.files(dir, "^alexnet_.*\\.tar\\.gz$", full.names = TRUE)
  expect_length(tarball, 1L)
  listed <- utils::untar(tarball, list = TRUE)
  expect_true("alexnet/inst/python/alexnet/__init__.py" %in% listed)
  expect_true("alexnet/inst/python/constraints.txt" %in% listed)
  expect_false(any(grepl("__pycache__|/tests/test_", listed[startsWith(listed, "alexnet/inst/python")])))

  lib <- file.path(dir, "lib")
  dir.create(lib)
  expect_equal(system2(r, c("CMD", "INSTALL", paste0("--library=", shQuote(lib)), shQuote(tarball)),
                       stdout = FALSE, stderr = FALSE), 0L)
  out <- retry_on_network(function() callr::r(function(lib, dir) {
    Sys.unsetenv(c("ALEXNET_PYTHON", "RETICULATE_PYTHON"))  # as a new user has it: install_alexnet() decides
    library(alexnet, lib.loc = lib)
    env_python <- install_alexnet(file.path(dir, "env"), python = Sys.which("python3"), extras = character())
    src <- imagenet_synthetic(file.path(dir, "src"), classes = 2, images_per_class = 3, val_per_class = 0,
                              max_side = 48)
    imagenet_upload(src$path, board = file.path(dir, "board"))
    data <- imagenet_partition(partition = 0, total = 1, board = file.path(dir, "board"),
                               cache_dir = file.path(dir, "cache"))
    list(core = system.file("python", package = "alexnet", lib.loc = lib), python = env_python,
         used = reticulate::py_config()$python, images = length(data$image),
         ssl = reticulate::import("ssl")$OPENSSL_VERSION)
  }, args = list(lib, dir), libpath = c(lib, .libPaths()),
  env = c(callr::rcmd_safe_env(), ALEXNET_PROGRESS = "0", R_USER_CONFIG_DIR = file.path(dir, "config"))))
  expect_true(file.exists(file.path(out$core, "alexnet", "__init__.py")))
  expect_equal(out$used, out$python)
  expect_equal(out$images, 6L)
  expect_match(out$ssl, "SSL")
})

test_that("install_alexnet() takes the core's extras, TensorBoard among them, and names them for another", {
  expect_error(install_alexnet(tempfile(), extras = c("spark", "tensorbord")),
               "^Unknown `extras`: \"tensorbord\"; choose from \"s3\", \"spark\" and \"tensorboard\"\\.$",
               class = "alexnet_error")
  core <- system.file("python", "pyproject.toml", package = "alexnet")
  if (!nzchar(core)) core <- test_path("..", "..", "python", "pyproject.toml")  # a checkout's
  skip_if_not(file.exists(core), "the core is not bundled in this installation")
  # the extras of [project.optional-dependencies], up to the next table
  lines <- readLines(core)
  start <- match("[project.optional-dependencies]", lines)
  section <- lines[seq(start + 1L, length(lines))]
  section <- section[seq_len(match(TRUE, startsWith(section, "["), nomatch = length(section) + 1L) - 1L)]
  extras <- regmatches(section, regexpr("^[a-z0-9-]+(?= = \\[)", section, perl = TRUE))
  # every one but the developers'
  expect_identical(sort(alexnet:::core_extras), sort(setdiff(extras, c("test", "all"))))
})

test_that("`gpu` adds TensorFlow's CUDA libraries at the pinned version, by default where an NVIDIA device is", {
  build <- withr::local_tempdir()
  writeLines(c("# exact versions", "tensorboard==2.21.0", "tensorflow==2.21.0", "tf_keras==2.21.0"),
             file.path(build, "constraints.txt"))
  args <- alexnet:::pip_install_args(build, "s3", TRUE, TRUE, "--quiet", gpu = TRUE)
  expect_equal(utils::tail(args, 3),
               c("--quiet", shQuote(paste0(build, "[s3]")), shQuote("tensorflow[and-cuda]==2.21.0")))
  expect_true(all(c("-c", shQuote(file.path(build, "constraints.txt"))) %in% args))
  expect_false(any(grepl("and-cuda", alexnet:::pip_install_args(build, "s3", TRUE, TRUE, character(), FALSE))))
  # without constraints, any TensorFlow the core takes; without the dependencies, nothing but the core
  expect_equal(alexnet:::cuda_requirement(build, FALSE, TRUE, TRUE), "tensorflow[and-cuda]")
  expect_null(alexnet:::cuda_requirement(build, TRUE, FALSE, TRUE))
  expect_false(any(grepl("and-cuda", alexnet:::pip_install_args(build, character(), TRUE, FALSE, character(), TRUE))))
  # the pin is the one the package carries
  core <- system.file("python", "constraints.txt", package = "alexnet")
  if (!nzchar(core)) core <- test_path("..", "..", "python", "constraints.txt")  # a checkout's
  skip_if_not(file.exists(core), "the core is not bundled in this installation")
  expect_match(alexnet:::pinned_version(core, "tensorflow"), "^[0-9]+\\.[0-9]+\\.[0-9]+$")

  # the default: whether the machine has an NVIDIA device, as the core asks
  dev <- withr::local_tempdir()
  file.create(file.path(dev, "nvidiactl"))
  expect_false(alexnet:::nvidia_gpu(dev))
  file.create(file.path(dev, "nvidia0"))
  expect_true(alexnet:::nvidia_gpu(dev))
  expect_identical(formals(install_alexnet)$gpu, quote(nvidia_gpu()))
  expect_error(install_alexnet(tempfile(), gpu = "yes"), "`gpu`", class = "alexnet_error")
})

test_that("a failed command's error quotes the lines that say why, however far above its end, and keeps the rest", {
  dir <- withr::local_tempdir()
  script <- file.path(dir, "fails.sh")
  # The shape of pip's output when a build dependency's download breaks: the reason, a long traceback under it,
  # then notes about subprocesses.
  writeLines(c("for i in $(seq 1 40); do echo \"Collecting line $i\"; done",
               "echo 'pip._vendor.urllib3.exceptions.ReadTimeoutError: Read timed out.'",
               "for i in $(seq 1 30); do echo \"  frame $i\"; done",
               "echo 'note: the last line'", "exit 2"), script)
  e <- expect_error(alexnet:::run_checked("bash", shQuote(script)), class = "alexnet_error")
  expect_match(conditionMessage(e), "Command failed (exit 2)", fixed = TRUE)
  expect_match(conditionMessage(e), "ReadTimeoutError: Read timed out.", fixed = TRUE)
  expect_match(conditionMessage(e), "note: the last line", fixed = TRUE)
  expect_no_match(conditionMessage(e), "Collecting line 1\n", fixed = TRUE)
  log <- sub(".*Its whole output: ", "", conditionMessage(e))
  withr::defer(unlink(log))
  expect_length(readLines(log), 72L)

  short <- c("one", "two")
  expect_identical(alexnet:::failure_excerpt(short), short)
})

test_that("the tests' installs are tried again when the network failed, and only then", {
  calls <- 0L
  flaky <- function() {
    calls <<- calls + 1L
    if (calls < 3L) stop("pip._vendor.urllib3.exceptions.ReadTimeoutError: Read timed out.")
    "installed"
  }
  expect_equal(retry_on_network(flaky, pause = 0), "installed")
  expect_equal(calls, 3L)
  calls <- 0L
  expect_error(retry_on_network(flaky, attempts = 2L, pause = 0), "Read timed out")
  calls <- 0L
  broken <- function() {
    calls <<- calls + 1L
    stop("error: invalid pyproject.toml")
  }
  expect_error(retry_on_network(broken, pause = 0), "invalid pyproject")
  expect_equal(calls, 1L)
})

test_that("under make test-long, a file's tests that make test ran skip, and those kept out of it run", {
  expect_true(kept_out_of_make_test(quote({
    skip_unless_long()
    expect_true(TRUE)
  })))
  expect_false(kept_out_of_make_test(quote(expect_true(TRUE))))
  ran <- character()
  run <- function(long) {
    withr::local_envvar(ALEXNET_TESTS = if (long) "long" else "")
    reporter <- testthat::ListReporter$new()
    testthat::with_reporter(reporter, {
      test_that("fast", {
        ran <<- c(ran, "fast")
        expect_true(TRUE)
      })
      test_that("long", {
        skip_unless_long()
        ran <<- c(ran, "long")
        expect_true(TRUE)
      })
    })
    vapply(reporter$get_results(), function(r) class(r$results[[1]])[1], character(1))
  }
  expect_equal(unname(run(long = TRUE)), c("expectation_skip", "expectation_success"))
  expect_equal(ran, "long")
  expect_equal(unname(run(long = FALSE)), c("expectation_success", "expectation_skip"))
  expect_equal(ran, c("long", "fast"))
})
