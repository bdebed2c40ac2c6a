"""Data: preparing the board: ImageNet trees, synthetic ImageNet, the pure partition, the upload's image check,
uploads and fetches of partitions."""
