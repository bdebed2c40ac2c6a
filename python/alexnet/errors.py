"""Errors the package raises on purpose: each message says what to change."""

from __future__ import annotations


class AlexnetError(Exception):
    """Base class: bad input or a state the user can fix; the message says how."""


class LayoutError(AlexnetError):
    """An ImageNet tree that cannot be read: the message names the path and what is wrong."""


class BoardError(AlexnetError):
    """A board that cannot be reached, read or written."""


class IntegrityError(AlexnetError):
    """Data on a board or in a cache that does not match its recorded hash."""


class BadImagesError(AlexnetError):
    """Too many images could not be decoded."""
