"""Problems and NumPy reference runs shared by the backend kernel tests."""

import keras
import numpy as np

from keras_mgu.kernels import reference

NP_ACTIVATIONS = {"tanh": np.tanh, "sigmoid": reference.sigmoid}


def make_problem(rng, batch=3, steps=5, features=2, units=4, dtype="float64"):
    """Random inputs and weights, and a mask with holes and one fully masked row."""
    mask = rng.random((batch, steps)) > 0.35
    mask[0] = False
    mask[-1, -1] = True
    return {
        "inputs": rng.normal(size=(batch, steps, features)).astype(dtype),
        "initial_state": (0.5 * rng.normal(size=(batch, units))).astype(dtype),
        "kernel": (0.6 * rng.normal(size=(features, 2 * units))).astype(dtype),
        "recurrent_kernel": (0.6 * rng.normal(size=(units, 2 * units))).astype(dtype),
        "bias": (0.3 * rng.normal(size=(2 * units,))).astype(dtype),
        "mask": mask,
    }


def run_reference(p, bias=True, mask=True, go_backwards=False, act="tanh", ract="sigmoid"):
    """The NumPy reference on problem ``p``, with or without its bias and mask."""
    return reference.mgu_sequence(
        p["inputs"],
        p["kernel"],
        p["recurrent_kernel"],
        p["bias"] if bias else None,
        p["initial_state"],
        p["mask"] if mask else None,
        go_backwards=go_backwards,
        activation=NP_ACTIVATIONS[act],
        recurrent_activation=NP_ACTIVATIONS[ract],
    )


def autodiff_mgu(x, h0, w, u, b, mask=None, go_backwards=False, act="tanh", ract="sigmoid"):
    """A plain step-by-step MGU in ``keras.ops``, differentiated by the backend itself.

    Called with the active backend's own tensors; the independent autodiff
    twin that the fused kernels' hand-written gradients are compared with.
    """
    act, ract = getattr(keras.ops, act), getattr(keras.ops, ract)
    units = u.shape[0]
    steps = range(x.shape[1] - 1, -1, -1) if go_backwards else range(x.shape[1])
    h, outputs = h0, []
    for t in steps:
        z = x[:, t] @ w + (0.0 if b is None else b)
        f = ract(z[:, :units] + h @ u[:, :units])
        c = act(z[:, units:] + (f * h) @ u[:, units:])
        h_new = (1.0 - f) * h + f * c
        h = h_new if mask is None else keras.ops.where(mask[:, t, None], h_new, h)
        outputs.append(h)
    return keras.ops.stack(outputs, axis=1), h
