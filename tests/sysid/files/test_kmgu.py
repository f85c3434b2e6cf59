"""Model files: an Identification saved and loaded simulates the same, on any backend.

Two tiny identifications (learned state; encoder), each with runs of both
structures (the network alone, and on the linear model's residual), are saved
and loaded; the loaded ones must simulate exactly as before (free-run and from
measured outputs), alone or averaged. Files that are not model files, or are
damaged or from a newer format, must be refused with a message that says so.
"""

import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest

from keras_mgu import datasets, sysid
from keras_mgu.sysid.files import kmgu as saving
from keras_mgu.sysid.files.kmgu import ModelFileError
from keras_mgu.sysid.training.run import deferred_source
from tests.helpers import BACKEND_INDEPENDENT, NETWORK_CLASSES

TINY = sysid.RecipeConfig(
    units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3, model_classes=NETWORK_CLASSES
)
ENCODER = dataclasses.replace(TINY, initial_state="encoder", n_initial=5, window=40, batch_size=4)


@pytest.fixture(scope="module")
def data():
    return datasets.simulate_cascaded_tanks(n_samples=160, seed=0)


@pytest.fixture(scope="module")
def learned(data):
    return sysid.identify(data, TINY, restarts=2)


@pytest.fixture(scope="module")
def encoder(data):
    return sysid.identify(data, ENCODER, restarts=1)


def assert_simulates_alike(a, b, data, rtol=1e-6):
    u, y = data.test.u, data.test.y
    np.testing.assert_allclose(b.simulate(u), a.simulate(u), rtol=rtol, atol=rtol)
    given_a, given_b = a.simulate(u, y[:5]), b.simulate(u, y[:5])
    np.testing.assert_allclose(given_b, given_a, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("kind", ["learned", "encoder"])
def test_every_run_simulates_the_same_after_loading(kind, data, tmp_path, request):
    found = request.getfixturevalue(kind)
    structures = {run.structure for run in found.runs}
    assert structures == {"network", "linear+network"}  # with and without the linear model
    back = sysid.load(found.save(tmp_path / "model.kmgu"))
    assert len(back.runs) == len(found.runs) and back.best == found.best
    for k, (run, loaded) in enumerate(zip(found.runs, back.runs)):
        assert loaded.config == run.config and loaded.config.initial_state == kind
        assert (loaded.seed, loaded.structure) == (run.seed, run.structure)
        assert loaded.stopper is None  # the training history is not saved
        assert (loaded.path.linear is None) == (run.path.linear is None)
        assert_simulates_alike(found.run_alone(k), back.run_alone(k), data)
    assert back.validation_scores == found.validation_scores
    assert back.validation_rmse(data) == pytest.approx(found.validation_rmse(data), rel=1e-9)
    for convention in ("all", "benchmark"):
        assert back.score(data.test, convention) == pytest.approx(
            found.score(data.test, convention), rel=1e-9
        )


def test_averaged_runs_and_the_record_description_are_kept(learned, data, tmp_path):
    protocol = datasets.get_protocol("cascaded_tanks")
    found = dataclasses.replace(learned, members=(2, 2, 0), protocol=protocol)
    back = sysid.load(found.save(tmp_path / "ensemble.kmgu"))
    assert back.members == (2, 2, 0) and back.protocol == protocol
    assert back.input_names == data.estimation.input_names == ("u",)
    assert back.output_names == ("y",) and back.ts == data.estimation.ts == 4.0
    assert back.n_initial == found.n_initial and back.linear_table == found.linear_table
    for name in ("u_lower", "u_upper", "y_lower", "y_upper"):  # the estimation range, exactly
        np.testing.assert_array_equal(getattr(back.ranges, name), getattr(found.ranges, name))
    np.testing.assert_array_equal(back.ranges.y_upper, data.estimation.y.max(axis=0))
    for a, b in zip(found.start, back.start):
        np.testing.assert_array_equal(a, b)
    for run, loaded in zip(found.runs, back.runs):
        np.testing.assert_array_equal(loaded.validation_error, run.validation_error)
        assert loaded.validation_rmse == run.validation_rmse
    assert_simulates_alike(found, back, data)
    # The average is not any one run's simulation.
    u = data.test.u
    assert np.abs(back.simulate(u) - back.run_alone(2).simulate(u)).max() > 1e-6


def test_the_file_is_a_manifest_arrays_and_keras_archives(learned, tmp_path):
    path = learned.save(tmp_path / "model.kmgu")
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read(saving.MANIFEST))
        assert manifest["format"] == saving.FORMAT
        assert manifest["format_version"] == saving.FORMAT_VERSION
        assert manifest["backend"] == keras.backend.backend()
        assert [run["seed"] for run in manifest["runs"]] == [run.seed for run in learned.runs]
        assert manifest["runs"][0]["validation_rmse"] == learned.runs[0].validation_rmse
        arrays = np.load(io.BytesIO(archive.read(saving.ARRAYS)), allow_pickle=False)
        np.testing.assert_array_equal(arrays["start_y"], learned.start[1])
        for run in manifest["runs"]:
            with zipfile.ZipFile(io.BytesIO(archive.read(run["network"]))) as network:
                assert "config.json" in network.namelist()  # a .keras archive


