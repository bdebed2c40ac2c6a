#!/usr/bin/env bash
# `make demo`: the main job from R on the embedded default (local folder board, synthetic ImageNet).
set -euo pipefail
cd "$(dirname "$0")/.."
exec Rscript tools/demo.R
