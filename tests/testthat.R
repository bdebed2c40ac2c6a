library(testthat)
library(alexnet)

# The Python core's temporary files and its workers' logs go into this R session's temporary folder, which R
# removes when it ends: an embedded Python never removes what TensorFlow's autograph writes for each function it
# converts (about 200 files a run of these tests were left in the system's temporary folder).
Sys.setenv(TMPDIR = file.path(tempdir(), "python"))
dir.create(Sys.getenv("TMPDIR"))

# With ALEXNET_TESTS=long (make test-long), only the files holding tests kept out of `make test` for time run (see
# skip_unless_long()); otherwise every file runs, and those tests skip.
long_files <- function(folder = "testthat") {
  files <- list.files(folder, "^test-.*\\.R$")
  holds <- vapply(files, function(f) any(grepl("skip_unless_long()", readLines(file.path(folder, f)), fixed = TRUE)),
                  logical(1))
  sub("^test-(.*)\\.R$", "\\1", files[holds])
}
filter <- if (identical(Sys.getenv("ALEXNET_TESTS"), "long")) paste0("^(", paste(long_files(), collapse = "|"), ")$")

test_check("alexnet", filter = filter)