def test_a_crash_while_saving_keeps_the_earlier_file(learned, tmp_path, monkeypatch):
    path = learned.save(tmp_path / "model.kmgu")
    before = open(path, "rb").read()

    def crash(model):
        raise OSError("disk full")

    monkeypatch.setattr(saving, "network_bytes", crash)  # after the manifest was written
    with pytest.raises(OSError, match="disk full"):
        learned.run_alone(0).save(path)
    assert open(path, "rb").read() == before
    assert os.listdir(tmp_path) == ["model.kmgu"]  # no temporary file left
    monkeypatch.undo()
    assert len(sysid.load(path).runs) == len(learned.runs)


def _rewritten(path, target, manifest_change):
    """A copy of the model file at ``path`` with its manifest changed."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(target, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == saving.MANIFEST:
                manifest = json.loads(data)
                manifest_change(manifest)
                data = json.dumps(manifest)
            dst.writestr(name, data)
    return target


def test_bad_files_are_refused_with_a_message(learned, tmp_path):
    path = learned.save(tmp_path / "model.kmgu")
    good = open(path, "rb").read()
    cases = {}
    (tmp_path / "truncated.kmgu").write_bytes(good[: len(good) // 2])
    cases["truncated.kmgu"] = "truncated or corrupted"
    damaged = bytearray(good)
    middle = len(good) // 2
    damaged[middle : middle + 64] = bytes(255 - b for b in damaged[middle : middle + 64])
    (tmp_path / "damaged.kmgu").write_bytes(bytes(damaged))
    cases["damaged.kmgu"] = "corrupted|damaged"
    (tmp_path / "notes.kmgu").write_text("not a model\n")
    cases["notes.kmgu"] = "not a keras-mgu model file"
    with zipfile.ZipFile(tmp_path / "plain.zip", "w") as archive:
        archive.writestr("readme.txt", "hello")
    cases["plain.zip"] = "zip archive but not a keras-mgu model file"
    learned.model.save(tmp_path / "network.keras")
    cases["network.keras"] = r"Keras model archive \(\.keras\), not a keras-mgu model file"

    def newer(manifest):
        manifest["format_version"] = saving.FORMAT_VERSION + 1

    _rewritten(path, tmp_path / "newer.kmgu", newer)
    cases["newer.kmgu"] = f"format version {saving.FORMAT_VERSION + 1}.*Upgrade keras-mgu"
    _rewritten(path, tmp_path / "other.kmgu", lambda m: m.update(format="something.else"))
    cases["other.kmgu"] = "manifest's format is not"
    for name, message in cases.items():
        with pytest.raises(ModelFileError, match=message) as err:
            sysid.load(tmp_path / name)
        assert isinstance(err.value, ValueError) and "\n" not in str(err.value), name
    with pytest.raises(FileNotFoundError, match="No such model file"):
        sysid.load(tmp_path / "missing.kmgu")


def test_runs_without_a_signal_path_are_not_saved(learned, tmp_path):
    bare = dataclasses.replace(learned.runs[0], path=None)  # as train_simulator returns it
    with pytest.raises(ValueError, match="needs its signal path"):
        dataclasses.replace(learned, runs=[bare], best=0, members=()).save(tmp_path / "m.kmgu")
    assert os.listdir(tmp_path) == []


def test_a_file_saved_on_another_backend_simulates_the_same(saved_on_another_backend, data):
    """Identify (two tiny models) in a subprocess on another backend, load and simulate here."""
    folder, other = saved_on_another_backend
    u, y = data.test.u, data.test.y
    for state in ("learned", "encoder"):
        back = sysid.load(folder / f"{state}.kmgu")
        with zipfile.ZipFile(folder / f"{state}.kmgu") as archive:
            assert json.loads(archive.read(saving.MANIFEST))["backend"] == other
        want = np.load(folder / f"{state}.npz")
        scale = np.abs(want["free"]).max()
        np.testing.assert_allclose(back.simulate(u), want["free"], atol=1e-5 * scale)
        # The learned state is fitted to the 5 outputs by an iterative search: looser.
        np.testing.assert_allclose(back.simulate(u, y[:5]), want["given"], atol=1e-3 * scale)


def test_the_band_noise_models_and_arx_reference_are_kept(learned, data, tmp_path):
    """What a prediction with its band needs comes back: the k-step prediction and its band
    are the same after loading; a file without them loads and says it has no band."""
    back = sysid.load(learned.save(tmp_path / "model.kmgu"))
    assert learned.band is not None and learned.arx is not None
    np.testing.assert_array_equal(back.band.quantiles, learned.band.quantiles)
    for run, loaded in zip(learned.runs, back.runs):
        np.testing.assert_array_equal(loaded.noise.coefficients, run.noise.coefficients)
        np.testing.assert_array_equal(loaded.noise.gains, run.noise.gains)
    u, y = data.test.u, data.test.y
    a, b = learned.predict(u, y, 3, 5, band=0.9), back.predict(u, y, 3, 5, band=0.9)
    for x, z in zip(a, b):
        np.testing.assert_allclose(z, x, rtol=1e-6, atol=1e-6)
    ref_a, ref_b = learned.reference().simulate(u, y[:5]), back.reference().simulate(u, y[:5])
    np.testing.assert_allclose(ref_b, ref_a, rtol=1e-6, atol=1e-6)
    horizon = dataclasses.replace(learned.runs[0], window_horizon=5)
    kept = dataclasses.replace(learned, runs=[horizon, *learned.runs[1:]])
    assert sysid.load(kept.save(tmp_path / "horizon.kmgu")).runs[0].window_horizon == 5
    assert back.runs[0].window_horizon is None
    bare = dataclasses.replace(learned, band=None, arx=None)
    older = sysid.load(bare.save(tmp_path / "bare.kmgu"))
    assert older.band is None and older.reference() is None
    with pytest.raises(ValueError, match="no calibrated band"):
        older.simulate(u, band=0.9)


@BACKEND_INDEPENDENT
def test_a_file_written_before_the_rooms_loads_and_simulates_the_same():
    """Every class, saved by the earlier layout of the package (tests/fixtures/model_files).

    What it checks, the format and the classes' registered names, is the same on every backend;
    loading on another backend than the writer's is tested above."""
    folder = Path(__file__).resolve().parents[2] / "fixtures" / "model_files"
    found = sysid.load(folder / "every_class_before_rooms.kmgu")
    older_classes = set(sysid.config.MODEL_CLASSES) - {"polynomial"}  # the class came later
    assert sorted(run.structure for run in found.runs) == sorted(older_classes)
    assert all(run.polynomial is None for run in found.runs)
    test = datasets.zoo_plant("duffing", n_samples=400, seed=0).data.test
    expected = np.load(folder / "every_class_before_rooms.npy")
    np.testing.assert_allclose(found.simulate(test.u, test.y[:20]), expected, atol=1e-5)
    for k in range(len(found.runs)):
        assert np.all(np.isfinite(found.run_alone(k).simulate(test.u, test.y[:20])))


