"""Scoring protocols of the public system-identification benchmarks.

A :class:`Protocol` says how a benchmark is split and scored: which samples
form the estimation and test records, how many measured test outputs a model
may use to set its state (``n_initial``; the score is the RMSE of
``y - y_sim`` over test samples ``n_initial`` onward), and in which unit the
score is published. :data:`PROTOCOLS` holds the benchmarks of the
``nonlinear-benchmarks`` package, with the ``n_initial`` of its release
:data:`NONLINEAR_BENCHMARKS_VERSION` (its test records'
``state_initialization_window_length``); :func:`get_protocol` looks one up by
name.

This module is plain Python and imports nothing else from the package, so
:mod:`keras_mgu.datasets.records` can import it.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = [
    "NONLINEAR_BENCHMARKS_VERSION",
    "PROTOCOLS",
    "Protocol",
    "dataset_key",
    "get_protocol",
]

#: The ``nonlinear-benchmarks`` release whose ``n_initial`` values :data:`PROTOCOLS` follows.
#: 1.0.1 raised Cascaded Tanks from 5 to 50 and CED from 4 to 10 (releases up to 1.0.0 have
#: 5 and 4; :attr:`Protocol.previous_n_initial` keeps them).
NONLINEAR_BENCHMARKS_VERSION = "1.0.1"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How one benchmark is split and scored.

    Attributes:
        name: Benchmark name, the key in :data:`PROTOCOLS` (e.g. ``"wh2009"``).
        n_initial: Number of measured test outputs a model may use, with the
            test input, to set its state; the score is taken over test samples
            ``n_initial`` onward (``y[n_initial:]``).
        unit: Unit of the published score (``"V"``, ``"mV"``, ``"mm"``; empty
            when the benchmark's records are scored in their own units).
        scale: Factor from the units of the loaded records to ``unit``
            (1000.0 for V -> mV or m -> mm; 1.0 when they agree).
        sampling_time: Sampling period of the records in seconds.
        estimation: Human-readable description of the estimation split (the
            training data; carve validation from it), e.g.
            ``"samples 5200:105200"``.
        test: Human-readable description of the test split (report on it
            only), e.g. ``"samples 105200:184000"``.
        same_initial_state: True when the test record starts from the same
            plant state as the estimation record (so a state fitted at the
            start of the estimation record also fits the test record).
        published: ``(method, test RMSE in unit)`` pairs from the literature.
        notes: Anything that changes how the published figures compare (for
            example a different scoring window).
        previous_n_initial: The ``n_initial`` of ``nonlinear-benchmarks``
            releases up to 1.0.0 where :data:`NONLINEAR_BENCHMARKS_VERSION`
            changed it (Cascaded Tanks 5, CED 4), else ``None``. Results scored
            before the change (this project's stored benchmark results up to
            2026-12-03) start their score at this sample; the benchmark suite
            reports both.
    """

    name: str
    n_initial: int
    unit: str
    scale: float
    sampling_time: float
    estimation: str
    test: str
    same_initial_state: bool = False
    published: tuple[tuple[str, float], ...] = ()
    notes: str = ""
    previous_n_initial: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"`name` must be a non-empty string; received {self.name!r}.")
        if isinstance(self.n_initial, bool) or not isinstance(self.n_initial, int):
            raise TypeError(f"`n_initial` must be an int; received {self.n_initial!r}.")
        if self.n_initial < 0:
            raise ValueError(f"`n_initial` must be >= 0; received {self.n_initial}.")
        previous = self.previous_n_initial
        if previous is not None and (
            isinstance(previous, bool) or not isinstance(previous, int) or previous < 0
        ):
            raise ValueError(
                f"`previous_n_initial` must be None or an int >= 0; received {previous!r}."
            )
        for field in ("scale", "sampling_time"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"`{field}` must be a positive number; received {value!r}.")
            object.__setattr__(self, field, float(value))
        published = tuple((str(label), float(value)) for label, value in self.published)
        object.__setattr__(self, "published", published)

    def score_in_unit(self, rmse: float) -> float:
        """An RMSE in the records' units expressed in :attr:`unit` (``rmse * scale``)."""
        return float(rmse) * self.scale


