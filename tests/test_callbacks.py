"""LearningRateDecayPoints and WeightedEarlyStopping on a tiny GRU model."""

import json
import math
import os

import keras
import numpy as np
import pytest

from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping, decay_epochs

T, D, BATCH = 3, 2, 4


def _data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, T, D)).astype("float32")
    y = (0.5 * x[:, :, 0].sum(axis=1, keepdims=True) - 0.3 * x[:, -1, 1:]).astype("float32")
    return x, y


def _model(learning_rate=1e-2, optimizer=None, seed=1):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [keras.Input((T, D)), keras.layers.GRU(3, unroll=True), keras.layers.Dense(1)]
    )
    model.compile(
        optimizer=optimizer or keras.optimizers.Adam(learning_rate),
        loss="mse",
        metrics=[keras.metrics.RootMeanSquaredError(name="rmse")],
    )
    return model


def _fit(model, x, y, callbacks, epochs=1, **kwargs):
    return model.fit(
        x,
        y,
        batch_size=BATCH,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        callbacks=callbacks,
        **kwargs,
    )


def _copy(weights):
    return [np.array(w, copy=True) for w in weights]


def _assert_weights_equal(a, b):
    assert len(a) == len(b)
    for wa, wb in zip(a, b, strict=True):
        np.testing.assert_array_equal(wa, wb)


class Spy(keras.callbacks.Callback):
    """Records, per global iteration, the weights and batch logs; per epoch the optimizer lr."""

    def __init__(self):
        super().__init__()
        self.weights, self.logs, self.lr = {}, {}, {}
        self.iteration = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.iteration is None:
            self.iteration = epoch * self.params["steps"]

    def on_train_batch_begin(self, batch, logs=None):
        lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        self.lr.setdefault(self.iteration // self.params["steps"] + 1, set()).add(lr)

    def on_train_batch_end(self, batch, logs=None):
        self.iteration += 1
        self.weights[self.iteration] = _copy(self.model.get_weights())
        self.logs[self.iteration] = dict(logs)


class ScriptedLoss(keras.callbacks.Callback):
    """Overwrites the batch-log ``loss`` with scripted values (iteration i gets script[i-1])."""

    def __init__(self, script):
        super().__init__()
        self.script, self.iteration = list(script), 0

    def on_train_batch_end(self, batch, logs=None):
        self.iteration += 1
        logs["loss"] = self.script[self.iteration - 1]


class StopAfter(keras.callbacks.Callback):
    def __init__(self, epochs):
        super().__init__()
        self.epochs = epochs

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.epochs:
            self.model.stop_training = True


# ---------------------------------------------------------------------------
# LearningRateDecayPoints
# ---------------------------------------------------------------------------


def test_decay_epochs_are_ceil_of_fractions():
    assert decay_epochs((0.5,), 10) == [5]
    assert decay_epochs((0.3, 0.55, 1.0), 10) == [3, 6, 10]
    assert decay_epochs((0.01, 0.5, 0.45), 10) == [1, 5]  # 0.45 and 0.5 share epoch 5
    assert decay_epochs((0.5,), 7) == [4]


def test_learning_rate_per_epoch_and_logs():
    x, y = _data(8)
    model = _model(learning_rate=1e-2)
    spy = Spy()
    history = _fit(model, x, y, [LearningRateDecayPoints((0.5,), decay_rate=0.1), spy], epochs=10)
    expected = [1e-2] * 4 + [1e-3] * 6
    np.testing.assert_allclose(history.history["learning_rate"], expected, rtol=1e-6)
    # The optimizer really holds that rate while the epoch's batches run.
    assert sorted(spy.lr) == list(range(1, 11))
    for epoch, rates in spy.lr.items():
        np.testing.assert_allclose(sorted(rates), [expected[epoch - 1]] * len(rates), rtol=1e-6)

    # Several points on the same (compiled) model, restarted at 1e-2.
    model.optimizer.learning_rate = 1e-2
    callback = LearningRateDecayPoints((0.3, 0.55, 1.0), decay_rate=0.5)
    history = _fit(model, x, y, [callback], epochs=10)
    assert callback.decay_epochs == [3, 6, 10]
    expected = [1e-2] * 2 + [5e-3] * 3 + [2.5e-3] * 4 + [1.25e-3]
    np.testing.assert_allclose(history.history["learning_rate"], expected, rtol=1e-6)


def test_resumed_run_has_the_uninterrupted_schedule():
    x, y = _data(8)
    points, rate = (0.3, 0.5), 0.5  # decay epochs 3 and 5 of 10
    model = _model(learning_rate=1e-2)
    full = _fit(model, x, y, [LearningRateDecayPoints(points, rate)], epochs=10)
    reference = full.history["learning_rate"]
    assert len(set(reference)) == 3
    for stop in (4, 6):  # between and after the decays
        model.optimizer.learning_rate = 1e-2  # the schedule depends on the rate only
        first = _fit(
            model, x, y, [LearningRateDecayPoints(points, rate), StopAfter(stop)], epochs=10
        )
        assert len(first.history["learning_rate"]) == stop
        # A fresh callback, as after a restart: it only sees the optimizer's current rate.
        second = _fit(
            model, x, y, [LearningRateDecayPoints(points, rate)], epochs=10, initial_epoch=stop
        )
        resumed = first.history["learning_rate"] + second.history["learning_rate"]
        np.testing.assert_allclose(resumed, reference, rtol=1e-6)


def test_bad_decay_arguments_are_rejected():
    for points in (0.0, 1.5, (0.5, -0.1), (), float("nan")):
        with pytest.raises(ValueError, match="decay point"):
            LearningRateDecayPoints(points)
    with pytest.raises(TypeError, match="decay_points"):
        LearningRateDecayPoints("half")
    for rate in (0.0, -0.5, float("inf")):
        with pytest.raises(ValueError, match="decay_rate"):
            LearningRateDecayPoints((0.5,), decay_rate=rate)
    with pytest.raises(TypeError, match="decay_rate"):
        LearningRateDecayPoints((0.5,), decay_rate="0.1")


def test_learning_rate_schedule_is_rejected():
    x, y = _data(8)
    schedule = keras.optimizers.schedules.ExponentialDecay(1e-2, decay_steps=10, decay_rate=0.9)
    model = _model(optimizer=keras.optimizers.Adam(schedule))
    with pytest.raises(ValueError, match="ExponentialDecay"):
        _fit(model, x, y, [LearningRateDecayPoints((0.5,))], epochs=2)


def test_decay_points_config_round_trip():
    callback = LearningRateDecayPoints((0.25, 0.75), decay_rate=0.2, verbose=1)
    config = callback.get_config()
    assert config == {
        "decay_points": [0.25, 0.75], "decay_rate": 0.2, "verbose": 1, "unit": "epoch"
    }  # fmt: skip
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(callback))
    assert isinstance(restored, LearningRateDecayPoints)
    assert restored.get_config() == config


