#!/usr/bin/env bash
# Installs the built R package (a tarball) into the first writable library of R's search path, so that a plain
# `Rscript -e 'library(alexnet)'` finds it; falls back to the user library (R_LIBS_USER).
set -euo pipefail
src=${1:?usage: install-r-package.sh TARBALL LOG}
log=${2:?usage: install-r-package.sh TARBALL LOG}
lib=$(Rscript -e 'p <- .libPaths(); w <- p[file.access(p, 2) == 0]; if (length(w)) cat(w[1]) else { u <- Sys.getenv("R_LIBS_USER"); dir.create(u, recursive = TRUE, showWarnings = FALSE); cat(u) }')
if ! R CMD INSTALL --library="$lib" "$src" > "$log" 2>&1; then
  cat "$log"
  exit 1
fi
echo "R package alexnet installed in $lib"
