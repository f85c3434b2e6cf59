"""Variable-length batches, long records (stateful windows) and crash-safe training runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_mgu import MGU
from keras_mgu.kernels import reference
from tests.helpers import (
    CELL_AND_FUSED,
    load_script,
    random_mgu_weights,
    to_numpy,
    value_and_grad,
)

IMPLEMENTATIONS = CELL_AND_FUSED
D, H = 3, 4
LENGTHS = [4, 6, 1]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPTS = os.path.join(ROOT, "tests", "scripts")


def random_weights(rng, d=D, h=H):
    return random_mgu_weights(rng, d, h)


def layer_with_weights(weights, **kwargs):
    layer = MGU(H, **kwargs)
    layer.build((None, None, D))
    layer.set_weights(weights)
    return layer


def ragged_sequences(rng, lengths=LENGTHS):
    return [rng.standard_normal((n, D)).astype("float32") for n in lengths]


def pad(sequences):
    padded = keras.utils.pad_sequences(sequences, padding="post", dtype="float32")
    mask = np.zeros(padded.shape[:2], bool)
    for i, seq in enumerate(sequences):
        mask[i, : len(seq)] = True
    return padded, mask


# --------------------------------------------------------------------------------------------
# Variable-length sequences
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "masking, go_backwards",
    [("masking_layer", False), ("explicit_mask", False), ("explicit_mask", True)],
)
def test_padded_batch_matches_each_sequence_alone(rng, implementation, masking, go_backwards):
    weights = random_weights(rng)
    kwargs = dict(return_sequences=True, return_state=True, go_backwards=go_backwards)
    layer = layer_with_weights(weights, implementation=implementation, **kwargs)
    sequences = ragged_sequences(rng)
    padded, mask = pad(sequences)
    if masking == "masking_layer":
        inputs = keras.Input((None, D))
        model = keras.Model(inputs, layer(keras.layers.Masking(0.0)(inputs)))
        out, state = model(padded)
    else:
        out, state = layer(padded, mask=mask)
    out, state = to_numpy(out), to_numpy(state)
    steps = padded.shape[1]
    for i, seq in enumerate(sequences):
        n = len(seq)
        alone_out, alone_state = layer(seq[None])
        ref_out, ref_state = reference.mgu_sequence(seq[None], *weights, go_backwards=go_backwards)
        np.testing.assert_allclose(to_numpy(alone_out), ref_out, atol=1e-5)
        np.testing.assert_allclose(to_numpy(alone_state), ref_state, atol=1e-5)
        # Real steps: first n (forward) or, in processing order, the last n (backwards).
        real = slice(steps - n, steps) if go_backwards else slice(0, n)
        np.testing.assert_allclose(out[i, real], ref_out[0], atol=1e-5)
        np.testing.assert_allclose(state[i], ref_state[0], atol=1e-5)
        # Padded steps emit the carried state: the final state (forward) or zeros (backwards).
        carried = np.zeros(H) if go_backwards else ref_state[0]
        pad_steps = slice(0, steps - n) if go_backwards else slice(n, steps)
        expected_pad = np.broadcast_to(carried, out[i, pad_steps].shape)
        np.testing.assert_allclose(out[i, pad_steps], expected_pad, atol=1e-5)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_padded_loss_and_gradients_equal_per_sequence_sum(rng, implementation):
    """grad of the masked padded loss == sum over sequences of grads of each one alone."""
    weights = random_weights(rng)
    layer = layer_with_weights(weights, return_sequences=True, implementation=implementation)
    sequences = ragged_sequences(rng)
    targets = [rng.standard_normal((len(s), H)).astype("float32") for s in sequences]
    padded, mask = pad(sequences)
    padded_targets, _ = pad(targets)
    # stateless_call runs call() directly, so it is given backend tensors.
    padded, mask = keras.ops.convert_to_tensor(padded), keras.ops.convert_to_tensor(mask)
    padded_targets = keras.ops.convert_to_tensor(padded_targets)
    non_trainable = [v.value for v in layer.non_trainable_variables]

    def padded_loss(*trainable):
        out, _ = layer.stateless_call(list(trainable), non_trainable, padded, mask=mask)
        err = (out - padded_targets) ** 2 * keras.ops.cast(mask, out.dtype)[..., None]
        return keras.ops.sum(err)

    def loss_alone(seq, target):
        def fn(*trainable):
            x, y = keras.ops.convert_to_tensor(seq[None]), keras.ops.convert_to_tensor(target)
            out, _ = layer.stateless_call(list(trainable), non_trainable, x)
            return keras.ops.sum((out[0] - y) ** 2)

        return fn

    value, grads = value_and_grad(padded_loss, weights)
    total, total_grads = 0.0, [np.zeros_like(w) for w in weights]
    for seq, target in zip(sequences, targets):
        v, g = value_and_grad(loss_alone(seq, target), weights)
        total += v
        total_grads = [a + b for a, b in zip(total_grads, g)]
    np.testing.assert_allclose(value, total, rtol=1e-5)
    for g, ref in zip(grads, total_grads):
        np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-5)
    assert all(np.abs(g).sum() > 0 for g in grads)


# --------------------------------------------------------------------------------------------
# Long records: stateful windows (truncated backpropagation through time)
# --------------------------------------------------------------------------------------------


def to_windows(record: np.ndarray, window: int) -> np.ndarray:
    """``(streams, steps, F)`` -> ``(windows * streams, window, F)``, window-major.

    Batch ``k`` of size ``streams`` is then window ``k`` of every stream, as a
    stateful layer expects (row ``i`` of each batch continues row ``i`` of the last).
    """
    streams, steps, features = record.shape
    n = steps // window
    cut = record[:, : n * window].reshape(streams, n, window, features)
    return cut.transpose(1, 0, 2, 3).reshape(n * streams, window, features)


class ResetStatesAtEpochBegin(keras.callbacks.Callback):
    """Clear the state of every stateful layer when an epoch starts."""

    def on_epoch_begin(self, epoch, logs=None):
        for layer in self.model.layers:
            if getattr(layer, "stateful", False):
                layer.reset_state()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_stateful_windows_equal_one_pass(rng, implementation):
    streams, steps, window = 2, 60, 15
    weights = random_weights(rng)
    record = rng.standard_normal((streams, steps, D)).astype("float32")
    stateful = MGU(H, return_sequences=True, stateful=True, implementation=implementation)
    stateful.build((streams, window, D))
    stateful.set_weights(weights)
    whole = layer_with_weights(weights, return_sequences=True, implementation=implementation)

    def windowed_pass():
        return np.concatenate(
            [to_numpy(stateful(record[:, s : s + window])) for s in range(0, steps, window)],
            axis=1,
        )

    expected = to_numpy(whole(record))
    np.testing.assert_allclose(windowed_pass(), expected, atol=1e-5)
    np.testing.assert_allclose(expected, reference.mgu_sequence(record, *weights)[0], atol=1e-5)
    # Without a reset the next pass starts from the carried state and differs ...
    assert np.abs(to_numpy(stateful(record[:, :window])) - expected[:, :window]).max() > 1e-3
    # ... and after reset_state() it is the one pass again.
    stateful.reset_state()
    np.testing.assert_allclose(windowed_pass(), expected, atol=1e-5)


def stateful_model(streams, window, implementation):
    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [
            keras.Input(batch_shape=(streams, window, D)),
            MGU(H, return_sequences=True, stateful=True, implementation=implementation),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_truncated_bptt_fit_recipe_equals_manual_loop(rng, implementation):
    """fit(shuffle=False, batch_size=streams) + reset at epoch start == the loop it stands for."""
    streams, steps, window, epochs = 2, 24, 6, 2
    record = rng.standard_normal((streams, steps, D)).astype("float32")
    target = np.cumsum(record[..., :1], axis=1).astype("float32") * 0.1
    x, y = to_windows(record, window), to_windows(target, window)

    fitted = stateful_model(streams, window, implementation)
    initial = fitted.get_weights()
    fitted.fit(
        x,
        y,
        batch_size=streams,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        callbacks=[ResetStatesAtEpochBegin()],
    )

    manual = stateful_model(streams, window, implementation)
    manual.set_weights(initial)
    for _ in range(epochs):
        manual.layers[0].reset_state()
        for k in range(0, len(x), streams):
            manual.train_on_batch(x[k : k + streams], y[k : k + streams])

    for a, b in zip(fitted.get_weights(), manual.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(initial, fitted.get_weights()))


# --------------------------------------------------------------------------------------------
# Crash-safe runs
# --------------------------------------------------------------------------------------------


def load_crash_script():
    return load_script("tests", "scripts", "crash_train.py")


def subprocess_env():
    return dict(
        os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND=keras.backend.backend()
    )


def run_until_hang_then_kill(workdir, hang_at):
    cmd = [
        sys.executable,
        os.path.join(SCRIPTS, "crash_train.py"),
        str(workdir),
        "--hang-at",
        hang_at,
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env()
    )
    events = []
    try:
        for line in proc.stdout:
            events.append(json.loads(line))
            if events[-1]["event"] == "hang":
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert events and events[-1]["event"] == "hang", err[-2000:]
    return events


def saved_best_is_consistent(workdir, module):
    """The best model file loads and its validation loss is the JSON's best score."""
    with open(os.path.join(workdir, "best.keras.json"), encoding="utf-8") as f:
        meta = json.load(f)
    model = keras.saving.load_model(os.path.join(workdir, "best.keras"))
    _, (xv, yv) = module.make_data()
    val_loss = model.evaluate(xv, yv, verbose=0, batch_size=len(xv))
    np.testing.assert_allclose(val_loss, meta["best_score"], rtol=1e-5)
    return meta


