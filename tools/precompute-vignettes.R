# Knits vignettes/*.Rmd.orig into vignettes/*.Rmd with their outputs inlined, so that building the
# vignettes (and R CMD check) needs no Python. Run with `make vignettes` after changing an article.
Sys.setenv(ALEXNET_PROGRESS = "0")
library(alexnet)
stopifnot(alexnet_available())
owd <- setwd("vignettes")
on.exit(setwd(owd))
for (orig in list.files(".", pattern = "\\.Rmd\\.orig$")) {
  message("Knitting ", orig)
  knitr::knit(orig, sub("\\.orig$", "", orig), quiet = TRUE, envir = new.env())
}
