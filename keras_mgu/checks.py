"""The package's argument checks, in one place.

Each check raises a one-line ``ValueError`` (or ``TypeError``) that names
what was expected. Two callers:

* :class:`keras_mgu.FusedRNN` (and so ``MGU``) checks what a user passes to
  the layer; ``layer`` is the layer's class name in the messages.
* The MGU sequence kernels of every backend (:mod:`keras_mgu.kernels`) and the
  native loops (:mod:`keras_mgu.native`) check their arguments here too, so a
  bad call gets the same message on TensorFlow, JAX and PyTorch. These checks
  are backend-neutral: they take static shapes (tuples whose unknown
  dimensions are ``None``), dtype names and activation names, and each
  backend module turns its tensors into those before it computes.

Nothing here imports a backend.
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


# ------------------------------------------------------ sequence kernels and loops
#: Activations the MGU sequence kernels and native loops implement (forward and
#: hand-written backward), by name.
KERNEL_ACTIVATIONS = ("tanh", "sigmoid")


def static_shape(shape: Any) -> tuple:
    """``shape`` as a tuple of ints, with ``None`` for every unknown or symbolic dimension."""
    return tuple(d if isinstance(d, int) and not isinstance(d, bool) else None for d in shape)


def check_kernel_activations(activation: Any, recurrent_activation: Any) -> None:
    """Both activations must be names in :data:`KERNEL_ACTIVATIONS`."""
    for arg, name in (("activation", activation), ("recurrent_activation", recurrent_activation)):
        if not isinstance(name, str) or name not in KERNEL_ACTIVATIONS:
            raise ValueError(
                f"The MGU sequence kernels support `{arg}` in {KERNEL_ACTIVATIONS}; "
                f"received {arg}={name!r}."
            )


def check_floating(dtype: str, arg: str = "inputs") -> None:
    """``dtype`` (a name such as ``"float32"`` or ``"bfloat16"``) must be floating."""
    if not dtype.startswith(("float", "bfloat")):
        raise TypeError(f"`{arg}` must be a floating tensor; received dtype {dtype}.")


def check_dtype_among(dtype: str, allowed: tuple, what: str) -> None:
    """``dtype`` (a name) must be one of ``allowed``, the dtypes ``what`` computes in."""
    if dtype not in allowed:
        raise TypeError(f"{what} compute in {allowed}; received dtype {dtype}.")


def check_mask_dtype(dtype: str) -> None:
    """A kernel's ``mask`` must be boolean (True where a step is real)."""
    if dtype != "bool":
        raise TypeError(
            f"`mask` must be a boolean tensor (True where a step is real); received dtype {dtype}."
        )


def _compatible(got: tuple, want: tuple) -> bool:
    return len(got) == len(want) and all(
        g is None or w is None or g == w for g, w in zip(got, want)
    )


def check_sequence_shapes(
    inputs: tuple,
    recurrent_kernel: tuple,
    *,
    initial_state: tuple | None = None,
    kernel: tuple | None = None,
    bias: tuple | None = None,
    mask: tuple | None = None,
) -> None:
    """The shapes of one MGU sequence call (see :func:`keras_mgu.kernels.mgu_sequence`).

    ``inputs`` ``(B, T >= 1, D)``, ``recurrent_kernel`` ``(H, 2H)``,
    ``initial_state`` ``(B, H)``, ``kernel`` ``(D, 2H)``, ``bias`` ``(2H,)``,
    ``mask`` ``(B, T)``; the last four may be None (not given). Every shape
    is a :func:`static_shape`; unknown dimensions pass.
    """
    if len(inputs) != 3 or inputs[1] == 0:
        raise ValueError(
            f"`inputs` must have shape (batch, steps >= 1, features); received {inputs}."
        )
    units = recurrent_kernel[0] if len(recurrent_kernel) == 2 else None
    two_units = None if units is None else 2 * units
    if len(recurrent_kernel) != 2 or not _compatible(recurrent_kernel, (units, two_units)):
        raise ValueError(
            f"`recurrent_kernel` must have shape (H, 2H); received {recurrent_kernel}."
        )
    batch, steps, features = inputs
    expected = {
        "initial_state": (initial_state, (batch, units)),
        "kernel": (kernel, (features, two_units)),
        "bias": (bias, (two_units,)),
        "mask": (mask, (batch, steps)),
    }
    for arg, (got, want) in expected.items():
        if got is not None and not _compatible(got, want):
            raise ValueError(
                f"`{arg}` must have shape {want} for inputs of shape {inputs} and "
                f"recurrent_kernel of shape {recurrent_kernel}; received {got}."
            )


def check_grouped_shapes(inputs: tuple, recurrent_kernel: tuple) -> None:
    """``inputs`` ``(G, B, T, D)`` and ``recurrent_kernel`` ``(G, H, 2H)`` of a grouped call."""
    units = recurrent_kernel[1] if len(recurrent_kernel) == 3 else None
    two_units = None if units is None else 2 * units
    if len(recurrent_kernel) != 3 or not _compatible(recurrent_kernel[1:], (units, two_units)):
        raise ValueError(
            f"`recurrent_kernel` must have shape (G, H, 2H); received {recurrent_kernel}."
        )
    if len(inputs) != 4 or not _compatible(inputs[:1], recurrent_kernel[:1]):
        raise ValueError(
            f"`inputs` must have shape (G={recurrent_kernel[0]}, batch, steps, features); "
            f"received {inputs}."
        )


def groups_of(u_shape: tuple, batch: int | None = None, units: int | None = None) -> int:
    """G of a recurrent kernel of shape ``u_shape``: 1 for ``(H, 2H)``, G for ``(G, H, 2H)``.

    The native loops run G groups of rows at once, group g owning the batch
    rows ``[g B/G, (g+1) B/G)``. Raises ValueError for another rank, for
    ``G < 1``, for a kernel that is not ``(units, 2 units)`` per group where
    ``units`` is given, or when a known ``batch`` is not a multiple of G.
    Unknown dimensions (None) pass.
    """
    if len(u_shape) not in (2, 3):
        raise ValueError(
            f"The recurrent kernel `u` must have shape (H, 2H) or (G, H, 2H); received {u_shape}."
        )
    kernel = tuple(u_shape[-2:])
    if units is not None and kernel != (units, 2 * units) and None not in kernel:
        raise ValueError(
            f"The recurrent kernel `u` must have shape ({units}, {2 * units}) or "
            f"(G, {units}, {2 * units}) for {units} units; received {u_shape}."
        )
    groups = 1 if len(u_shape) == 2 else u_shape[0]
    if groups is None:
        return 1
    if groups < 1:
        raise ValueError(f"The recurrent kernel `u` {u_shape} must have at least one group.")
    if batch is not None and batch % groups:
        raise ValueError(
            f"With a recurrent kernel `u` of shape {u_shape} (G = {groups} groups), the batch "
            f"must be a multiple of G = {groups}; received a batch of {batch}."
        )
    return int(groups)
