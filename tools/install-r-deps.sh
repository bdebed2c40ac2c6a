#!/usr/bin/env bash
# Installs R and the R packages the project needs from Debian, only those that are missing.
set -euo pipefail
needed=(r-base-core r-cran-reticulate r-cran-jsonlite r-cran-magrittr r-cran-testthat
        r-cran-roxygen2 r-cran-knitr r-cran-rmarkdown r-cran-withr r-cran-callr r-cran-png r-cran-pkgdown pandoc)
missing=()
for pkg in "${needed[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "R and its packages are installed."
  exit 0
fi
echo "Installing from Debian: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
