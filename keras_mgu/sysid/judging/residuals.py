"""Residual analysis: is the simulation error white and independent of the inputs?

The standard validation of an identified model (the System Identification
Toolbox's ``resid``). With the residual ``e = y - y_sim`` ``(N, n_outputs)``
and the inputs ``u`` ``(N, n_inputs)``, each centred (``a~ = a - mean(a)``)::

    R_ee[i](tau) = sum_{t=tau}^{N-1} e~_i[t] e~_i[t-tau] / sum_t e~_i[t]^2,      tau = 0..M
    R_eu[i,j](tau) = sum_t e~_i[t] u~_j[t-tau] / sqrt(sum_t e~_i^2 sum_t u~_j^2), tau = -M..M

(``R_eu`` at negative lags: the residual leads the input, which feedback
causes). For a white residual independent of the inputs each value at a
nonzero lag (every lag of ``R_eu``) lies within ``+-z / sqrt(N)`` with the
given probability (``z = 2.576`` at 99 %). :func:`residual_analysis` returns
the correlations, that band and how many values lie outside it; a constant
channel's correlations are NaN.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.special import ndtri

__all__ = ["MAX_LAG", "ResidualAnalysis", "correlation", "residual_analysis"]

#: Lags of the analysis when none are given (``resid``'s default).
MAX_LAG = 25


def correlation(a: np.ndarray, b: np.ndarray, lags: np.ndarray) -> np.ndarray:
    """Normalised cross-correlation of 1-D ``a``, ``b`` at ``lags``: ``sum_t a~[t] b~[t-lag]``."""
    a, b = a - a.mean(), b - b.mean()
    scale = np.sqrt(np.dot(a, a) * np.dot(b, b))
    full = np.correlate(a, b, mode="full")  # index N - 1 + lag holds sum_t a[t] b[t - lag]
    values = full[len(a) - 1 + np.asarray(lags)]
    return values / scale if scale > 0 else np.full(len(values), np.nan)


@dataclasses.dataclass
class ResidualAnalysis:
    """Correlations of a simulation residual and the 99 % (or given) band.

    Attributes:
        lags: ``0..M``, the lags of ``autocorrelation``.
        autocorrelation: ``(n_outputs, M + 1)``, ``R_ee`` (1 at lag 0).
        cross_lags: ``-M..M``, the lags of ``cross_correlation``.
        cross_correlation: ``(n_outputs, n_inputs, 2M + 1)``, ``R_eu``.
        band: ``z / sqrt(N)``, the confidence band's half-width.
        confidence: The band's probability (0.99).
        n_samples: ``N``.
        output_names, input_names: The channels' names.
    """

    lags: np.ndarray
    autocorrelation: np.ndarray
    cross_lags: np.ndarray
    cross_correlation: np.ndarray
    band: float
    confidence: float
    n_samples: int
    output_names: tuple[str, ...] = ()
    input_names: tuple[str, ...] = ()

    @property
    def autocorrelation_outside(self) -> np.ndarray:
        """Per output, the lags ``1..M`` whose ``|R_ee|`` exceeds the band."""
        return np.sum(np.abs(self.autocorrelation[:, 1:]) > self.band, axis=1)

    @property
    def cross_correlation_outside(self) -> np.ndarray:
        """Per output and input ``(n_outputs, n_inputs)``, the lags whose ``|R_eu|`` exceeds it."""
        return np.sum(np.abs(self.cross_correlation) > self.band, axis=2)

    def summary(self) -> str:
        """One line: how many correlations lie outside the band, for each output by name.

        One output: ``residual autocorrelation outside the 99% band at 3 of 25
        lags (1..25); input cross-correlation at 2 of 51 (-25..25)``. Several:
        ``residual correlations outside the 99% band, per output: y0:
        autocorrelation at 3 of 25 lags (1..25), input cross-correlation at 2 of
        51 (-25..25); y1: ...`` (by ``output_names`` where given). With several
        inputs the cross-correlations of all of them are counted together
        (``... of 102 (2 inputs x lags -25..25)``).
        """
        n_out = len(self.autocorrelation)
        band = f"outside the {self.confidence:.0%} band"
        if n_out == 1:
            return f"residual autocorrelation {band} at {self._counts(0, '; ')}"
        names = list(self.output_names)
        names = names if len(names) == n_out else [f"y{o}" for o in range(n_out)]
        listed = "; ".join(
            f"{name}: autocorrelation at {self._counts(o, ', ')}" for o, name in enumerate(names)
        )
        return f"residual correlations {band}, per output: {listed}"

    def _counts(self, output: int, separator: str) -> str:
        """``3 of 25 lags (1..25)<separator>input cross-correlation at 2 of 51 (-25..25)``."""
        m, n_inputs = len(self.lags) - 1, self.cross_correlation.shape[1]
        auto = int(self.autocorrelation_outside[output])
        cross = int(self.cross_correlation_outside[output].sum())
        lags = f"-{m}..{m}" if n_inputs == 1 else f"{n_inputs} inputs x lags -{m}..{m}"
        return (
            f"{auto} of {m} lags (1..{m}){separator}input cross-correlation at {cross} of "
            f"{n_inputs * (2 * m + 1)} ({lags})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and numbers (for ``results.json``)."""
        return {
            "summary": self.summary(),
            "confidence": self.confidence,
            "band": self.band,
            "n_samples": self.n_samples,
            "output_names": list(self.output_names),
            "input_names": list(self.input_names),
            "lags": self.lags.tolist(),
            "autocorrelation": self.autocorrelation.tolist(),
            "autocorrelation_outside": self.autocorrelation_outside.tolist(),
            "cross_lags": self.cross_lags.tolist(),
            "cross_correlation": self.cross_correlation.tolist(),
            "cross_correlation_outside": self.cross_correlation_outside.tolist(),
        }


