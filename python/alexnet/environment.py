"""The environment TensorFlow starts in, declared once in ``tensorflow.env`` beside this file: ``import alexnet``
sets it (see ``alexnet/__init__.py``), and so does R's ``library(alexnet)``, which reads the same file."""

from __future__ import annotations

import os

#: The file: one ``NAME=value`` a line, each with the reason for it in the comment above it.
ENVIRONMENT_FILE = os.path.join(os.path.dirname(__file__), "tensorflow.env")


def tensorflow_environment() -> dict[str, str]:
    """The variables of ``tensorflow.env``: name -> value."""
    with open(ENVIRONMENT_FILE, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def set_tensorflow_environment() -> None:
    """Set each variable of ``tensorflow.env`` that is not set already (a user's choice wins)."""
    for name, value in tensorflow_environment().items():
        os.environ.setdefault(name, value)
