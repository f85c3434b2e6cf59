"""Dead time: the input delay ``nk`` of each input, estimated on the record, and the shift.

A plant with dead time answers to input ``i`` only ``nk_i`` samples later::

    y(k) = G(q) [u_1(k - nk_1), ..., u_m(k - nk_m)]

:func:`delay_inputs` shifts each input by its delay once, at the front, so
that every model class sees ``u_i(k - nk_i)`` in place of ``u_i(k)`` (the
first ``nk_i`` samples of an experiment hold its first input: the plant at
rest before it). :func:`estimate_input_delay` finds the delays on the
estimation record and checks them on the validation record:

For input ``i`` and every candidate ``nk`` in ``0..max_delay`` (the other
inputs at their current delays, coordinate search: two passes over the
inputs), one least-squares fit on the standardised estimation record
(``u_s``, ``y_s``: estimation means and deviations) of the check model, an
ARX model whose input lags start at the delay::

    y_s(k) = -sum_{j=1..na} a_j y_s(k-j) + sum_m sum_{j=0..nb-1} b_mj u_s,m(k - nk_m - j) + c

(``na = 4``, ``nb = NB_CHECK = 8``) gives

* ``e(nk)``: the RMSE of its one-step prediction of the validation record;
* ``t(nk) = b_i0 / se(b_i0)``: the t-ratio of its leading coefficient, with
  ``se(b_i0)^2 = s^2 [(Phi^T Phi)^-1]_00 (1 + rho) / (1 - rho)``, ``s^2`` the
  residual variance over ``N - p`` (``p`` regressors; at least
  ``RESIDUAL_FLOOR^2``: on a noise-free record round-off is no signal, and
  ``e`` is floored there too) and ``rho >= 0`` the residuals' lag-one
  correlation (a model that leaves correlated residuals, a nonlinear plant
  say, claims less).

Then:

1. ``start``: the smallest candidate that predicts the validation record
   as well as the best one, ``e(nk) <= (1 + TIE) min e`` (``TIE`` = 1 %).
   Its window ``start .. start + NB_CHECK - 1`` holds what the input tells
   the data show, so the response has begun by its last lag.
2. The delay is the first candidate from 0 on whose leading coefficient is
   clearly significant, and the next candidate's too (``|t(nk)|`` and
   ``|t(nk + 1)| >= T_SIGNIFICANT`` = 3): the first lag from which the
   response is present (one significant t-ratio alone, among tens of
   candidates, can be noise). Candidates up to one past the best
   (``argmin e + 1``: two that both cover the response's start differ by
   noise alone) and within ``start``'s window are searched. Where none is,
   the delay is ``start``.

Step 2 searches from 0, not from ``start``: a window of ``NB_CHECK`` lags
that starts later also reaches further back, so a plant with a long
response can predict best from a shifted window though it answers at once
(a Wiener-Hammerstein plant, whose ``u(k)`` coefficient has ``t = 14``);
the leading coefficients' significance tells a response that is there from
one that is not. A response that grows from small first coefficients (a
sampled double integrator, a two-mass drive) is found where its first
coefficients are significant at 3, not where they are large: a too large
delay costs more than a too small one (``benchmarks/RESULTS.md``, "The
input delay found on data", sets this rule beside the previous one on the
zoo).

Where the data cannot tell (a slow or smooth input, a short record, a
nonlinear plant: ``e`` about flat, no leading coefficient significant) the
delay is the smallest that loses nothing, usually 0: no shift, the classes
as without a delay. ``nk = 0`` with a significant ``t(0)`` is direct
feed-through (``u(k)`` explains ``y(k)``); a plant whose response visibly
starts one or more samples later gets ``nk >= 1``, which takes the ``u(k)``
term out of every class's regressors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "MAX_DELAY_CAP",
    "MAX_DELAY_MIN",
    "NB_CHECK",
    "RESIDUAL_FLOOR",
    "TIE",
    "T_SIGNIFICANT",
    "check_input_delay",
    "default_max_delay",
    "delay_inputs",
    "describe_input_delay",
    "estimate_input_delay",
    "without_dead_samples",
]

#: The longest delay searched is at least this many samples ...
MAX_DELAY_MIN = 30
#: ... and at most this many (one least-squares fit per candidate and input).
MAX_DELAY_CAP = 100
#: The |t-ratio| from which a leading input coefficient counts as significant.
T_SIGNIFICANT = 3.0
#: The residual deviation (standardised) below which a fit counts as exact: ``s >= 1e-4``.
RESIDUAL_FLOOR = 1e-4
#: Validation RMSEs within this share of the smallest count as no worse.
TIE = 0.01
#: Input lags (from the delay on) of the low-order ARX model that checks a candidate.
NB_CHECK = 8
_NA = 4


def delay_inputs(u: Any, delay: Sequence[int], boundaries: Sequence[int] = ()) -> np.ndarray:
    """``u`` ``(N, n_inputs)`` with input ``i`` delayed by ``delay[i]`` samples.

    ``out[k, i] = u[max(k - nk_i, s), i]``, ``s`` the first sample of the
    experiment holding ``k``: each experiment (``boundaries``, the first
    sample of each after the first) starts at rest at its first input. An
    empty ``delay`` or all zeros returns ``u`` as it is.
    """
    u = np.asarray(u)
    if not any(delay):
        return u
    out = np.empty_like(u)
    edges = [0, *[int(b) for b in boundaries], len(u)]
    for first, stop in zip(edges[:-1], edges[1:]):
        piece = u[first:stop]
        for i, nk in enumerate(delay):
            rows = np.maximum(np.arange(len(piece)) - int(nk), 0)
            out[first:stop, i] = piece[rows, i] if len(piece) else piece[:, i]
    return out


def without_dead_samples(record: Any, delay: Sequence[int]) -> Any:
    """``record`` (a :class:`~keras_mgu.datasets.Record` whose inputs are delayed by
    :func:`delay_inputs`) without each experiment's first ``max(delay)`` samples.

    Those samples' outputs answer inputs from before the experiment, which
    :func:`delay_inputs` stands in for with its first input: a least-squares
    row or a scored sample there reads an input the plant never had. An
    experiment no more than twice that long is kept whole.
    """
    dead = max(delay, default=0)
    if dead == 0:
        return record
    from keras_mgu.datasets import join_experiments

    pieces = [
        record.slice(first + dead if stop - first > 2 * dead else first, stop)
        for first, stop in record.experiments
    ]
    return join_experiments(pieces, name=record.name)


def check_input_delay(value: Any, n_inputs: int | None = None) -> tuple[int, ...] | None:
    """``value`` (None, an int, or one int per input) as a tuple; a ValueError where it is not.

    An int gives every input that delay; with ``n_inputs`` the tuple's length
    must match it.
    """
    if value is None:
        return None
    items = (value,) if isinstance(value, (int, np.integer)) else value
    try:
        items = tuple(items)
    except TypeError:
        items = (value,)
    bad = [v for v in items if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0]
    if not items or bad:
        raise ValueError(
            "`input_delay` must be None (estimated on the record), an integer >= 0 (samples of "
            f"dead time, every input) or one such integer per input; received {value!r}."
        )
    items = tuple(int(v) for v in items)
    if n_inputs is not None:
        if len(items) == 1:
            items = items * n_inputs
        if len(items) != n_inputs:
            raise ValueError(
                f"`input_delay` gives {len(items)} delays for {n_inputs} inputs; give one "
                "integer (every input) or one per input."
            )
    return items


def default_max_delay(n_samples: int, n_inputs: int) -> int:
    """The longest delay searched: ``N / 20``, at least 30, at most 100, and at most
    ``N / 10 - na - nb`` (a short record: each fit keeps nearly all its rows, and a few
    candidates only)."""
    del n_inputs  # each input's delay is searched in turn
    wanted = min(max(MAX_DELAY_MIN, n_samples // 20), MAX_DELAY_CAP)
    return int(max(0, min(wanted, n_samples // 10 - _NA - NB_CHECK)))


def _standardised(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    return (x - mean) / np.where(std > 0, std, 1.0)


def _regressors(
    u: np.ndarray, y: np.ndarray, delay: Sequence[int], nb: int, first: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(Phi (N - first, p), y[first:])``: ``-y(k-1..na)``, ``u_i(k - nk_i - 0..nb-1)``, 1."""
    rows = np.arange(first, len(y))
    columns = [-y[rows - j] for j in range(1, _NA + 1)]
    for i, nk in enumerate(delay):
        columns += [u[rows - nk - j, i] for j in range(nb)]
    columns.append(np.ones(len(rows)))
    return np.column_stack(columns), y[rows]


