"""Errors an operator caused (bad input): shown as they are, exit code 2 or HTTP 4xx."""

from __future__ import annotations


class OpsError(ValueError):
    """The request cannot be done as asked; the message says why."""


class NotFound(OpsError):
    """The box or item does not exist."""
