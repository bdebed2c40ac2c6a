"""Launch: one training task per worker, started together with Spark barrier execution, from Python or R."""
