# Generated from the declarations of the data stage's options (python/alexnet/data/options.py): do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_r R`, when a declaration changes.

# The options of imagenet_synthetic(), in the declaration's order: each one's argument kind (see R/arguments.R),
# default, values when it is a choice, and help.
synthetic_options <- list(
  classes = list(kind = "count>=1", default = 10, choices = NULL, help = "number of categories (at most 1000 in every layout but kaggle and folders)"),
  images_per_class = list(kind = "count>=1", default = 100, choices = NULL, help = "training images per category"),
  val_per_class = list(kind = "count>=0", default = 10, choices = NULL, help = "validation images per category (0: none; the folders layout has none)"),
  seed = list(kind = "count>=0", default = 0, choices = NULL, help = "random seed: the same seed and options give byte-identical files"),
  quirks = list(kind = "flag", default = FALSE, choices = NULL, help = "also write the odd files real ImageNet has, in the first category and on top of images_per_class: a CMYK JPEG, a grayscale JPEG, a PNG named .JPEG, a JPEG cut off mid-scan and an empty file"),
  max_side = list(kind = "count>=8?", default = NULL, choices = NULL, help = "shrink every image so that its longer side is at most this many pixels (unset: ImageNet's sizes); small images make quick experiments and tests"),
  layout = list(kind = "choice", default = "kaggle", choices = c("kaggle", "archives", "kaggle_zip", "kaggle_targz", "parquet", "imagefolder", "folders"), help = "the layout written: kaggle (Kaggle's download extracted), archives (the official ILSVRC2012 training tar, validation tar and devkit), kaggle_zip (Kaggle's zip as downloaded), kaggle_targz (Kaggle's earlier download: its tree in one tar.gz, the LOC_ files beside it), parquet (Hugging Face's imagenet-1k shards), imagefolder (train/<wnid>/ and val/<wnid>/ folders, as torchvision's ImageFolder reads them) or folders (one folder per WordNet id, without validation images)")
)

# The options of imagenet_upload(), in the declaration's order: each one's argument kind (see R/arguments.R), default,
# values when it is a choice, and help.
upload_options <- list(
  workers = list(kind = "count>=1", default = 8, choices = NULL, help = "categories fetched, packed and published at the same time while one thread reads the source in order; at most one of them is packed per CPU at a time, the others fetching or publishing"),
  min_images = list(kind = "count>=0", default = 0, choices = NULL, help = "leave out categories with fewer good training images than this (a category without any good image is left out always)"),
  resize = list(kind = "count>=63?", default = NULL, choices = NULL, help = "re-encode images so that their short side is at most this many pixels, at least 63 (CMYK, grayscale and PNG images become RGB JPEGs): a smaller bucket and faster decoding when training (unset: keep every good image byte for byte)"),
  quality = list(kind = "count>=1", default = 90, choices = NULL, help = "JPEG quality of re-encoded images"),
  keep_versions = list(kind = "count>=1?", default = NULL, choices = NULL, help = "once the upload is complete, keep only this many versions (the newest) of each pin it wrote or kept, so that uploading changed data again (with resize, say) does not leave the old copy on the board (unset: every version); a reader still holding an older categories table then no longer finds the versions it names"),
  scratch = list(kind = "location?", default = NULL, choices = NULL, help = "a local folder (made if missing), on a disk with room for a few categories' zips, in which the upload makes its scratch folder: the zips on their way to the board (moved onto a folder board on the same disk instead of copied) and the categories of Kaggle's tar.gz or of shuffled parquet shards waiting to be packed (unset: the system's temporary folder, TMPDIR)"),
  retries = list(kind = "count>=0", default = 3, choices = NULL, help = "attempts after the first for each transient error of the board, their waits doubling from about 0.5 s (a board that does not answer at all is given up on once they are used, or about 30 s after it stopped if that comes first, a few minutes when it keeps its connections open without a word; the same upload run again then resumes)"),
  val_share = list(kind = "number", default = 0.0, choices = NULL, help = "for a folder of category folders, which holds no validation images: about this share of each category's images held out as its validation images, each image by a hash of its name, so that the same ones stay held out when photos are added, and at least one of every category of two images or more (0: none)"),
  max_pixels = list(kind = "count>=1", default = 89478485, choices = NULL, help = "the most pixels (width x height) an image may have to be stored, at most 89,478,485 (the most that training, evaluation and prediction decode): a larger image is sized from its header, without being decoded, and left out as a bad image, unless `resize` shrinks it within this (images of up to 178,956,970 pixels are shrunk)")
)

# Which partition imagenet_partition() fetches, in the declaration's order: each one's argument kind (see
# R/arguments.R), default, values when it is a choice, and help.
partition_options <- list(
  partition = list(kind = "count>=0", default = 0, choices = NULL, help = "which partition, from 0 to `total` - 1 (0-based)"),
  total = list(kind = "count>=1", default = 16, choices = NULL, help = "how many partitions (workers) the categories are split into")
)

# The options of imagenet_partition(), in the declaration's order: each one's argument kind (see R/arguments.R),
# default, values when it is a choice, and help.
fetch_options <- list(
  cache_dir = list(kind = "location?", default = NULL, choices = NULL, help = "where the zips are extracted, one board's to a local folder, new, empty or a cache made before (unset: the board's own folder under the user's cache directory); one filled before and shared read-only is read as it is"),
  workers = list(kind = "count>=1", default = 8, choices = NULL, help = "downloads at the same time"),
  verify = list(kind = "flag", default = FALSE, choices = NULL, help = "check every cached file's CRC-32 against the one its zip recorded (which reads every file) and fetch a damaged category again; off, names and sizes are checked"),
  retries = list(kind = "count>=0", default = 3, choices = NULL, help = "attempts after the first for each download that fails for a transient reason, their waits doubling from about 0.5 s (a board that does not answer at all is given up on once they are used, or about 30 s after it stopped if that comes first, a few minutes when it keeps its connections open without a word, said after 30 s without a byte; the same fetch run again then resumes)"),
  validation = list(kind = "flag", default = TRUE, choices = NULL, help = "also fetch the partition's validation images")
)

# Which share of a board's validation images imagenet_validation() fetches, in the declaration's order: each one's
# argument kind (see R/arguments.R), default, values when it is a choice, and help.
validation_partition_options <- list(
  partition = list(kind = "count>=0", default = 0, choices = NULL, help = "which share of the validation images, from 0 to `total` - 1 (0-based)"),
  total = list(kind = "count>=1", default = 1, choices = NULL, help = "how many shares the categories that have validation images are split into (1: all of them)")
)

# The options of imagenet_validation(), in the declaration's order: each one's argument kind (see R/arguments.R),
# default, values when it is a choice, and help.
validation_fetch_options <- list(
  cache_dir = list(kind = "location?", default = NULL, choices = NULL, help = "where the zips are extracted, one board's to a local folder, new, empty or a cache made before (unset: the board's own folder under the user's cache directory); one filled before and shared read-only is read as it is"),
  workers = list(kind = "count>=1", default = 8, choices = NULL, help = "downloads at the same time"),
  verify = list(kind = "flag", default = FALSE, choices = NULL, help = "check every cached file's CRC-32 against the one its zip recorded (which reads every file) and fetch a damaged category again; off, names and sizes are checked"),
  retries = list(kind = "count>=0", default = 3, choices = NULL, help = "attempts after the first for each download that fails for a transient reason, their waits doubling from about 0.5 s (a board that does not answer at all is given up on once they are used, or about 30 s after it stopped if that comes first, a few minutes when it keeps its connections open without a word, said after 30 s without a byte; the same fetch run again then resumes)")
)
