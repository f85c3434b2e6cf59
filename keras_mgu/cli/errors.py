"""The command line's two errors: bad options and unreadable data.

:func:`keras_mgu.cli.main` reports either as one line,
``keras-mgu <command>: error: <message>``, and exits with status 2.
"""

from __future__ import annotations

__all__ = ["DataError", "UsageError"]


class UsageError(Exception):
    """Bad options: reported with the usage and ``keras-mgu identify: error: <message>``."""


class DataError(UsageError):
    """Data that cannot be read: one line ``keras-mgu identify: error: <message>``, status 2."""
