"""The model in use: the model pin, loading a model from wherever it is, evaluation, prediction, the values of its
layers for images (features), its first-layer filters as pictures, and the export for serving."""
