"""Errors an operator caused (bad input): shown as they are, exit code 2 or HTTP 4xx.

The engine's operations raise them (outbox_engine/operations/errors.py); the CLI and the
service's own commands (generate) use the same classes.
"""

from outbox_engine.operations.errors import NotFound, OpsError

__all__ = ["NotFound", "OpsError"]
