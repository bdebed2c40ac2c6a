# Turning what the Python core returns (dicts and lists of plain values) into R objects.

# A list whose elements are all length-one atomics of one type becomes an atomic vector; named
# lists are converted element by element. Anything else is left as it is.
simplify_py <- function(x) {
  if (is.list(x) && !is.data.frame(x)) {
    if (!is.null(names(x))) {
      x[] <- lapply(x, simplify_py)
      return(x)
    }
    if (length(x) > 0L &&
        all(vapply(x, function(e) is.atomic(e) && length(e) == 1L && is.null(names(e)), logical(1)))) {
      types <- unique(vapply(x, typeof, character(1)))
      if (length(types) == 1L || all(types %in% c("integer", "double"))) return(unlist(x))
    }
    return(lapply(x, simplify_py))
  }
  x
}

# A list of records (Python list of dicts) as a data frame.
records_to_df <- function(records) {
  if (length(records) == 0L) return(data.frame())
  columns <- names(records[[1L]])
  df <- lapply(stats::setNames(columns, columns), function(col) {
    simplify_py(lapply(records, function(r) r[[col]]))
  })
  as.data.frame(df, stringsAsFactors = FALSE)
}

# Checks shared by the wrappers: say what is wrong in R's terms before calling Python.
check_count <- function(x, name, min = 0L, null_ok = FALSE) {
  if (is.null(x) && null_ok) return(NULL)
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x != round(x) || x < min) {
    stop("`", name, "` must be a whole number >= ", min, if (null_ok) " or NULL" else "",
         ", not ", deparse(x), ".", call. = FALSE)
  }
  as.integer(x)
}

check_string <- function(x, name, null_ok = FALSE) {
  if (is.null(x) && null_ok) return(NULL)
  if (!is.character(x) || length(x) != 1L || is.na(x) || !nzchar(x)) {
    stop("`", name, "` must be a single non-empty string", if (null_ok) " or NULL" else "",
         ".", call. = FALSE)
  }
  x
}
