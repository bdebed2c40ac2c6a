# `make site`: the documentation site (pkgdown) in docs/: home from README, the reference grouped by stage
# (_pkgdown.yml), both articles as knitted (precomputed, so no Python is needed).
#
# The site is built offline: pkgdown and downlit look packages up on CRAN (a "View on CRAN" link, links to the
# functions of packages that are not installed, such as sparklyr); without a network those links are left out.
offline <- !isTRUE(tryCatch(nzchar(curl::nslookup("cloud.r-project.org", error = FALSE)), error = function(e) FALSE))
if (offline) {
  options(pkgdown.internet = FALSE)
  utils::assignInNamespace("CRAN_urls", function() data.frame(Package = character(), URL = character()),
                           "downlit")
}
pkgdown::build_site(".", examples = FALSE, preview = FALSE, new_process = FALSE, install = FALSE)
