#!/usr/bin/env bash
# Installs Chromium from Debian when it is missing: `make test-site` opens the documentation site in it, headless.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "Chromium is installed."
  exit 0
fi
echo "Installing from Debian: chromium"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends chromium