# ---------------------------------------------------------------------------
# WeightedEarlyStopping: checks and scores
# ---------------------------------------------------------------------------


def _numpy_mse(model, weights, x, y):
    model.set_weights(weights)
    pred = keras.ops.convert_to_numpy(model.predict(x, batch_size=len(x), verbose=0))
    return float(np.mean((pred.astype(np.float64) - y) ** 2))


def test_batch_checks_every_n_iterations_with_validation_metrics():
    x, y = _data(16)
    xv, yv = _data(8, seed=5)
    model = _model()
    weights = {"val_rmse": 1.0, "loss": 0.1}
    es = WeightedEarlyStopping(weights, validation_data=(xv, yv), validation_frequency=5)
    spy = Spy()
    _fit(model, x, y, [es, spy], epochs=3)  # 4 batches per epoch, 12 iterations

    assert [r["iteration"] for r in es.history] == [1, 5, 10]
    assert [r["epoch"] for r in es.history] == [1, 2, 3]
    assert [r["iteration"] for r in es.train_history] == list(range(1, 13))
    assert [r["epoch"] for r in es.train_history] == [1] * 4 + [2] * 4 + [3] * 4
    for record in es.train_history:
        assert record["loss"] == spy.logs[record["iteration"]]["loss"]
    for record in es.history:
        it = record["iteration"]
        assert record["score"] == pytest.approx(record["val_rmse"] + 0.1 * record["loss"])
        assert record["loss"] == spy.logs[it]["loss"]  # the running value Keras reports
        val_mse = _numpy_mse(model, spy.weights[it], xv, yv)
        assert record["val_rmse"] == pytest.approx(math.sqrt(val_mse), rel=1e-5)
    best = min(es.history, key=lambda r: r["score"])
    assert (es.best_score, es.best_iteration, es.best_epoch) == (
        best["score"],
        best["iteration"],
        best["epoch"],
    )


