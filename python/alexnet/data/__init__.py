"""Data: ImageNet trees, synthetic ImageNet, the pure partition, usable images, uploads and fetches of
partitions, and the tf.data pipelines."""
