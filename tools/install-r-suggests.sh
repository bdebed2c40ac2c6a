#!/usr/bin/env bash
# Installs R's suggested packages that Debian does not carry (sparklyr, pins) from CRAN when CRAN is
# reachable, into the first writable library; without CRAN it says so and moves on (their tests skip).
set -uo pipefail
Rscript - <<'RSCRIPT'
wanted <- c("sparklyr", "pins")
missing <- wanted[!vapply(wanted, requireNamespace, logical(1), quietly = TRUE)]
if (length(missing) == 0L) quit(save = "no")
repos <- Sys.getenv("ALEXNET_CRAN", "https://cloud.r-project.org")
options(timeout = 10)
reachable <- tryCatch({
  con <- url(paste0(repos, "/src/contrib/PACKAGES.rds"), open = "rb")
  close(con)
  TRUE
}, error = function(e) FALSE, warning = function(w) FALSE)
if (!reachable) {
  message("CRAN (", repos, ") is not reachable: ", paste(missing, collapse = ", "),
          " not installed; the tests that need them are skipped.")
  quit(save = "no")
}
paths <- .libPaths()
lib <- paths[file.access(paths, 2) == 0][1]
if (is.na(lib)) lib <- Sys.getenv("R_LIBS_USER")
dir.create(lib, recursive = TRUE, showWarnings = FALSE)
options(timeout = 300)
tryCatch(utils::install.packages(missing, lib = lib, repos = repos, quiet = TRUE),
         error = function(e) message("Installing ", paste(missing, collapse = ", "), " failed: ",
                                     conditionMessage(e), "; the tests that need them are skipped."))
RSCRIPT
exit 0