@pytest.mark.parametrize("n_val, batch_size", [(8, None), (40, 8)])  # one batch / several
def test_validation_values_equal_model_evaluate(n_val, batch_size):
    x, y = _data(16)
    xv, yv = _data(n_val, seed=5)
    wv = np.linspace(0.5, 1.5, n_val).astype("float32")
    model = _model()
    es = WeightedEarlyStopping(
        {"val_loss": 1.0},
        validation_data=(xv, yv, wv),
        validation_frequency=4,
        validation_batch_size=batch_size,
    )
    _fit(model, x, y, [es], epochs=1)
    want = model.evaluate(
        xv, yv, sample_weight=wv, batch_size=batch_size, return_dict=True, verbose=0
    )
    got = es._validate()
    for name, value in want.items():
        assert got[f"val_{name}"] == pytest.approx(float(value), rel=1e-6)


def test_float_frequency_is_a_fraction_of_the_run():
    x, y = _data(16)
    xv, yv = _data(4, seed=5)
    model = _model()
    expected = {0.25: [1, 3, 6, 9, 12], 1.0: [1, 12]}  # every ceil(0.25 * 12) = 3, every 12
    for fraction, iterations in expected.items():
        es = WeightedEarlyStopping(
            {"val_loss": 1.0}, validation_data=(xv, yv), validation_frequency=fraction
        )
        _fit(model, x, y, [es], epochs=3)
        assert [r["iteration"] for r in es.history] == iterations, fraction


def test_float_frequency_needs_a_known_run_length():
    x, y = _data(16)

    def batches():
        for i in range(0, len(x), BATCH):
            yield x[i : i + BATCH], y[i : i + BATCH]

    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=0.5)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        _model().fit(batches(), epochs=1, verbose=0, callbacks=[es])


def test_epoch_end_checks_use_fit_logs():
    x, y = _data(16)
    xv, yv = _data(8, seed=5)
    es = WeightedEarlyStopping({"val_loss": 1.0, "rmse": 0.5})
    history = _fit(_model(), x, y, [es], epochs=3, validation_data=(xv, yv))
    assert [r["iteration"] for r in es.history] == [4, 8, 12]
    assert [r["epoch"] for r in es.history] == [1, 2, 3]
    for e, record in enumerate(es.history):
        assert record["val_loss"] == history.history["val_loss"][e]
        assert record["rmse"] == history.history["rmse"][e]
        assert record["score"] == pytest.approx(record["val_loss"] + 0.5 * record["rmse"])
    assert es.best_score == min(r["score"] for r in es.history)


def test_validation_checks_leave_training_metrics_untouched():
    x, y = _data(16)
    xv, yv = _data(8, seed=5)
    model_a = _model()
    initial = _copy(model_a.get_weights())
    es = WeightedEarlyStopping({"val_rmse": 1.0}, validation_data=(xv, yv), validation_frequency=3)
    spy_a, spy_b = Spy(), Spy()
    history_a = _fit(model_a, x, y, [es, spy_a], epochs=2)
    model_b = _model()
    model_b.set_weights(initial)
    history_b = _fit(model_b, x, y, [spy_b], epochs=2)

    assert [r["iteration"] for r in es.history] == [1, 3, 6]  # mid-epoch evaluations
    # Validation and training values differ, so a leak would show.
    assert es.history[-1]["val_rmse"] != pytest.approx(history_a.history["rmse"][-1], rel=1e-3)
    for name in ("loss", "rmse"):
        np.testing.assert_allclose(history_a.history[name], history_b.history[name], rtol=1e-6)
        for it in range(1, 9):
            assert spy_a.logs[it][name] == pytest.approx(spy_b.logs[it][name], rel=1e-6)


# ---------------------------------------------------------------------------
# WeightedEarlyStopping: best weights, patience, NaN, errors
# ---------------------------------------------------------------------------