def test_killed_run_resumes_without_losing_best_model_or_schedule(tmp_path):
    module = load_crash_script()
    epochs = 8
    # Uninterrupted reference run, in this process.
    reference_dir = tmp_path / "uninterrupted"
    reference_dir.mkdir()
    uninterrupted = module.train(str(reference_dir), epochs=epochs)

    workdir = tmp_path / "resumed"
    workdir.mkdir()
    events = run_until_hang_then_kill(workdir, hang_at="4:2")
    killed_lrs = {e["epoch"]: e["learning_rate"] for e in events if e["event"] == "epoch"}
    assert sorted(killed_lrs) == [1, 2, 3]
    before = saved_best_is_consistent(workdir, module)
    assert before["best_iteration"] == 3 * 4 + 2  # the check just before the kill

    resumed = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, "crash_train.py"), str(workdir)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    resumed_events = [json.loads(line) for line in resumed.stdout.splitlines()]
    resumed_lrs = {e["epoch"]: e["learning_rate"] for e in resumed_events if e["event"] == "epoch"}
    assert sorted(resumed_lrs) == list(range(4, epochs + 1))  # restarted at the killed epoch

    expected_lrs = {int(k): v for k, v in uninterrupted["learning_rates"].items()}
    np.testing.assert_allclose(
        [{**killed_lrs, **resumed_lrs}[e] for e in range(1, epochs + 1)],
        [expected_lrs[e] for e in range(1, epochs + 1)],
        rtol=1e-6,
    )
    after = saved_best_is_consistent(workdir, module)
    assert after["best_score"] <= before["best_score"]
    np.testing.assert_allclose(after["best_score"], uninterrupted["best_score"], rtol=1e-4)
    final = np.load(os.path.join(workdir, "final.weights.npz"))
    expected = np.load(os.path.join(reference_dir, "final.weights.npz"))
    for name in expected.files:
        np.testing.assert_allclose(final[name], expected[name], rtol=1e-4, atol=1e-5)
