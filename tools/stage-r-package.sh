#!/usr/bin/env bash
# Lays out the R package in DEST with the Python core copied to inst/python, so that the installed
# package carries the exact core it wraps (install_alexnet() pip-installs it from there).
# The repository keeps one copy of the core, under python/.
set -euo pipefail
dest=${1:?usage: stage-r-package.sh DEST}
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$dest"
mkdir -p "$dest"
cd "$root"
for item in DESCRIPTION NAMESPACE LICENSE .Rbuildignore R man tests vignettes inst; do
  [ -e "$item" ] && cp -R "$item" "$dest/"
done
mkdir -p "$dest/inst/python"
cp python/pyproject.toml python/constraints.txt python/README.md "$dest/inst/python/"
tar -C python --exclude='__pycache__' --exclude='*.pyc' -cf - alexnet | tar -C "$dest/inst/python" -xf -
