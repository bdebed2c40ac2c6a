library(testthat)
library(alexnet)

# The Python core's temporary files and its workers' logs go into this R session's temporary folder, which R
# removes when it ends: an embedded Python never removes what TensorFlow's autograph writes for each function it
# converts (about 200 files a run of these tests were left in the system's temporary folder).
Sys.setenv(TMPDIR = file.path(tempdir(), "python"))
dir.create(Sys.getenv("TMPDIR"))

test_check("alexnet")