def _fit(est: tuple, val: tuple, delay: Sequence[int], i: int, first: int) -> tuple[float, float]:
    """``(e, t)`` of the check model with ``delay``: its validation one-step RMSE, and the
    t-ratio of input ``i``'s leading coefficient ``b_i0`` on the estimation record (its
    standard error widened for correlated residuals)."""
    phi, target = _regressors(*est, delay, NB_CHECK, first)
    gram_inv = np.linalg.pinv(phi.T @ phi)
    theta = gram_inv @ phi.T @ target
    residual = target - phi @ theta
    dof = max(len(target) - phi.shape[1], 1)
    # A noise-free record leaves no residual: its floor keeps round-off from passing as signal.
    s2 = max(float(np.sum(residual**2) / dof), RESIDUAL_FLOOR**2)
    rho = float(np.clip(np.corrcoef(residual[1:], residual[:-1])[0, 1], 0.0, 0.99))
    inflation = (1.0 + rho) / (1.0 - rho) if np.isfinite(rho) else 1.0
    lead = _NA + i * NB_CHECK
    t_ratio = float(theta[lead] / np.sqrt(max(gram_inv[lead, lead] * s2 * inflation, 1e-300)))
    phi_v, target_v = _regressors(*val, delay, NB_CHECK, first)
    return float(np.sqrt(np.mean((target_v - phi_v @ theta) ** 2))), t_ratio


