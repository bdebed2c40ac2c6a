"""The model in use: the model pin, loading a model from wherever it is, evaluation and prediction."""
