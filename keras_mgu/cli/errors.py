"""The command line's errors: bad options, unreadable data, a missing extra.

:func:`keras_mgu.cli.main` reports each as one line,
``keras-mgu <command>: error: <message>`` (bad options with the usage too),
and exits with status 2.
"""

from __future__ import annotations

__all__ = ["DataError", "MissingExtra", "UsageError"]


class UsageError(Exception):
    """Bad options: reported with the usage and ``keras-mgu identify: error: <message>``."""


class DataError(UsageError):
    """Data that cannot be read: one line ``keras-mgu identify: error: <message>``, status 2."""


class MissingExtra(DataError):
    """An optional dependency that is not installed: one line naming the extra, status 2."""