def test_best_weights_are_restored_at_train_end():
    x, y = _data(16)
    model = _model()
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1)
    spy = Spy()
    _fit(model, x, y, [ScriptedLoss([3.0, 1.0, 2.0, 1.5, 1.2, 1.1, 1.3, 1.4]), es, spy], epochs=2)
    assert (es.best_iteration, es.best_epoch, es.best_score) == (2, 1, 1.0)
    assert es.wait == 6 and not model.stop_training
    _assert_weights_equal(es.best_weights, spy.weights[2])
    _assert_weights_equal(model.get_weights(), spy.weights[2])
    assert not np.allclose(spy.weights[8][0], spy.weights[2][0])  # restoring changed something

    es_keep = WeightedEarlyStopping(
        {"loss": 1.0}, validation_frequency=1, restore_best_weights=False
    )
    spy = Spy()
    _fit(model, x, y, [ScriptedLoss([3.0, 1.0, 2.0, 1.5]), es_keep, spy])
    assert es_keep.best_iteration == 2
    _assert_weights_equal(model.get_weights(), spy.weights[4])


def test_a_pickled_stopper_keeps_its_results_not_its_model():
    import pickle

    x, y = _data(16)
    model = _model()
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1)
    _fit(model, x, y, [ScriptedLoss([3.0, 1.0, 2.0, 1.5]), es])
    loaded = pickle.loads(pickle.dumps(es))
    assert es.model is model  # the original still watches its model
    assert loaded.model is None
    assert (loaded.best_iteration, loaded.best_score) == (es.best_iteration, es.best_score)
    assert loaded.history == es.history
    _assert_weights_equal(loaded.best_weights, es.best_weights)


def test_patience_stops_after_checks_without_improvement():
    x, y = _data(16)
    model = _model()
    # min_delta 0.05: 3.99 is not an improvement on 4.0.
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, patience=3, min_delta=0.05)
    spy = Spy()
    script = [5.0, 4.0, 4.5, 3.99, 4.2, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    _fit(model, x, y, [ScriptedLoss(script), es, spy], epochs=3)
    assert [r["score"] for r in es.history] == script[:5]
    assert len(es.train_history) == 5 and max(spy.weights) == 5
    assert (es.best_iteration, es.best_score, es.stopped_epoch) == (2, 4.0, 2)
    _assert_weights_equal(model.get_weights(), spy.weights[2])

    es_never = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, patience=None)
    _fit(model, x, y, [ScriptedLoss([1.0] + [2.0] * 11), es_never], epochs=3)
    assert len(es_never.history) == 12 and es_never.stopped_epoch is None


def test_nan_and_inf_never_become_best():
    x, y = _data(16)
    model = _model()
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1)
    spy = Spy()
    _fit(model, x, y, [ScriptedLoss([math.nan, 3.0, -math.inf, math.nan]), es, spy])
    assert len(es.history) == 4 and math.isnan(es.history[0]["score"])
    assert (es.best_iteration, es.best_score) == (2, 3.0)
    _assert_weights_equal(model.get_weights(), spy.weights[2])

    # Validation targets with NaN: every check is NaN, nothing is kept or restored.
    xv, yv = _data(4, seed=5)
    yv[0, 0] = np.nan
    es = WeightedEarlyStopping({"val_loss": 1.0}, validation_data=(xv, yv), validation_frequency=2)
    spy = Spy()
    _fit(model, x, y, [es, spy])
    assert len(es.history) == 3 and all(math.isnan(r["score"]) for r in es.history)
    assert (es.best_score, es.best_iteration, es.best_weights) == (math.inf, None, None)
    _assert_weights_equal(model.get_weights(), spy.weights[4])


def test_missing_log_name_lists_available_names():
    x, y = _data(16)
    xv, yv = _data(4, seed=5)
    model = _model()
    es = WeightedEarlyStopping({"val_rsme": 1.0}, validation_data=(xv, yv), validation_frequency=2)
    with pytest.raises(KeyError, match=r"'val_rsme'.*'loss'.*'rmse'.*'val_loss'.*'val_rmse'"):
        _fit(model, x, y, [es])
    es = WeightedEarlyStopping({"val_loss": 1.0})  # epoch-end check, fit has no validation
    with pytest.raises(KeyError, match=r"'val_loss' is not in the logs.*\['loss', 'rmse'\]"):
        _fit(model, x, y, [es])


