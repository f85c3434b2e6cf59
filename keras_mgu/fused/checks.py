"""The argument checks of :class:`keras_mgu.FusedRNN` (and so of ``MGU``), in one place.

Each check raises a one-line ``ValueError`` (or ``TypeError``) that names
what was expected; ``layer`` is the layer's class name in the messages.
"""

from __future__ import annotations

from typing import Any

from keras import ops

IMPLEMENTATIONS = ("auto", "fused", "cell")


def check_implementation(implementation: Any) -> None:
    """Refuse an ``implementation`` other than ``"auto"``, ``"fused"`` or ``"cell"``."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"`implementation` must be one of {IMPLEMENTATIONS}; "
            f"received implementation={implementation!r}."
        )


def check_sequences_shape(shape: Any, layer: str, built_features: int | None = None) -> None:
    """``shape`` must be ``(batch, steps >= 1, features)``, with the built feature count."""
    shape = tuple(shape)
    if len(shape) != 3:
        raise ValueError(
            f"{layer} expects inputs of rank 3, (batch, steps, features); "
            f"received an input of rank {len(shape)} with shape {shape}."
        )
    if shape[1] == 0:
        raise ValueError(f"{layer} needs at least one time step; received shape {shape}.")
    if built_features is not None and shape[-1] is not None and shape[-1] != built_features:
        raise ValueError(
            f"{layer} was built for {built_features} input features but received "
            f"{shape[-1]} (input shape {shape})."
        )


def check_real_dtype(dtype: str, layer: str) -> None:
    """Refuse complex inputs (integers and booleans are cast by the layer)."""
    if "complex" in dtype:
        raise TypeError(
            f"{layer} expects real inputs (floating, integer or bool); received dtype {dtype}. "
            "It computes with floating values."
        )


def check_mask_shape(mask_shape: Any, sequences_shape: Any, layer: str) -> None:
    """``mask_shape`` must be ``(batch, steps)`` of the sequences."""
    mask_shape, sequences_shape = tuple(mask_shape), tuple(sequences_shape)
    expected = sequences_shape[:2]
    if len(mask_shape) != 2 or any(
        m is not None and s is not None and m != s for m, s in zip(mask_shape, expected)
    ):
        raise ValueError(
            f"{layer} expects a mask of shape (batch, steps) = {expected}; received a mask of "
            f"shape {mask_shape}."
        )


def check_initial_state(
    initial_state: Any, sequences_shape: Any, state_sizes: list, layer: str
) -> None:
    """One ``(batch, state_sizes[i])`` tensor per state (a flat list of int sizes only)."""
    if not all(isinstance(size, int) for size in state_sizes):
        return  # nested states (stacked cells): Keras checks them
    states = initial_state if isinstance(initial_state, (list, tuple)) else [initial_state]
    batch = tuple(sequences_shape)[0]
    expected = [(batch, size) for size in state_sizes]
    shown = expected[0] if len(expected) == 1 else expected
    if len(states) != len(state_sizes):
        count = "one state" if len(state_sizes) == 1 else f"{len(state_sizes)} states"
        raise ValueError(
            f"{layer} has {count}; `initial_state` must be {len(state_sizes)} tensor(s) of "
            f"shape (batch, units) = {shown}; received {len(states)} tensors."
        )
    for state, size in zip(states, state_sizes):
        shape = tuple(ops.shape(state))
        if (
            len(shape) != 2
            or shape[-1] != size
            or (batch is not None and shape[0] is not None and shape[0] != batch)
        ):
            raise ValueError(
                f"`initial_state` must have shape (batch, units) = {shown}; received a state "
                f"of shape {shape}."
            )
