"""The command line's errors: a wrong command line, bad values and files, unreadable data.

:func:`keras_mgu.cli.main` reports each as one line,
``keras-mgu <command>: error: <message>``, and exits with status 2; a wrong
command line (:class:`UsageError`: options missing, or given together where
they exclude each other) also shows the usage, as argparse does for an
unknown or missing option. Messages name options as they are typed:
:func:`command_line_text` writes a setting's Python name (```columns```)
as its option (``--columns``). A file is what its name says:
:func:`check_out_file` refuses an output file whose suffix names another
format than the one the command writes.
"""

from __future__ import annotations

import argparse
import os
import re

__all__ = [
    "CommandError",
    "DataError",
    "MissingExtra",
    "OptionError",
    "UsageError",
    "check_out_file",
    "command_line_text",
]


class CommandError(Exception):
    """A command that cannot run as asked: one line ``keras-mgu <command>: error: <message>``."""


class UsageError(CommandError):
    """A wrong command line (an option missing, options that exclude each other): with the usage."""


class OptionError(CommandError):
    """An option's value that cannot be used (no such file, not a model file, out of range)."""


class DataError(CommandError):
    """Data that cannot be read: one line ``keras-mgu identify: error: <message>``, status 2."""


class MissingExtra(DataError):
    """An optional dependency that is not installed: one line naming the extra, status 2."""


_QUOTED_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def command_line_text(message: str, parser: argparse.ArgumentParser) -> str:
    """``message`` with each ```name``` of a setting that an option of ``parser`` sets written
    as that option: ```columns``` -> ``--columns``, ```batch_size``` -> ``--batch-size``.

    The library's errors name a setting by its Python name; on the command line the user
    typed the option. Other quoted names are left as they are.
    """
    options: dict[str, str] = {}
    for action in parser._actions:
        long = [option for option in action.option_strings if option.startswith("--")]
        if long:
            options.setdefault(action.dest, long[0])
    return _QUOTED_NAME.sub(lambda m: options.get(m.group(1), m.group(0)), message)


def check_out_file(option: str, path: str, suffix: str, command: str, written: str) -> None:
    """Refuse (:class:`OptionError`) an output file ``path`` whose name does not end in ``suffix``.

    ``suffix`` (``".csv"``, any case) is the one of the format ``written`` (``"CSV"``) that
    ``command`` writes, so that no file is written under a name that says another format:
    ``--out: expected a file name ending in .csv (simulate writes CSV); got 'sim.txt'``.
    """
    if os.path.splitext(os.path.basename(path))[1].lower() != suffix.lower():
        raise OptionError(
            f"{option}: expected a file name ending in {suffix} ({command} writes {written}); "
            f"got {path!r}"
        )