_BAD_ARGUMENTS = [
    ({"weights": {}}, ValueError, "non-empty dict"),
    ({"weights": ["loss"]}, TypeError, "non-empty dict"),
    ({"weights": {"loss": math.nan}}, ValueError, "finite"),
    ({"weights": {1: 1.0}}, TypeError, "strings"),
    ({"validation_frequency": 0}, ValueError, ">= 1"),
    ({"validation_frequency": 1.5}, ValueError, r"\(0, 1\]"),
    ({"validation_frequency": True}, TypeError, "validation_frequency"),
    ({"patience": 0}, ValueError, "patience"),
    ({"min_delta": -1.0}, ValueError, "min_delta"),
    ({"filepath": "best.h5"}, ValueError, "'.keras'.*'.weights.h5'"),
    ({"validation_data": ([0.0], [0.0])}, ValueError, "validation_frequency"),
    ({"weights": {"val_loss": 1.0}, "validation_frequency": 2}, ValueError, "validation_data"),
]


def test_invalid_early_stopping_arguments():
    for kwargs, error, match in _BAD_ARGUMENTS:
        with pytest.raises(error, match=match):
            WeightedEarlyStopping(**{"weights": {"loss": 1.0}, **kwargs})


def test_early_stopping_config_round_trip():
    es = WeightedEarlyStopping(
        {"val_rmse": 1.0, "loss": 0.1},
        validation_data=([0.0], [0.0]),
        validation_frequency=0.2,
        patience=4,
        filepath="run/best.keras",
    )
    config = es.get_config()
    assert "validation_data" not in config
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(WeightedEarlyStopping({"loss": 2.0}, patience=2))
    )
    assert isinstance(restored, WeightedEarlyStopping) and restored.patience == 2
    config["validation_frequency"] = None
    assert WeightedEarlyStopping.from_config(config).weights == {"val_rmse": 1.0, "loss": 0.1}


# ---------------------------------------------------------------------------
# WeightedEarlyStopping: checkpoint files
# ---------------------------------------------------------------------------


def _load_weights(path):
    if str(path).endswith(".keras"):
        return keras.saving.load_model(path).get_weights()
    model = _model()
    model.load_weights(path)
    return model.get_weights()


def _read_json(path):
    with open(f"{path}.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("suffix", [".keras", ".weights.h5"])
def test_best_model_is_saved(tmp_path, suffix):
    x, y = _data(16)
    path = tmp_path / "run" / f"best{suffix}"
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, filepath=path)
    spy = Spy()
    _fit(
        _model(), x, y, [ScriptedLoss([3.0, 1.0, 2.0, 0.5, 4.0, 0.7, 0.6, 0.9]), es, spy], epochs=2
    )
    assert sorted(os.listdir(path.parent)) == [f"best{suffix}", f"best{suffix}.json"]
    _assert_weights_equal(_load_weights(path), spy.weights[4])
    meta = _read_json(path)
    assert (meta["best_score"], meta["best_epoch"], meta["best_iteration"]) == (0.5, 1, 4)


@pytest.mark.parametrize("suffix, method", [(".keras", "save"), (".weights.h5", "save_weights")])
def test_crash_during_a_later_save_keeps_the_good_file(tmp_path, monkeypatch, suffix, method):
    x, y = _data(16)
    path = tmp_path / f"best{suffix}"
    model = _model()
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, filepath=path)
    _fit(model, x, y, [ScriptedLoss([3.0, 2.0, 4.0, 5.0]), es])
    good_bytes, good_weights = path.read_bytes(), es.best_weights

    def broken_save(self, filepath, *args, **kwargs):
        with open(filepath, "wb") as f:
            f.write(b"\x89HDF partial")
        raise OSError("disk full")

    monkeypatch.setattr(keras.Model, method, broken_save)
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, filepath=path)
    with pytest.raises(OSError, match="disk full"):
        _fit(model, x, y, [ScriptedLoss([1.0, 0.5, 0.4, 0.3]), es])
    monkeypatch.undo()

    assert path.read_bytes() == good_bytes
    assert sorted(os.listdir(tmp_path)) == [f"best{suffix}", f"best{suffix}.json"]
    _assert_weights_equal(_load_weights(path), good_weights)
    assert _read_json(path)["best_score"] == 2.0


