# The Spark home a test connects through sparklyr with, found as a user's session would: `SPARK_HOME` when set,
# else a Spark that sparklyr::spark_install() put in place, else the Spark bundled in the pyspark of alexnet's Python.
# The first of these that the installed sparklyr can drive is taken; a newer Spark than it supports is passed over
# (sparklyr before 1.9.0 drives Spark 3 at most). Returns the path, or NULL with the attribute "why" that says what
# was found and what to do. python/tests/helpers_spark.py runs this file for the README's R test.

# The newest Spark major version the installed sparklyr drives.
sparklyr_spark_major <- function() {
  if (utils::packageVersion("sparklyr") >= "1.9.0") 4L else 3L
}

# The Spark version of a Spark home, from its spark-core jar (a Spark distribution and pyspark's folder both have
# one), else as sparklyr reads it; NA when neither tells.
spark_home_version <- function(home) {
  jars <- list.files(file.path(home, "jars"), pattern = "^spark-core_[0-9.]+-[0-9]+\\.[0-9]+\\.[0-9]+.*\\.jar$")
  version <- if (length(jars)) sub("^spark-core_[0-9.]+-([0-9]+\\.[0-9]+\\.[0-9]+).*$", "\\1", jars[[1]]) else
    tryCatch(sparklyr::spark_version_from_home(home), error = function(e) NULL)
  if (length(version) == 1L && !is.na(version) && nzchar(version)) as.character(version) else NA_character_
}

# The Spark bundled in the pyspark of `python` (pyspark's own find_spark_home, with SPARK_HOME left out), or NULL.
pyspark_spark_home <- function(python) {
  if (is.null(python) || !nzchar(python) || !file.exists(python)) return(NULL)
  code <- paste("import os; os.environ.pop('SPARK_HOME', None)",
                "from pyspark.find_spark_home import _find_spark_home; print(_find_spark_home())", sep = "\n")
  home <- suppressWarnings(tryCatch(system2(python, c("-c", shQuote(code)), stdout = TRUE, stderr = FALSE),
                                    error = function(e) character()))
  home <- utils::tail(home, 1)
  if (length(home) == 1L && dir.exists(home)) home else NULL
}

sparklyr_spark_home <- function(python = alexnet::alexnet_python()) {
  if (!requireNamespace("sparklyr", quietly = TRUE)) {
    return(structure(list(), why = "sparklyr is not installed"))
  }
  installed <- tryCatch(sparklyr::spark_installed_versions()$dir, error = function(e) character())
  candidates <- list(
    list(what = "SPARK_HOME", home = Sys.getenv("SPARK_HOME")),
    list(what = "sparklyr::spark_install()'s Spark", home = rev(installed)),
    list(what = "the Spark of pyspark", home = pyspark_spark_home(python))
  )
  major <- sparklyr_spark_major()
  found <- character()
  for (candidate in candidates) {
    for (home in candidate$home[nzchar(candidate$home)]) {
      version <- spark_home_version(home)
      if (is.na(version) || as.integer(sub("\\..*", "", version)) <= major) return(normalizePath(home))
      found <- c(found, sprintf("%s is Spark %s (%s)", candidate$what, version, home))
    }
  }
  sparklyr <- as.character(utils::packageVersion("sparklyr"))
  why <- paste0(
    "no Spark home that sparklyr ", sparklyr, " drives (Spark ", major, " at most): ",
    if (length(found)) paste(found, collapse = "; ") else "SPARK_HOME is unset, and neither spark_install() nor pyspark has a Spark",
    ". Run sparklyr::spark_install(\"3.5\") (offline: sparklyr::spark_install_tar()), or set SPARK_HOME to a ",
    "Spark ", major, " home such as the pyspark folder of pip install 'pyspark>=3.5,<3.6'",
    if (major < 4L) ", or update sparklyr (1.9.0 drives Spark 4)", "."
  )
  structure(list(), why = why)
}

# The Spark home for a test's sparklyr::spark_connect(spark_home = ...), or a skip that says why there is none.
skip_if_no_spark_home <- function() {
  home <- sparklyr_spark_home()
  if (is.character(home)) return(home)
  skip(attr(home, "why"))
}

# A stand-in for the sparklyr functions alexnet_spark_train() and alexnet_spark_evaluate() call: it records the
# calls, and its spark_apply() runs the closure the way the tasks would, after a serialize() round trip (which is
# how sparklyr ships it to the workers): a barrier closure once per address, one after the other, with the barrier
# list of that task as sparklyr 1.8 makes it (`address` a list), a job of several tasks that need not run at once
# (an evaluation's); the probe closure once. A closure's error fails the stage as in sparklyr, whose error says only
# that an R worker failed: what the task said stays in the executor's log.
fake_sparklyr <- function(calls, slots = 2L, address = "127.0.0.1:45678", driver_host = "") {
  settings <- list(spark.driver.host = driver_host)
  list(
    spark_context = function(sc) list(connection = sc),
    invoke = function(obj, method, ...) {
      args <- list(...)
      switch(method, getConf = "conf", defaultParallelism = slots,
             get = if (is.null(settings[[args[[1]]]])) args[[2]] else settings[[args[[1]]]])
    },
    sdf_len = function(sc, n, repartition) {
      calls$sdf_len <- c(calls$sdf_len, list(list(sc = sc, n = n, repartition = repartition)))
      "sdf"
    },
    spark_apply = function(x, f, ...) {
      args <- list(...)
      shipped <- unserialize(serialize(f, NULL))
      if (isTRUE(args$barrier)) {
        calls$spark_apply <- list(x = x, ...)
        calls$launches <- c(calls$launches, length(address))
        do.call(rbind, lapply(seq_along(address) - 1L, function(partition) {
          tryCatch(shipped(data.frame(id = 1L), list(address = as.list(address), partition = partition)),
                   error = function(e) {
                     calls$task_errors <- c(calls$task_errors, conditionMessage(e))
                     stop("org.apache.spark.SparkException: Job aborted due to stage failure: Could not recover from ",
                          "a failed barrier ResultStage: sparklyr worker rscript failure with status 255, check ",
                          "worker logs for details", call. = FALSE)
                   })
        }))
      } else {
        calls$probe <- list(x = x, ...)
        shipped(data.frame(id = 1L))
      }
    },
    sdf_collect = function(x) x
  )
}

