"""Input: the tf.data input of training and evaluation: the ``data`` argument normalised, the usable-image
scan, one image decoded, and the pipelines that batch them."""