def _made(found):
    """The runs whose network a loaded identification has made (by index; ``"arx"``)."""
    runs = [*enumerate(found.runs), *([("arx", found.arx)] if found.arx is not None else [])]
    return {k for k, run in runs if deferred_source(run) is None}


def test_loading_makes_only_the_networks_used_when_they_are_used(learned, data, tmp_path):
    """A file of three runs averaged from two: loading makes none, the simulation its two, the
    reference's its own; a file saved again before its networks are made copies them as read."""
    found = dataclasses.replace(learned, members=(2, 0))
    path = found.save(tmp_path / "model.kmgu")
    back = sysid.load(path)
    assert _made(back) == set()
    u, y = data.test.u, data.test.y
    np.testing.assert_allclose(back.simulate(u), found.simulate(u), rtol=1e-6, atol=1e-6)
    assert _made(back) == {0, 2}
    ref_a, ref_b = found.reference().simulate(u, y[:5]), back.reference().simulate(u, y[:5])
    np.testing.assert_allclose(ref_b, ref_a, rtol=1e-6, atol=1e-6)
    assert _made(back) == {0, 2, "arx"}
    again = sysid.load(path)
    copy = again.save(tmp_path / "copy.kmgu")
    assert _made(again) == set()
    with zipfile.ZipFile(path) as a, zipfile.ZipFile(copy) as b:
        for name in a.namelist():
            if name.startswith("runs/"):
                assert a.read(name) == b.read(name), name