def test_resumed_run_does_not_overwrite_a_better_saved_model(tmp_path):
    x, y = _data(16)
    path = tmp_path / "best.weights.h5"
    model = _model()
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, filepath=path)
    _fit(model, x, y, [ScriptedLoss([2.0, 1.0, 3.0, 3.0]), es])
    saved_bytes, saved_weights = path.read_bytes(), es.best_weights

    # A worse resumed run: nothing beats 1.0, the file stays, and the saved best is restored.
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, filepath=path)
    spy = Spy()
    _fit(model, x, y, [ScriptedLoss([1.5, 1.2, 1.1, 1.3]), es, spy], epochs=2, initial_epoch=1)
    assert [r["iteration"] for r in es.history] == [5, 6, 7, 8]
    assert (es.best_score, es.best_iteration, es.best_weights) == (1.0, 2, None)
    assert path.read_bytes() == saved_bytes
    assert not np.allclose(spy.weights[8][0], saved_weights[0])
    _assert_weights_equal(model.get_weights(), saved_weights)

    # A better one replaces it.
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1, filepath=path)
    spy = Spy()
    _fit(model, x, y, [ScriptedLoss([1.5, 0.8, 0.9, 1.0]), es, spy], epochs=3, initial_epoch=2)
    assert (es.best_score, es.best_iteration) == (0.8, 10)
    assert _read_json(path)["best_iteration"] == 10
    _assert_weights_equal(_load_weights(path), spy.weights[10])


# -- decay by iteration, checks at the start and the end -------------------------------


@pytest.mark.parametrize("points, rate", [((0.5, 0.8), 0.3), ((0.25,), 0.5)])
def test_iteration_decay_trains_as_keras_piecewise_constant_decay(points, rate):
    """The same updates as Keras's own schedule with boundaries floor(p * I)."""
    x, y = _data(n=40)
    iterations = 10  # 40 samples / batch 4
    boundaries = [math.floor(p * iterations) for p in points]
    values = [1e-2 * rate**k for k in range(len(boundaries) + 1)]
    reference = _model(optimizer=keras.optimizers.Adam(
        keras.optimizers.schedules.PiecewiseConstantDecay(boundaries, values)))  # fmt: skip
    _fit(reference, x, y, [])
    model = _model(learning_rate=1e-2)
    _fit(model, x, y, [LearningRateDecayPoints(points, rate, unit="iteration")])
    _assert_weights_equal(model.get_weights(), reference.get_weights())


def test_iteration_decay_rates_per_batch():
    x, y = _data(n=40)
    seen = []

    class Rate(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))

    model = _model(learning_rate=1e-2)
    _fit(model, x, y, [LearningRateDecayPoints(0.5, 0.1, unit="iteration"), Rate()], epochs=2)
    # 20 iterations: the boundary floor(0.5 * 20) = 10; updates 0..10 at 1e-2, then 1e-3.
    np.testing.assert_allclose(seen, [1e-2] * 11 + [1e-3] * 9, rtol=1e-6)


def test_check_at_start_scores_the_starting_weights_and_can_keep_them():
    x, y = _data()
    model = _model(learning_rate=10.0)  # a rate that only makes the model worse
    start_weights, start_rmse = _copy(model.get_weights()), model.evaluate(x, y, verbose=0)[1]
    stopper = WeightedEarlyStopping(
        {"val_rmse": 1.0}, validation_data=(x, y), validation_frequency=2, check_at_start=True
    )
    _fit(model, x, y, [stopper])
    assert [h["iteration"] for h in stopper.history] == [0, 2, 4]  # 16 / 4 = 4 iterations
    assert stopper.history[0]["val_rmse"] == pytest.approx(start_rmse, rel=1e-6)
    assert stopper.best_iteration == 0 and stopper.best_score == stopper.history[0]["score"]
    _assert_weights_equal(model.get_weights(), start_weights)