PROTOCOLS: dict[str, Protocol] = {
    "cascaded_tanks": Protocol(
        name="cascaded_tanks",
        n_initial=50,
        previous_n_initial=5,
        unit="V",
        scale=1.0,
        sampling_time=4.0,
        estimation="all 1024 samples of (uEst, yEst)",
        test="all 1024 samples of (uVal, yVal)",
        same_initial_state=True,
        published=(
            ("best linear approximation", 0.75),
            ("Volterra model", 0.54),
            ("state-space model with GP-inspired prior", 0.45),
            ("nonlinear state-space (NLSS2 initialisation)", 0.34),
            ("neural state-space model", 0.33),
            ("grey-box model with a physical overflow model", 0.18),
        ),
        notes=(
            "The published figures score every test sample of a simulation whose initial "
            "state comes from the estimation record, not samples n_initial onward."
        ),
    ),
    "wh2009": Protocol(
        name="wh2009",
        n_initial=50,
        unit="mV",
        scale=1000.0,
        sampling_time=1.0 / 51200.0,
        estimation="samples 5200:105200",
        test="samples 105200:184000",
        published=(
            ("deep subspace encoder state-space model (SUBNET, Beintema et al. 2023)", 0.241),
            ("best linear approximation, nonparametric separation (Schoukens et al. 2014)", 0.28),
            ("GRU baseline (Champneys et al. 2024)", 3.97),
            ("LSTM baseline (Champneys et al. 2024)", 4.45),
        ),
    ),
    "emps": Protocol(
        name="emps",
        n_initial=20,
        unit="mm",
        scale=1000.0,
        sampling_time=0.001,
        estimation="all of DATA_EMPS.csv (u = vir, y = qm)",
        test="all of DATA_EMPS_PULSES.csv (u = vir, y = qm)",
        published=(
            ("dynoNet (Forgione & Piga 2021)", 2.6),
            ("continuous-time deep subspace encoder (Beintema et al. 2023)", 4.61),
            ("LSTM baseline (Champneys et al. 2024)", 74.0),
            ("RNN baseline (Champneys et al. 2024)", 89.0),
            ("GRU baseline (Champneys et al. 2024)", 220.0),
        ),
    ),
    "silverbox": Protocol(
        name="silverbox",
        n_initial=50,
        unit="mV",
        scale=1000.0,
        sampling_time=1.0 / 610.35,
        estimation="first 75% of the multisine part, samples 40650:127400",
        test="last 25% of the multisine part; arrow 100:40575 (and its first 32000 samples)",
    ),
    "ced": Protocol(
        name="ced",
        n_initial=10,
        previous_n_initial=4,
        unit="",
        scale=1.0,
        sampling_time=0.02,
        estimation="samples :400 of each of the two records (low and high input amplitude)",
        test="samples 400: of each record, scored separately",
    ),
}


def dataset_key(name: object) -> object:
    """The key a dataset is registered under: ``-`` in a name read as ``_``.

    ``"cascaded-tanks"`` is ``"cascaded_tanks"``; anything but a string is
    returned as it is (the caller's lookup then refuses it).
    """
    return name.replace("-", "_") if isinstance(name, str) else name


def get_protocol(name: str) -> Protocol:
    """The :class:`Protocol` registered under ``name`` in :data:`PROTOCOLS`.

    ``"cascaded-tanks"`` names ``"cascaded_tanks"`` too (``-`` and ``_`` alike).

    Raises:
        ValueError: ``name`` is not a known benchmark (the message lists them).
    """
    try:
        return PROTOCOLS[dataset_key(name)]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown benchmark protocol {name!r}; expected one of {sorted(PROTOCOLS)}."
        ) from None
