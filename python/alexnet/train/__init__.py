"""Training: the cluster (TF_CONFIG), strategies and step agreement, checkpoints, the model, ``alexnet_train``."""
