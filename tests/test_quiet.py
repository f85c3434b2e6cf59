"""File descriptor 2 sent aside around native start-up lines (``keras_mgu._quiet``)."""

from __future__ import annotations

import os
import sys

import pytest

from keras_mgu._quiet import import_quietly, stderr_aside
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def test_what_a_block_writes_to_descriptor_2_is_dropped_when_it_succeeds(capfd):
    with stderr_aside():
        os.write(2, b"oneDNN custom operations are on\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_a_failing_block_shows_what_it_wrote_and_raises(capfd):
    with pytest.raises(RuntimeError, match="broken"):
        with stderr_aside() as captured:
            os.write(2, b"cudart_stub: no CUDA drivers\n")
            raise RuntimeError("broken")
    assert captured.text == "cudart_stub: no CUDA drivers\n"
    assert capfd.readouterr().err == "cudart_stub: no CUDA drivers\n"
    with pytest.raises(KeyError):
        with stderr_aside(replay=False) as captured:
            os.write(2, b"kept for the caller\n")
            raise KeyError("x")
    assert captured.text == "kept for the caller\n" and capfd.readouterr().err == ""


def test_import_quietly_skips_missing_and_failing_modules(tmp_path, monkeypatch, capfd):
    (tmp_path / "noisy_native_mod.py").write_text("import os\nos.write(2, b'start-up line\\n')\n")
    (tmp_path / "broken_native_mod.py").write_text(
        "import os\nos.write(2, b'half a start-up\\n')\nraise ImportError('no libfoo.so')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("noisy_native_mod", "broken_native_mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    loaded = import_quietly("noisy_native_mod", "no_such_module_here", "broken_native_mod", "os")
    assert loaded == ["noisy_native_mod", "os"]
    assert "noisy_native_mod" in sys.modules and "broken_native_mod" not in sys.modules
    assert capfd.readouterr().err == ""
    with pytest.raises(ImportError, match="no libfoo.so"):  # its next importer reports it
        import broken_native_mod  # noqa: F401
    monkeypatch.delitem(sys.modules, "noisy_native_mod")