def _input_delay(
    est: tuple, val: tuple, delay: list, i: int, max_delay: int, significance: float
) -> int:
    """Input ``i``'s delay, the others at ``delay`` (module docstring, steps 1-2)."""
    first = _NA + max(max(delay), max_delay) + NB_CHECK
    if first >= min(len(est[1]), len(val[1])) - 2 * (_NA + NB_CHECK * len(delay)):
        return 0
    fits = [
        _fit(est, val, [*delay[:i], nk, *delay[i + 1 :]], i, first) for nk in range(max_delay + 1)
    ]
    errors = np.maximum([e for e, _ in fits], RESIDUAL_FLOOR)  # exact fits all count as one
    if not np.all(np.isfinite(errors)):
        return 0
    start = int(np.flatnonzero(errors <= errors.min() * (1.0 + TIE))[0])
    best = int(np.flatnonzero(errors <= errors.min())[-1])  # the last of exact fits' ties
    last = min(best + 1, start + NB_CHECK - 1, max_delay)
    shows = [abs(t) >= significance for _, t in fits]
    for nk in range(last + 1):
        if shows[nk] and (nk == max_delay or shows[nk + 1]):
            return nk  # the response is present from here
    return start  # no visible start: the smallest delay that loses nothing


def estimate_input_delay(
    estimation: Any,
    validation: Any = None,
    max_delay: int | None = None,
    significance: float = T_SIGNIFICANT,
) -> tuple[int, ...]:
    """Each input's delay ``nk_i >= 0`` in samples, found on the records (module docstring).

    Args:
        estimation: A record (``u`` ``(N, n_inputs)``, ``y`` ``(N, n_outputs)``),
            physical units; the fit.
        validation: A record with the same channels that checks the
            candidates (None: the estimation record itself).
        max_delay: The longest delay searched (default
            :func:`default_max_delay` of the estimation record).
        significance: The |t-ratio| from which a leading coefficient shows
            the response (default :data:`T_SIGNIFICANT`).

    Returns:
        One delay per input. Several outputs: the first output the input
        acts on significantly sets its delay (the smallest over outputs).
    """
    u = np.asarray(estimation.u, dtype=np.float64)
    y = np.asarray(estimation.y, dtype=np.float64)
    val = validation if validation is not None else estimation
    u_v, y_v = np.asarray(val.u, dtype=np.float64), np.asarray(val.y, dtype=np.float64)
    n_inputs = u.shape[1]
    if max_delay is None:
        max_delay = default_max_delay(len(y), n_inputs)
    max_delay = int(max(0, max_delay))
    u_mean, u_std, y_mean, y_std = u.mean(0), u.std(0), y.mean(0), y.std(0)
    u, u_v = _standardised(u, u_mean, u_std), _standardised(u_v, u_mean, u_std)
    y, y_v = _standardised(y, y_mean, y_std), _standardised(y_v, y_mean, y_std)
    delays = []
    for o in range(y.shape[1]):
        est, check = (u, y[:, o]), (u_v, y_v[:, o])
        chosen = [0] * n_inputs
        for _ in range(2 if n_inputs > 1 else 1):  # coordinate search: each input in turn
            for i in range(n_inputs):
                try:
                    chosen[i] = _input_delay(est, check, chosen, i, max_delay, significance)
                except (ValueError, np.linalg.LinAlgError):
                    chosen[i] = 0
        delays.append(chosen)
    # Several outputs: the smallest delay any output shows (a shift never hides a response).
    return tuple(int(min(d[i] for d in delays)) for i in range(n_inputs))


def describe_input_delay(delay: Sequence[int], given: bool, input_names: Sequence[str] = ()) -> str:
    """The delay in words: ``"input delay 13 samples (estimated)"``, one per input where several.

    An empty ``delay`` is a model saved before delays were kept: none.
    """
    if not len(delay):
        return "no input delay (a model file saved before input delays were kept)"
    how = "given" if given else "estimated"
    if len(delay) == 1:
        return f"input delay {int(delay[0])} samples ({how})"
    names = (
        list(input_names)
        if len(input_names) == len(delay)
        else [f"u{i}" for i in range(len(delay))]
    )
    each = ", ".join(f"{name} {int(nk)}" for name, nk in zip(names, delay))
    return f"input delays {each} samples ({how})"
