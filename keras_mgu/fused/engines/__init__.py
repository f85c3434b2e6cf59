"""Backend engines that run a :mod:`keras_mgu.fused.step` recurrence fused.

Every engine module exposes::

    run(step, projected, carry, weights, mask, *, go_backwards) -> (outputs, final_carry)

with ``projected`` ``(B, T, P)`` (the cell's ``project_inputs`` of the whole
sequence), ``carry`` the list of ``(B, ...)`` initial carries, ``weights`` the
values of the cell's variables, ``mask`` ``(B, T)`` booleans or None, and
``step(p_t, m_t, carry, weights) -> (output_t, new_carry)`` pure. It returns
the outputs ``(B, T, O)`` in processing order (reversed time when
``go_backwards``) and the final carry. An engine may set ``HOIST_PROJECTION =
False``: the layer then passes the raw inputs as ``projected`` and a ``step``
that applies ``project_inputs`` itself (measured faster on JAX). Gradients with respect to
``projected``, ``carry`` and ``weights`` (first and second order) come from a
backward pass through time derived from ``step``.
"""

from __future__ import annotations

from types import ModuleType

from keras_mgu import registry


def has_engine(backend: str | None = None) -> bool:
    """Whether ``backend`` (default: the active Keras backend) has a fused engine."""
    return registry.has("engine", backend)


def engine_module(backend: str | None = None) -> ModuleType:
    """The engine module of ``backend`` (default: the active Keras backend), from
    :mod:`keras_mgu.registry`; NotImplementedError for a backend without one."""
    return registry.backend_module("engine", backend)
