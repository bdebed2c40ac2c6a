# Turning what the Python core returns (dicts and lists of plain values) into R objects.

# A list whose elements are all length-one atomics of one type becomes an atomic vector; named
# lists are converted element by element. Anything else is left as it is.
# An empty list (Python's []) becomes character(0), as R's functions return no names.
simplify_py <- function(x) {
  if (is.list(x) && !is.data.frame(x)) {
    if (!length(x) && is.null(names(x))) return(character())
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

# The core's records as a data frame with `columns` (names and types), also when there are none.
records_table <- function(records, columns) {
  if (length(records)) return(records_to_df(records)[names(columns)])
  as.data.frame(lapply(columns, vector), stringsAsFactors = FALSE)
}

# A NumPy array of the core as a double array of the same dimensions (a matrix for two). A reticulate that converts
# NumPy arrays has made it one already; one that cannot (reticulate before 1.36 with NumPy 2) leaves the array as it
# is, whose values are then read as little-endian doubles, last dimension fastest, from a bytearray (which every
# reticulate turns into a raw vector).
numpy_array <- function(x) {
  if (is.array(x)) return(x + 0)
  shape <- x$shape
  if (inherits(shape, "python.builtin.object")) shape <- reticulate::py_to_r(shape)
  shape <- as.integer(unlist(shape))
  builtins <- reticulate::import_builtins(convert = FALSE)
  numpy <- reticulate::import("numpy", convert = FALSE)
  bytes <- reticulate::py_to_r(builtins$bytearray(numpy$ascontiguousarray(x, dtype = "<f8")$tobytes()))
  values <- readBin(bytes, "double", n = prod(shape), size = 8L, endian = "little")
  if (length(shape) < 2L) return(values)
  aperm(array(values, dim = rev(shape)), rev(seq_along(shape)))
}

# The arguments of the calling wrapper that its caller gave, by name, for one call into the core. Those
# left out are not passed on, so that the core's own defaults apply: each default is defined once, in the
# core (the wrappers' formals show the same values, and a test compares them with the core's signatures).
# Checking the values is the core's job too: its errors name the argument.
given_args <- function(names, env = parent.frame()) {
  args <- list()
  for (name in names) {
    if (!eval(call("missing", as.name(name)), env)) args[name] <- list(get(name, envir = env))
  }
  args
}

# Length-one vectors reach Python as scalars: fields that must stay lists (file paths, labels) are made lists, without
# their names (a named vector, as sapply() makes, would reach Python as a dict of its names).
as_py_lists <- function(data, fields) {
  for (field in intersect(fields, names(data))) data[[field]] <- as.list(unname(data[[field]]))
  data
}
