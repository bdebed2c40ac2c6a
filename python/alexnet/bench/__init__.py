"""Benchmark: reference pipelines, measurements, the report (table and chart), ``alexnet_benchmark``."""