def residual_analysis(
    residual: Any,
    u: Any,
    max_lag: int = MAX_LAG,
    confidence: float = 0.99,
    output_names: tuple[str, ...] = (),
    input_names: tuple[str, ...] = (),
) -> ResidualAnalysis:
    """Auto-correlation of ``residual`` and its cross-correlation with each input.

    Args:
        residual: ``y - y_sim`` ``(N, n_outputs)``.
        u: The inputs of the same samples ``(N, n_inputs)``.
        max_lag: ``M``, ``1 <= M < N``.
        confidence: Probability of the band, in ``(0, 1)``.
        output_names, input_names: Channel names kept with the result.
    """
    e, u = np.asarray(residual, dtype=np.float64), np.asarray(u, dtype=np.float64)
    if e.ndim != 2 or u.ndim != 2 or len(e) != len(u):
        raise ValueError(
            f"`residual` (N, n_outputs) and `u` (N, n_inputs) must be 2-D with the same N; "
            f"received {e.shape} and {u.shape}."
        )
    if not np.all(np.isfinite(e)) or not np.all(np.isfinite(u)):
        raise ValueError("`residual` and `u` must be finite.")
    if isinstance(max_lag, bool) or not isinstance(max_lag, (int, np.integer)):
        raise ValueError(f"`max_lag` must be an integer; received {max_lag!r}.")
    if not 1 <= max_lag < len(e):
        raise ValueError(f"`max_lag` must be in [1, N={len(e)}); received {max_lag}.")
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be in (0, 1); received {confidence!r}.")
    lags, cross_lags = np.arange(max_lag + 1), np.arange(-max_lag, max_lag + 1)
    auto = np.array([correlation(e[:, i], e[:, i], lags) for i in range(e.shape[1])])
    cross = np.array(
        [[correlation(e[:, i], u[:, j], cross_lags) for j in range(u.shape[1])]
         for i in range(e.shape[1])]
    )  # fmt: skip
    z = float(ndtri(0.5 + confidence / 2))  # scipy.stats.norm.ppf, without its second's import
    return ResidualAnalysis(
        lags, auto, cross_lags, cross, z / np.sqrt(len(e)), float(confidence), len(e),
        tuple(output_names), tuple(input_names),
    )  # fmt: skip
