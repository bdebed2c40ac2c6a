#!/usr/bin/env bash
# Builds the R package tarball into OUTDIR with plain `R CMD build`, as remotes::install_github() and pak do at the
# root of a clone. The root is first copied without what a checkout grows beside the sources (the Python
# environment, build outputs, the site, git's objects): R CMD build copies everything before .Rbuildignore prunes
# it, and a 3 GB environment took a minute of every build. inst/python stays a link to python/, so the tarball
# carries the Python core.
set -euo pipefail
root=${1:?usage: build-r-package.sh ROOT OUTDIR}
out=${2:?usage: build-r-package.sh ROOT OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage="$out/source/alexnet"
rm -rf "$out/source" "$out"/alexnet_*.tar.gz
mkdir -p "$stage"
tar -C "$root" --exclude=./.venv --exclude=./build --exclude=./.git --exclude=./docs --exclude=./demo-output \
  --exclude=__pycache__ --exclude=.pytest_cache --exclude=.ruff_cache --exclude=.mypy_cache -cf - . | tar -C "$stage" -xf -
if ! (cd "$out" && R CMD build "$stage" > r-build.log 2>&1); then
  cat "$out/r-build.log"
  exit 1
fi
rm -rf "$out/source"
