"""The polynomial NARX class: monomials of the lagged outputs and inputs, and their fit.

Per output ``i``, in the estimation record's standardised signals::

    r_t = [y_{t-1}, ..., y_{t-na}, u_{t-1}, ..., u_{t-nb+1}, u_t]   the regressors (ArxLoopCell's)
    y_i,t = sum_k theta_ik m_k(r_t)                                   m_k = r_a r_b r_c, r_p = 1

``m_k`` are monomials of degree 0 (the constant) to ``degree`` (at most 3),
chosen by FROLS (:mod:`~keras_mgu.sysid.models.frols`), which also gives the
least-squares coefficients of the first ``k`` terms.

The fit (:func:`fit_polynomial`): for each output-lag count ``na`` of
:data:`LAGS` (``nb = na + 1``: the inputs ``u_t .. u_{t-na}``) and each degree
of :data:`DEGREES`, FROLS orders the candidates on the standardised estimation
record (every experiment's rows together), ``k = 1 .. MAX_TERMS``. Every one
of these models runs free, in NumPy, through the validation record and each
estimation experiment (at most :data:`HORIZON_SAMPLES` samples of it; with
``RecipeConfig.held_out``, the record's held-out head, which FROLS did not
fit: :mod:`~keras_mgu.sysid.choice.held_out`), each from its first ``L``
measured samples, and is scored as the recipe scores its classes, the two
mean squares equally weighted
(:meth:`~keras_mgu.sysid.Identification.choice_error`): the lowest score keeps
its ``na``, degree and ``k``. A model
whose free run leaves ``[min - s/2, max + s/2]`` of the estimation outputs
(``s`` their span) on either record, or on the recipe's stretched
experiment (the estimation inputs with larger deviations,
:func:`~keras_mgu.sysid.choice.runoff.stretched_input`), is not
kept (it runs off), and every free run is clamped to ``[min - s, max + s]``
(so it stays finite; the guard is saved with the model). The fit costs
seconds and depends on the data alone;
:mod:`~keras_mgu.sysid.training.polynomial_run` refines the chosen
coefficients as the other lag classes train.

:class:`PolynomialNarx` holds one model; :meth:`PolynomialNarx.simulate_batch`
runs models free in NumPy (the fit's free runs), and
:meth:`PolynomialNarx.keras_model` builds the same model as an
:class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell` with the
``"polynomial"`` branch (every term in the branch), which the library
simulates, predicts, saves and exports as it does every lag class. Its
equation in words (:func:`describe_polynomial`, the terms' names) is
:mod:`~keras_mgu.sysid.models.polynomial_equation`'s, handed on here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_mgu.datasets import Record
from keras_mgu.sysid.models.frols import candidate_terms, frols, term_values
from keras_mgu.sysid.models.polynomial_equation import (
    describe_polynomial,
    regressor_names,
    term_name,
)

__all__ = [
    "DEGREES",
    "HORIZON_SAMPLES",
    "LAGS",
    "MAX_TERMS",
    "PolynomialNarx",
    "candidate_terms",
    "describe_polynomial",
    "fit_polynomial",
    "free_run_errors",
    "frols",
    "lag_regressors",
    "output_box",
    "refit_polynomial",
    "regression_rows",
    "regressor_names",
    "term_name",
    "term_values",
]

#: Output lags ``na`` tried (``nb = na + 1``), and degrees.
LAGS, DEGREES = (2, 3, 4, 6), (1, 2, 3)
#: Most terms per output.
MAX_TERMS = 40
#: Most samples of each estimation experiment run free in the choice.
HORIZON_SAMPLES = 20_000


def lag_regressors(u: np.ndarray, y: np.ndarray, na: int, nb: int) -> np.ndarray:
    """``r_t`` ``(N - L, na n_y + nb n_u)`` for ``t`` in ``[L, N)``, ``L = max(na, nb - 1)``.

    In the order of :class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell`'s
    ``[z_t, u_t]``: output lags ``1..na`` (every channel of a lag together),
    input lags ``1..nb - 1``, then ``u_t``.
    """
    lag, n = max(na, nb - 1), len(y)
    outputs = [y[lag - j : n - j] for j in range(1, na + 1)]
    return np.concatenate([*outputs, _input_regressors(u, nb)[lag:]], axis=1)


@dataclasses.dataclass(frozen=True)
class PolynomialNarx:
    """One polynomial NARX model in standardised signals (module docstring).

    Attributes:
        na, nb: Output lags ``1..na`` and inputs ``u_t..u_{t-nb+1}``.
        degree: The largest degree its candidates had (1 to 3).
        terms: ``(K, 3)`` index triples into ``[r_t, 1]`` (every output's
            terms together).
        coefficients: ``(K, n_outputs)``, zero where a term is not an output's.
        err: ``(K, n_outputs)``, each term's error reduction ratio for an
            output (zero where it is not one of its terms).
        n_inputs, n_outputs: Channel counts.
        limits: ``(lower, upper)`` ``(n_outputs,)``: the free run's outputs
            are clamped to them (the guard; None: none).
    """

    na: int
    nb: int
    degree: int
    terms: np.ndarray
    coefficients: np.ndarray
    err: np.ndarray
    n_inputs: int
    n_outputs: int
    limits: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def lag(self) -> int:
        """Measured samples a free run starts from, ``max(na, nb - 1)``."""
        return max(self.na, self.nb - 1)

    @property
    def width(self) -> int:
        """Regressors in ``r_t``."""
        return self.na * self.n_outputs + self.nb * self.n_inputs

    def simulate_batch(
        self, u: np.ndarray, y_initial: np.ndarray, coefficients: np.ndarray | None = None
    ) -> np.ndarray:
        """Free runs ``(B, N, n_outputs)`` of ``B`` coefficient sets, in NumPy.

        Args:
            u: Inputs ``(N, n_inputs)``, standardised.
            y_initial: The first ``n >= lag`` measured outputs ``(n, n_outputs)``
                (the result's first ``n`` rows), standardised.
            coefficients: ``(B, K, n_outputs)`` (default: this model's, ``B = 1``).
        """
        theta = self.coefficients[None] if coefficients is None else coefficients
        n, total, batch, ny = len(y_initial), len(u), len(theta), self.n_outputs
        y = np.zeros((batch, total, ny))
        y[:, :n] = y_initial
        inputs = _input_regressors(u, self.nb)
        lower, upper = self.limits if self.limits is not None else (-np.inf, np.inf)
        lags = self.na * ny
        extended = np.ones((batch, self.width + 1))  # [r_t, 1], the past outputs shifted in
        extended[:, :lags] = y_initial[n - self.na : n][::-1].reshape(-1)
        a, b, c = self.terms.T
        for t in range(n, total):
            extended[:, lags : self.width] = inputs[t]
            values = extended[:, a] * extended[:, b]
            values *= extended[:, c]
            step = np.matmul(values[:, None, :], theta)[:, 0]
            np.clip(step, lower, upper, out=step)
            y[:, t] = step
            extended[:, ny:lags] = extended[:, : lags - ny].copy()
            extended[:, :ny] = step
        return y

    def keras_model(self, name: str = "polynomial") -> Any:
        """The model as a lag simulator ``[u_past, y_past, u] -> y`` (module docstring).

        Every term (the constant and linear ones too) is in the cell's
        ``"polynomial"`` branch, masked per output, and ``W``, ``c`` are zero
        and not trained: training moves the chosen terms' coefficients only.
        """
        from keras_mgu.sysid.models.lag_model import lag_simulator
        from keras_mgu.sysid.models.loop_cell import ArxLoopCell

        cell = ArxLoopCell(
            self.n_inputs, self.n_outputs, self.na, self.nb, None, None, "polynomial", (),
            terms=self.terms, output_limits=self.limits, term_outputs=self._mask(),
        )  # fmt: skip
        model = lag_simulator(cell, self.lag, name=name)
        cell.out_kernel.assign(self.coefficients.astype("float32"))
        return model

    def with_keras_coefficients(self, model: Any) -> PolynomialNarx:
        """This model with the coefficients of :meth:`keras_model`'s ``model`` (after training)."""
        import keras

        cell = model.get_layer("loop").cell
        values = keras.ops.convert_to_numpy(cell.out_kernel).astype(np.float64)
        return dataclasses.replace(self, coefficients=values * self._mask())

    def _mask(self) -> np.ndarray:
        return (self.coefficients != 0) | (self.err != 0)

    def to_config(self) -> dict:
        """A JSON-ready dict of every field (:meth:`from_config` reads it back)."""
        return {
            "na": self.na, "nb": self.nb, "degree": self.degree,
            "terms": self.terms.tolist(), "coefficients": self.coefficients.tolist(),
            "err": self.err.tolist(), "n_inputs": self.n_inputs, "n_outputs": self.n_outputs,
            "limits": None if self.limits is None else [b.tolist() for b in self.limits],
        }  # fmt: skip

    @classmethod
    def from_config(cls, config: dict) -> PolynomialNarx:
        values = dict(config)
        for name in ("coefficients", "err"):
            values[name] = np.asarray(values[name], dtype=np.float64).reshape(
                -1, values["n_outputs"]
            )
        values["terms"] = np.asarray(values["terms"], dtype=np.int64).reshape(-1, 3)
        if values.get("limits") is not None:
            values["limits"] = tuple(np.asarray(b, dtype=np.float64) for b in values["limits"])
        return cls(**values)

    def channel_names(
        self, input_names: Sequence[str] = (), output_names: Sequence[str] = ()
    ) -> tuple[list[str], list[str]]:
        """The given channel names, else ``u0, u1, ...`` and ``y0, y1, ...``."""
        inputs = list(input_names) or [f"u{m}" for m in range(self.n_inputs)]
        outputs = list(output_names) or [f"y{i}" for i in range(self.n_outputs)]
        return inputs, outputs

    def term_table(
        self, input_names: Sequence[str] = (), output_names: Sequence[str] = ()
    ) -> list[dict]:
        """Each output's terms in the order chosen: ``output``, ``term``, ``coefficient``, ``err``.

        Standardised signals (the term names use the channels' names).
        """
        inputs, outputs = self.channel_names(input_names, output_names)
        names = regressor_names(inputs, outputs, self.na, self.nb)
        rows = []
        for i, output in enumerate(outputs):
            order = np.argsort(-self.err[:, i], kind="stable")
            for k in order:
                if self.coefficients[k, i] == 0 and self.err[k, i] == 0:
                    continue
                rows.append({
                    "output": output, "term": term_name(self.terms[k], names),
                    "coefficient": float(self.coefficients[k, i]), "err": float(self.err[k, i]),
                })  # fmt: skip
        return rows


def fit_polynomial(
    estimation: Record,
    validation: Record,
    lags: tuple[int, ...] = LAGS,
    degrees: tuple[int, ...] = DEGREES,
    max_terms: int = MAX_TERMS,
    held_out: Record | None = None,
    stretched: Record | None = None,
) -> tuple[PolynomialNarx, list[dict]]:
    """The polynomial NARX model the free run chooses (module docstring), and the table.

    Args:
        estimation, validation: Standardised records: FROLS fits the first.
        lags, degrees, max_terms: The structures tried.
        held_out: The record the free runs score beside the validation
            record, standardised: the estimation record's held-out head, or
            the estimation record itself (``None``: the validation record alone).
        stretched: An experiment (standardised inputs and outputs) on which a
            kept model's free run must stay in the box too, scored on nothing
            else: the recipe's stretched estimation inputs
            (:func:`~keras_mgu.sysid.choice.runoff.stretched_input`).

    Returns:
        The model and one row per ``(na, degree)``: ``na``, ``nb``,
        ``degree``, ``terms`` (the ``k`` it keeps) and ``score`` (the choice
        RMSE, standardised; ``inf``: every ``k`` ran off).
    """
    limits, keep = output_box(estimation.y, 1.0), output_box(estimation.y, 0.5)
    best, best_score, table = None, np.inf, []
    for na in lags:
        for degree in degrees:
            model, sets = _family(estimation, na, degree, max_terms, limits)
            val, n_val = free_run_errors(model, sets, validation, keep, None)
            parts = [val / n_val] if n_val else []
            if held_out is not None:
                head, n_head = free_run_errors(model, sets, held_out, keep, HORIZON_SAMPLES)
                parts += [head / n_head] if n_head else []
            scores = np.sqrt(np.mean(parts, axis=0))
            if stretched is not None:
                away = free_run_errors(model, sets, stretched, keep, HORIZON_SAMPLES)[0]
                scores = np.where(np.isfinite(away), scores, np.inf)
            k = int(np.argmin(scores))
            table.append({"na": na, "nb": na + 1, "degree": degree, "terms": k + 1,
                          "score": float(scores[k])})  # fmt: skip
            if scores[k] < best_score or best is None:
                best, best_score = _nested(model, sets, k), scores[k]
    return best, table


def refit_polynomial(estimation: Record, like: PolynomialNarx) -> PolynomialNarx:
    """``like``'s terms with their coefficients fitted again by least squares on ``estimation``.

    The structure chosen on held-out samples (lags, degree, each output's
    terms) fitted on more samples (:mod:`~keras_mgu.sysid.choice.refit`);
    ``estimation`` is standardised as ``like``'s fit was. The error reduction
    ratios are ``like``'s.
    """
    regressors, targets = regression_rows(estimation, like.na, like.nb)
    values = term_values(regressors, like.terms)
    coefficients = np.zeros_like(like.coefficients)
    for i in range(like.n_outputs):
        used = np.flatnonzero(like.coefficients[:, i] != 0)
        solution = np.linalg.lstsq(values[:, used], targets[:, i], rcond=None)[0]
        coefficients[used, i] = solution
    return dataclasses.replace(like, coefficients=coefficients)


def _nested(model: PolynomialNarx, sets: np.ndarray, k: int) -> PolynomialNarx:
    """``model`` with coefficient set ``k`` (each output's first ``k + 1`` terms) alone."""
    coefficients = sets[k]
    used = np.any(coefficients != 0, axis=1)
    err = np.where(coefficients != 0, model.err, 0.0)
    return dataclasses.replace(
        model, terms=model.terms[used], coefficients=coefficients[used], err=err[used]
    )


def output_box(y: np.ndarray, share: float) -> tuple[np.ndarray, np.ndarray]:
    """``(min - share s, max + share s)`` per output channel of ``y`` ``(N, n_outputs)``."""
    lo, hi = y.min(axis=0), y.max(axis=0)
    span = np.maximum(hi - lo, 1e-12)
    return lo - share * span, hi + share * span


def regression_rows(record: Record, na: int, nb: int) -> tuple[np.ndarray, np.ndarray]:
    """Regressors ``r_t`` (:func:`lag_regressors`) and targets of every experiment of ``record``
    longer than the lag, stacked."""
    lag, regressors, targets = max(na, nb - 1), [], []
    for first, stop in record.experiments:
        if stop - first > lag:
            u, y = record.u[first:stop], record.y[first:stop]
            regressors.append(lag_regressors(u, y, na, nb))
            targets.append(y[lag:])
    return np.concatenate(regressors), np.concatenate(targets)


def _family(
    estimation: Record, na: int, degree: int, max_terms: int, limits: tuple
) -> tuple[PolynomialNarx, np.ndarray]:
    """FROLS on ``estimation``: the model of every term and ``(K, K_all, n_outputs)`` nested sets.

    Coefficient set ``k - 1`` uses each output's first ``k`` terms.
    """
    nb, n_outputs = na + 1, estimation.y.shape[1]
    regressors, targets = regression_rows(estimation, na, nb)
    candidates = candidate_terms(regressors.shape[1], degree)
    values = term_values(regressors, candidates)
    fits = [frols(values, targets[:, i], min(max_terms, len(candidates))) for i in range(n_outputs)]
    used = sorted({int(c) for chosen, _, _ in fits for c in chosen})
    where = {c: j for j, c in enumerate(used)}
    depth = max(len(chosen) for chosen, _, _ in fits)
    sets = np.zeros((depth, len(used), n_outputs))
    err = np.zeros((len(used), n_outputs))
    for i, (chosen, ratios, coefficients) in enumerate(fits):
        columns = [where[int(c)] for c in chosen]
        err[columns, i] = ratios
        for k in range(depth):
            row = coefficients[min(k, len(chosen) - 1)]
            sets[k, columns, i] = row
    model = PolynomialNarx(
        na, nb, degree, candidates[used], sets[-1], err, estimation.u.shape[1], n_outputs, limits
    )
    return model, sets


def free_run_errors(
    model: PolynomialNarx, sets: np.ndarray, record: Record, keep: tuple, max_samples: int | None
) -> tuple[np.ndarray, int]:
    """Each set's summed squared free-run error on ``record``'s experiments, and the samples scored.

    A set whose run leaves ``keep`` gets ``inf``.
    """
    total, count = np.zeros(len(sets)), 0
    for first, stop in record.experiments:
        stop = stop if max_samples is None else min(stop, first + max_samples)
        if stop - first <= model.lag:
            continue
        u, y = record.u[first:stop], record.y[first:stop]
        with np.errstate(all="ignore"):
            y_sim = model.simulate_batch(u, y[: model.lag], sets)[:, model.lag :]
        error = y_sim - y[model.lag :]
        sums = np.sum(error**2, axis=(1, 2))
        inside = np.all((y_sim >= keep[0]) & (y_sim <= keep[1]), axis=(1, 2))
        total += np.where(inside & np.isfinite(sums), sums, np.inf)
        count += error.shape[1] * error.shape[2]
    return total, count


def _input_regressors(u: np.ndarray, nb: int) -> np.ndarray:
    """``(N, nb n_u)``: ``[u_{t-1}, ..., u_{t-nb+1}, u_t]`` per row ``t`` (``u_0`` held before)."""
    padded = np.concatenate([np.repeat(u[:1], nb - 1, axis=0), u]) if nb > 1 else u
    total = len(u)
    start = nb - 1
    parts = [padded[start - j : start - j + total] for j in range(1, nb)]
    return np.concatenate([*parts, u], axis=1)