def test_check_at_end_checks_a_last_batch_off_the_frequency():
    x, y = _data(n=28)  # 7 iterations of batch 4
    at_end = WeightedEarlyStopping(
        {"val_rmse": 1.0}, validation_data=(x, y), validation_frequency=3, check_at_end=True
    )
    plain = WeightedEarlyStopping({"val_rmse": 1.0}, validation_data=(x, y), validation_frequency=3)
    _fit(_model(), x, y, [at_end])
    _fit(_model(), x, y, [plain])
    assert [h["iteration"] for h in plain.history] == [1, 3, 6]
    assert [h["iteration"] for h in at_end.history] == [1, 3, 6, 7]


def test_edge_checks_and_iteration_decay_refuse_what_they_cannot_do():
    with pytest.raises(ValueError, match="set `validation_frequency`"):
        WeightedEarlyStopping({"loss": 1.0}, check_at_end=True)
    with pytest.raises(ValueError, match="weigh only `val_"):
        WeightedEarlyStopping(
            {"val_rmse": 1.0, "loss": 0.1}, validation_data=(np.zeros((1, 1)),) * 2,
            validation_frequency=2, check_at_start=True,
        )  # fmt: skip
    with pytest.raises(ValueError, match="`unit` must be one of"):
        LearningRateDecayPoints(0.5, unit="step")
    from keras_mgu.callbacks import TimeBudget

    with pytest.raises(ValueError, match="unit='epoch'"):
        TimeBudget(10.0, LearningRateDecayPoints(0.5, unit="iteration"))
    assert LearningRateDecayPoints(0.5, unit="iteration").get_config()["unit"] == "iteration"


class _Terminal:
    """A stream that says it is a terminal, keeping what is written."""

    def __init__(self, tty=True):
        self.text, self.tty = "", tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_terminal_progress_rewrites_one_line_and_erases_it(tty):
    from keras_mgu.callbacks import TerminalProgress

    x, y = _data()
    stream = _Terminal(tty)
    _fit(_model(), x, y, [TerminalProgress(stream, every=0.0)], epochs=2)
    if not tty:
        assert stream.text == ""
        return
    shown = [part.strip() for part in stream.text.split("\r") if part.strip()]
    steps = 2 * len(x) // BATCH
    assert shown == [f"training: {k}/{steps} iterations" for k in range(1, steps + 1)]
    assert "\n" not in stream.text and stream.text.endswith("\r")  # erased, no new line


def _blocks_supported():
    if keras.backend.backend() == "torch":
        pytest.skip("Keras's PyTorch trainer runs one step per call (no steps_per_execution)")


def test_checks_and_best_weights_are_the_same_under_steps_per_execution():
    _blocks_supported()
    x, y = _data(16)
    xv, yv = _data(8, seed=5)
    stoppers, weights = [], []
    for block in (1, 2):
        model = _model()
        model.compile(
            optimizer=keras.optimizers.Adam(1e-2), loss="mse", steps_per_execution=block,
            metrics=[keras.metrics.RootMeanSquaredError(name="rmse")],
        )  # fmt: skip
        es = WeightedEarlyStopping({"val_rmse": 1.0}, validation_data=(xv, yv),
                                   validation_frequency=4, check_at_start=True)  # fmt: skip
        _fit(model, x, y, [es], epochs=3)  # 4 batches per epoch, 12 iterations
        stoppers.append(es)
        weights.append(_copy(model.get_weights()))
    one, blocks = stoppers
    assert [r["iteration"] for r in one.history] == [0, 4, 8, 12]
    assert [r["iteration"] for r in blocks.history] == [0, 4, 8, 12]
    assert [r["iteration"] for r in blocks.train_history] == list(range(2, 13, 2))  # per block
    for a, b in zip(one.history, blocks.history, strict=True):
        assert a["score"] == pytest.approx(b["score"], rel=1e-6)
    assert one.best_iteration == blocks.best_iteration
    for a, b in zip(*weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_terminal_progress_counts_iterations_under_steps_per_execution():
    _blocks_supported()
    from keras_mgu.callbacks import TerminalProgress

    x, y = _data()
    model = _model()
    model.compile(optimizer="adam", loss="mse", steps_per_execution=2)
    stream = _Terminal(True)
    _fit(model, x, y, [TerminalProgress(stream, every=0.0)], epochs=2)
    shown = [part.strip() for part in stream.text.split("\r") if part.strip()]
    steps = 2 * len(x) // BATCH
    assert shown == [f"training: {k}/{steps} iterations" for k in range(2, steps + 1, 2)]
