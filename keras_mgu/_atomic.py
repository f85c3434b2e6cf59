"""Files written whole or not at all: :func:`write_atomically`."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable

__all__ = ["KEPT_SUFFIXES", "write_atomically"]

#: Suffixes the temporary file keeps (Keras checks ``.keras`` and ``.weights.h5``;
#: Matplotlib picks the format from ``.png``).
KEPT_SUFFIXES = (".keras", ".weights.h5", ".json", ".png")


def write_atomically(path: str, write: Callable[[str], object]) -> None:
    """Call ``write(tmp_path)`` on a temporary file next to ``path``, then rename it.

    The folder is created if needed; the temporary name keeps ``path``'s
    suffix where it is one of :data:`KEPT_SUFFIXES`. On any error the
    temporary file is removed and ``path`` is left as it was.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base = os.path.basename(path)
    suffix = next((s for s in KEPT_SUFFIXES if base.endswith(s)), "")
    # A fresh name (not mkstemp) so the file gets the usual permissions.
    tmp = os.path.join(directory, f".{base}.{uuid.uuid4().hex[:12]}.tmp{suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
