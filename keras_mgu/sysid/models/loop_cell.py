"""``ArxLoopCell``: a linear ARX model whose loop carries a nonlinear branch that starts at zero.

The cell's state ``z_t`` is the ARX model's own state, its lagged outputs and
inputs (a non-minimal linear state-space realisation of the ARX model)::

    z_t = [y_{t-1}, ..., y_{t-na}, u_{t-1}, ..., u_{t-nb+1}]      (B, na ny + (nb-1) nu)
    r_t = [z_t, u_t]                                              the regressors
    y_t = r_t W + c + g_t                                         ARX part plus branch
    z_{t+1} = [y_t, y_{t-1}, ..., y_{t-na+1}, u_t, ..., u_{t-nb+2}]

and the branch ``g_t`` is one of:

* ``"mlp"`` (NARX): ``g_t = MLP(r_t)``, ``tanh`` hidden layers, last layer
  zero at the start;
* a recurrent cell (the loop model): ``h_t = cell(r_t, h_{t-1})``,
  ``g_t = h_t P``, ``P = 0`` at the start; the cell's state rides beside
  ``z`` (``states = [z, *h]``);
* ``"polynomial"`` (the polynomial NARX): ``g_t = m(r_t) (P * M)``, ``m``
  the monomials named by ``terms`` (each a product of up to three
  regressors, the constant and linear ones included,
  :mod:`~keras_mgu.sysid.models.polynomial`), ``M`` the fixed 0/1 mask of
  which term is whose output (``term_outputs``), ``P = 0`` at the start; ``W``
  and ``c`` are not trained with this branch, so training moves only the
  chosen terms' coefficients.

``output_limits`` (optional, per output) clamp ``y_t`` to a box, so that a
model that runs off its range stays finite (a guard, not a model of the
plant: a run that reaches it is a run that failed).

Outside the estimation range, a cell given ``bounds`` (the range of each
regressor on the estimation record) degrades toward a linear model, its
``anchor`` (default: the one it started from), instead of extrapolating what
it learned::

    e_t = max_j  max(lo_j - r_tj, r_tj - hi_j, 0) / (hi_j - lo_j)      how far out
    s_t = clip(1 - e_t / fade, 0, 1)                                  1 inside the range
    y_t = r_t W_0 + c_0 + s_t (r_t (W - W_0) + (c - c_0) + g_t)      W_0, c_0: the anchor

with the branch reading ``clip(r_t, lo, hi)``: inside the range the model is
the one trained; a regressor ``fade`` of its range outside it, and beyond, it
is the anchor (in the recipe: a stable ARX model, the field's linear baseline).

``W``, ``c`` start at the least-squares ARX solution
(:class:`~keras_mgu.sysid.models.arx.LinearModel`, :func:`arx_kernel`), so a
fresh cell simulates exactly as the linear model does, and training starts
from the best linear model. The output of a step feeds back through ``z``:
the free run of the model is the cell run by :class:`keras_mgu.FusedRNN`
(its fused engine on every backend), and a window whose ``z_0`` is built from
measured samples (:class:`LagState`) starts from the measured outputs.

The arrays a cell is given (:func:`arx_kernel`, :func:`regressor_bounds`...)
and the checks of its arguments are
:mod:`~keras_mgu.sysid.models.loop_cell_arguments`'s, handed on here.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_mgu.fused.cell import FusedCell
from keras_mgu.sysid.models.loop_cell_arguments import (
    FADE,
    anchor_arrays,
    arx_kernel,
    check_array,
    check_branch,
    check_fade,
    check_order,
    check_range_pair,
    check_term_outputs,
    check_terms,
    lag_state_size,
    regressor_bounds,
    state_sizes,
)

__all__ = [
    "FADE",
    "ArxLoopCell",
    "LagState",
    "anchor_arrays",
    "arx_kernel",
    "lag_state_size",
    "regressor_bounds",
]


@keras.saving.register_keras_serializable(package="keras_mgu")
class LagState(keras.layers.Layer):
    """The ARX state ``z`` from measured samples before a window.

    Call it on ``[u_past (B, L, n_inputs), y_past (B, L, n_outputs)]``, the
    ``L >= max(na, nb - 1)`` samples before the window, oldest first; it
    returns ``z`` ``(B, nz)`` (module docstring), newest lag first.

    Args:
        na, nb: The ARX orders (``nb - 1`` input lags).
    """

    def __init__(self, na: int, nb: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.na, self.nb = check_order("na", na, 1), check_order("nb", nb, 1)

    def call(self, inputs: list) -> Any:
        u_past, y_past = inputs
        parts = [_newest_first(y_past, self.na)]
        if self.nb > 1:
            parts.append(_newest_first(u_past, self.nb - 1))
        return ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]

    def compute_output_shape(self, input_shape: list) -> tuple:
        (_, _, n_inputs), (batch, _, n_outputs) = input_shape
        return (batch, lag_state_size(n_inputs, n_outputs, self.na, self.nb))

    def get_config(self) -> dict:
        return {**super().get_config(), "na": self.na, "nb": self.nb}


def _newest_first(x: Any, lags: int) -> Any:
    """``(B, L, C)`` to ``(B, lags C)``: ``[x_{L-1}, x_{L-2}, ..., x_{L-lags}]``."""
    last = ops.flip(x[:, -lags:, :], axis=1)
    return ops.reshape(last, (-1, lags * x.shape[-1]))


@keras.saving.register_keras_serializable(package="keras_mgu")
class ArxLoopCell(FusedCell):
    """ARX model with a nonlinear branch inside its loop (module docstring).

    Args:
        n_inputs, n_outputs: Channel counts.
        na, nb: ARX orders: ``na >= 1`` output lags, inputs ``u_t ..
            u_{t-nb+1}`` (``nb >= 1``).
        kernel, bias: Starting ``W`` ``(nz + n_inputs, n_outputs)`` and ``c``
            ``(n_outputs,)`` (nested lists or arrays; default zeros), e.g.
            from :func:`arx_kernel` and the ARX model's ``c``.
        branch: ``"mlp"`` (NARX), or a recurrent Keras cell (an
            :class:`keras_mgu.MGUCell`, ``keras.layers.GRUCell``, a user's
            :class:`keras_mgu.FusedCell`...) or its serialised config.
        hidden: Hidden layer sizes of the ``"mlp"`` branch (``()``: no
            branch but a linear term, a purely linear model).
        bounds: ``None`` (default), or ``(lower, upper)``, each ``(nz +
            n_inputs,)``: the estimation range of every regressor
            (:func:`regressor_bounds`); outside it the model fades to
            ``anchor`` (module docstring).
        fade: The share of a regressor's range outside it at which the
            model is the anchor alone.
        anchor: ``(kernel, bias)`` of the linear model faded to outside
            ``bounds`` (``W_0``, ``c_0`` of the module docstring; shapes as
            ``kernel`` and ``bias``); default: ``kernel`` and ``bias``.
        terms: The ``"polynomial"`` branch's monomials, ``(n_terms, 3)``
            indices into ``[r_t, 1]`` (index ``nz + n_inputs`` is the
            constant one): term ``k`` is ``r[i] r[j] r[l]``.
        term_outputs: ``(n_terms, n_outputs)`` 0/1: which output each term
            is one of (default: every output).
        output_limits: ``None``, or ``(lower, upper)``, each ``(n_outputs,)``
            with ``upper > lower``: ``y_t`` is clamped to them.

    Call arguments: as :class:`keras_mgu.FusedCell`; inputs ``u_t`` ``(B,
    n_inputs)``, states ``[z (B, nz), *branch_states]``; output ``y_t`` ``(B,
    n_outputs)``.
    """

    def __init__(
        self,
        n_inputs: int,
        n_outputs: int,
        na: int,
        nb: int,
        kernel: Any = None,
        bias: Any = None,
        branch: Any = "mlp",
        hidden: tuple[int, ...] | list[int] = (64, 64),
        bounds: Any = None,
        fade: float = FADE,
        anchor: Any = None,
        terms: Any = None,
        output_limits: Any = None,
        term_outputs: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.n_inputs = check_order("n_inputs", n_inputs, 1)
        self.n_outputs = check_order("n_outputs", n_outputs, 1)
        self.na, self.nb = check_order("na", na, 1), check_order("nb", nb, 1)
        self.nz = lag_state_size(self.n_inputs, self.n_outputs, self.na, self.nb)
        width = self.nz + self.n_inputs
        self.initial_kernel = check_array("kernel", kernel, (width, n_outputs))
        self.initial_bias = check_array("bias", bias, (n_outputs,))
        self.hidden = tuple(check_order("hidden", h, 1) for h in hidden)
        self.bounds = check_range_pair("bounds", bounds, (width,))
        if anchor is None:
            anchor = (self.initial_kernel, self.initial_bias)
        self.anchor = (
            check_array("anchor kernel", anchor[0], self.initial_kernel.shape),
            check_array("anchor bias", anchor[1], self.initial_bias.shape),
        )
        self.fade = check_fade(fade)
        branch = check_branch(branch)
        self.branch = branch
        self.terms = check_terms(terms, width) if branch == "polynomial" else None
        self.term_outputs = None
        if self.terms is not None:
            shape = (len(self.terms), self.n_outputs)
            self.term_outputs = check_term_outputs(term_outputs, shape)
        self.output_limits = check_range_pair("output_limits", output_limits, (self.n_outputs,))
        self.branch_sizes = [] if isinstance(branch, str) else state_sizes(branch.state_size)
        self.state_size = [self.nz, *self.branch_sizes]
        self.output_size = self.n_outputs

    def build(self, input_shape: tuple) -> None:
        width = self.nz + self.n_inputs
        linear_trained = self.branch != "polynomial"  # its terms hold the linear part
        self.kernel = self.add_weight(
            shape=(width, self.n_outputs), name="arx_kernel", trainable=linear_trained,
            initializer=keras.initializers.Constant(self.initial_kernel),
        )  # fmt: skip
        self.bias = self.add_weight(
            shape=(self.n_outputs,), name="arx_bias", trainable=linear_trained,
            initializer=keras.initializers.Constant(self.initial_bias),
        )  # fmt: skip
        if self.bounds is not None:
            fixed = {
                "anchor_kernel": self.anchor[0], "anchor_bias": self.anchor[1],
                "lower": self.bounds[0], "upper": self.bounds[1],
            }  # fmt: skip
            for name, value in fixed.items():
                setattr(self, name, self.add_weight(
                    shape=value.shape, name=name, trainable=False,
                    initializer=keras.initializers.Constant(value),
                ))  # fmt: skip
        if self.output_limits is not None:
            for name, value in zip(("output_lower", "output_upper"), self.output_limits):
                setattr(self, name, self.add_weight(
                    shape=value.shape, name=name, trainable=False,
                    initializer=keras.initializers.Constant(value),
                ))  # fmt: skip
        self.layers_weights = []
        if self.branch == "polynomial":
            width = len(self.terms)
            self.term_mask = self.add_weight(
                shape=self.term_outputs.shape, name="term_outputs", trainable=False,
                initializer=keras.initializers.Constant(self.term_outputs),
            )  # fmt: skip
        elif self.branch == "mlp":
            for k, units in enumerate(self.hidden):
                self.layers_weights.append(
                    self._dense(f"hidden_{k}", width, units, "glorot_uniform")
                )
                width = units
        else:
            if not self.branch.built:  # a deserialised branch may come built
                self.branch.build((input_shape[0], self.nz + self.n_inputs))
            width = self.branch.output_size
        self.out_kernel = self.add_weight(
            shape=(width, self.n_outputs), name="branch_out", initializer="zeros"
        )
        self.built = True

    def _dense(self, name: str, fan_in: int, units: int, init: str) -> tuple:
        kernel = self.add_weight(shape=(fan_in, units), name=f"{name}_kernel", initializer=init)
        bias = self.add_weight(shape=(units,), name=f"{name}_bias", initializer="zeros")
        return kernel, bias

    def step(self, projected: Any, states: list) -> tuple[Any, list]:
        """``y_t``, ``[z_{t+1}, *h_t]`` from ``u_t`` ``(B, n_inputs)`` and ``[z_t, *h_{t-1}]``."""
        z, h = states[0], list(states[1:])
        r = ops.concatenate([z, projected], axis=-1)
        y = ops.matmul(r, self.kernel) + self.bias
        inside = r if self.bounds is None else ops.minimum(ops.maximum(r, self.lower), self.upper)
        if self.branch == "polynomial":
            g, new_h = self._monomials(inside), []
        elif self.branch == "mlp":
            g = inside
            for kernel, bias in self.layers_weights:
                g = ops.tanh(ops.matmul(g, kernel) + bias)
            new_h = []
        else:
            g, new_h = self.branch(inside, h)
            new_h = list(new_h) if isinstance(new_h, (list, tuple)) else [new_h]
        if g is not None:
            out = self.out_kernel if self.term_outputs is None else self.out_kernel * self.term_mask
            y = y + ops.matmul(g, out)
        if self.bounds is not None:
            y = self._faded(r, inside, y)
        if self.output_limits is not None:
            y = ops.minimum(ops.maximum(y, self.output_lower), self.output_upper)
        return y, [self._shift(z, y, projected), *new_h]

    def _monomials(self, r: Any) -> Any:
        """``(B, n_terms)``: each term's product of three entries of ``[r, 1]`` (None: no term)."""
        if not len(self.terms):
            return None
        ones = ops.ones_like(r[:, :1])
        extended = ops.concatenate([r, ones], axis=-1)
        product = None
        for k in range(3):
            factor = ops.take(extended, self.terms[:, k], axis=1)
            product = factor if product is None else product * factor
        return product

    def _faded(self, r: Any, inside: Any, y: Any) -> Any:
        """``y`` faded toward the anchor as ``r`` leaves its bounds."""
        out = ops.max(ops.abs(r - inside) / (self.upper - self.lower), axis=-1, keepdims=True)
        share = ops.clip(1.0 - out / self.fade, 0.0, 1.0)
        anchor = ops.matmul(r, self.anchor_kernel) + self.anchor_bias
        return anchor + share * (y - anchor)

    def _shift(self, z: Any, y: Any, u: Any) -> Any:
        """``z_{t+1}``: the newest output and input in front, the oldest dropped."""
        ny, nu = self.n_outputs, self.n_inputs
        parts = [y, z[:, : (self.na - 1) * ny]]
        if self.nb > 1:
            start = self.na * ny
            parts += [u, z[:, start : start + (self.nb - 2) * nu]]
        return ops.concatenate(parts, axis=-1)

    def fused_unsupported_reason(self) -> str | None:
        reason = super().fused_unsupported_reason()
        if reason is None and isinstance(self.branch, FusedCell):
            inner = self.branch.fused_unsupported_reason()
            return None if inner is None else f"its branch cannot run fused: {inner}"
        return reason

    def get_config(self) -> dict:
        branch = (
            self.branch
            if isinstance(self.branch, str)
            else keras.saving.serialize_keras_object(self.branch)
        )
        return {
            **super().get_config(),
            "n_inputs": self.n_inputs,
            "n_outputs": self.n_outputs,
            "na": self.na,
            "nb": self.nb,
            "kernel": self.initial_kernel.tolist(),
            "bias": self.initial_bias.tolist(),
            "branch": branch,
            "hidden": list(self.hidden),
            "bounds": None if self.bounds is None else [b.tolist() for b in self.bounds],
            "fade": self.fade,
            "anchor": [a.tolist() for a in self.anchor],
            "terms": None if self.terms is None else self.terms.tolist(),
            "term_outputs": None if self.term_outputs is None else self.term_outputs.tolist(),
            "output_limits": (
                None if self.output_limits is None else [b.tolist() for b in self.output_limits]
            ),
        }