def test_a_network_read_without_initializers_is_the_one_keras_reads(learned, encoder, data):
    """Every class's network made from a file (no initializers run) has the weights, the
    outputs and the simulations of the same network read by ``keras.saving.load_model``."""
    folder = Path(__file__).resolve().parents[2] / "fixtures" / "model_files"
    older = sysid.load(folder / "every_class_before_rooms.kmgu")  # every class but one
    duffing = datasets.zoo_plant("duffing", n_samples=400, seed=0).data.test
    for found, record in ((learned, data.test), (encoder, data.test), (older, duffing)):
        u, y = record.u, record.y
        for k, run in enumerate(found.runs):
            data_bytes = saving.network_bytes(run.model)
            made = saving.network_from_bytes(data_bytes)
            with tempfile.TemporaryDirectory() as scratch:
                target = os.path.join(scratch, "network.keras")
                with open(target, "wb") as f:
                    f.write(data_bytes)
                plain = keras.saving.load_model(target, compile=False, safe_mode=True)
            assert [v.shape for v in made.variables] == [v.shape for v in plain.variables]
            for a, b in zip(made.get_weights(), plain.get_weights()):
                np.testing.assert_array_equal(a, b)
            alone = found.run_alone(k)
            sims = []
            for model in (made, plain):
                twin = dataclasses.replace(run, model=model)
                one = dataclasses.replace(alone, runs=[*found.runs[:k], twin, *found.runs[k + 1 :]])
                sims.append((one.simulate(u), one.simulate(u, y[:10]), one.predict(u, y, 3, 10)))
            for a, b in zip(*sims):
                np.testing.assert_array_equal(a, b)
    from keras.src.backend.common import global_state

    assert not global_state.get_global_attribute("uninitialized_variables")


def test_a_network_that_does_not_read_is_refused_when_it_is_used(learned, data, tmp_path):
    path = learned.save(tmp_path / "model.kmgu")
    target = tmp_path / "broken.kmgu"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(target, "w") as dst:
        for name in src.namelist():
            broken = name == "runs/run_1.keras"
            dst.writestr(name, b"not a keras archive" if broken else src.read(name))
    back = sysid.load(target)  # the other networks serve
    u = data.test.u
    np.testing.assert_allclose(
        back.run_alone(0).simulate(u), learned.run_alone(0).simulate(u), rtol=1e-6, atol=1e-6
    )
    with pytest.raises(ModelFileError, match=r"damaged.*'runs/run_1\.keras' does not read"):
        back.run_alone(1).simulate(data.test.u)


@pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="TensorFlow is the backend")
def test_loading_and_simulating_import_no_tensorflow(learned, data, tmp_path):
    """On JAX or PyTorch, with TensorFlow installed beside them, a fresh process that loads a model
    file and simulates from measured outputs imports neither TensorFlow nor SciPy's signal and
    stats modules (a second or more each), which the network alone does not use."""
    alone = next(k for k, run in enumerate(learned.runs) if run.structure == "network")
    path = dataclasses.replace(learned, best=alone, members=()).save(tmp_path / "model.kmgu")
    np.save(tmp_path / "test.npy", np.concatenate([data.test.u, data.test.y], axis=1))
    code = (
        "import sys, numpy as np\n"
        "from keras_mgu import sysid\n"
        "found = sysid.load(sys.argv[1])\n"
        "uy = np.load(sys.argv[2])\n"
        "found.simulate(uy[:, :1]); found.simulate(uy[:, :1], uy[:5, 1:], band=0.9)\n"
        "heavy = ('tensorflow', 'scipy.signal', 'scipy.stats')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    env = {**os.environ, "KERAS_BACKEND": keras.backend.backend()}
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "test.npy")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
