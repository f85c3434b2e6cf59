"""The recipe's settings and the rules that derive them from the record.

:class:`RecipeConfig` holds every setting; a ``None`` field is derived by
:meth:`RecipeConfig.resolved` from what the record says of itself: its length
``N`` (estimation samples), the number of measured outputs a new experiment
gives to set the state (the benchmark protocol's ``n``) and the memory of the
linear model fitted first (its slowest pole). ``docs/system_identification.md``
gives each rule with the validation evidence behind it.

==========================  =====================================  ==========================
setting                     short record (``N <= 2048``)           long record
==========================  =====================================  ==========================
initial state               learned (the record's start)           encoder of the ``n`` samples
                                                                   before each window
window                      the whole record                       ``8 tau`` (``tau``: slowest
                                                                   time constant), 128..1024
batch                       1                                      ``8192 / window``, 8..64
iterations                  2,000                                  ``N / 8``, 2,000..10,000
weight decay                0.1                                    ``0.1 * 2000 / iterations``
validation                  continues the estimation record        on its own, from its first
                                                                   ``n`` samples
time budget                 none: a fixed amount of work           (same)
==========================  =====================================  ==========================

Every default is a fixed amount of work (iterations, runs, window, batch), so
the same data, settings, seed, backend and machine give the same model
whatever else the machine is doing. ``effort`` multiplies the iterations
(:meth:`RecipeConfig.resolved`). ``time_budget`` is a user's cap on the wall
time; a run it cuts depends on the machine's speed and load.

An estimation record of several experiments (``Record.boundaries``) caps the
window at its shortest experiment (a short record trains on windows of that
length instead of the whole record), and its validation record is scored on
its own: no experiment continues another.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from keras_mgu.sysid.config_checks import (
    check_decay,
    check_held_out,
    check_held_out_at,
    check_rule,
    check_score_weights,
    non_negative,
    positive_int,
)
from keras_mgu.sysid.models.delay import check_input_delay

__all__ = ["RecipeConfig", "window_for_memory"]

#: Records up to this many estimation samples train on the whole record at once.
WHOLE_RECORD_MAX = 2048
#: Encoder lag when the data has no protocol saying how many outputs a test gives.
DEFAULT_N_INITIAL = 20
#: Window bounds for long records, and the samples per batch they aim at.
WINDOW_MIN, WINDOW_MAX, SAMPLES_PER_BATCH = 128, 1024, 8192
#: Iterations of short records, and the bounds of long records' ``N / 8``.
SHORT_ITERATIONS, LONG_ITERATIONS_MAX = 2000, 10_000
#: How the units and learning rate are set: as given, or chosen on validation.
CAPACITIES = ("fixed", "search")
#: Weight decay of the short-record recipe (at ``SHORT_ITERATIONS``).
WEIGHT_DECAY = 0.1
#: The model classes :func:`~keras_mgu.sysid.identify` can try: the recurrent network
#: alone, on the linear model's residual, NARX, a recurrent cell inside the linear loop,
#: and the linear model fitted by simulation error.
MODEL_CLASSES = ("network", "linear+network", "narx", "loop", "linear", "polynomial")
#: The classes tried when the config leaves them open: every one.
DEFAULT_MODEL_CLASSES = MODEL_CLASSES
#: The classes whose network simulates from its own state (the others read measured lags):
#: their k-step prediction adds a noise model (:mod:`~keras_mgu.sysid.judging.noise_model`).
NETWORK_CLASSES = ("network", "linear+network")


def window_for_memory(time_constant: float | None) -> int:
    """``8 tau`` rounded up to a power of two, in ``[WINDOW_MIN, WINDOW_MAX]``.

    ``tau`` is the slowest time constant of the linear model, in samples
    (``None`` or infinite: no linear model, or an integrator: the longest).
    """
    if time_constant is None or not math.isfinite(time_constant):
        return WINDOW_MAX
    wanted = max(1.0, 8.0 * time_constant)
    return int(min(WINDOW_MAX, max(WINDOW_MIN, 2 ** math.ceil(math.log2(wanted)))))


@dataclasses.dataclass(frozen=True)
class RecipeConfig:
    """Settings of the recipe; ``None`` fields are derived from the record.

    Attributes:
        cell: Recurrent layer: ``"mgu"``, or ``"gru"``/``"lstm"`` to compare.
        units: State size of each stacked layer (``None``: ``(32,)``).
        linear_path: Add the linear input-to-output path.
        linear_prior: Fit a linear (ARX) model first and train the network on
            what it leaves (inputs ``[u, y_lin]``, target ``y - y_lin``).
            ``None``: when the linear model explains the validation record
            (see :func:`~keras_mgu.sysid.models.arx.select_linear_model`).
        initial_state: ``"learned"`` (one learned state: the record's start)
            or ``"encoder"`` (estimated from the ``n_initial`` samples before
            each window). ``None``: learned for whole-record training,
            encoder otherwise.
        n_initial: Samples the encoder reads. ``None``: the protocol's ``n``
            of the data, else ``DEFAULT_N_INITIAL``.
        iterations: Gradient steps per run (``None``: by record length).
        learning_rate: Adam's initial learning rate.
        clipnorm: Gradient-norm clipping (``None``: off).
        weight_decay: Decoupled weight decay (AdamW): every step multiplies the
            weights by ``1 - learning_rate * weight_decay``. ``None``:
            ``0.1 * min(1, 2000 / iterations)``, the shrinkage of a
            2,000-iteration run over longer ones.
        decay_points, decay_rate: The learning rate is multiplied by
            ``decay_rate`` at these fractions of the run, each in ``(0, 1]``
            (:class:`~keras_mgu.callbacks.LearningRateDecayPoints`: the decays
            fall on the starts of epochs of ``steps_per_epoch`` iterations);
            ``decay_rate`` is positive.
        window: Training window length (``None``: see the module table).
        batch_size: Windows per batch (``None``: see the module table).
        washout: Unscored leading samples of windows that start from the
            learned state after the record's start. ``None``: a quarter of
            the window. Unused with the encoder.
        steps_per_epoch: Iterations per Keras epoch (one progress line each;
            the learning rate decays at the start of an epoch).
        validation_checks: How many times a run scores the validation record:
            every ``iterations // validation_checks`` iterations (and at the
            first).
        validation_every: Iterations between two validation checks (and one at
            the first iteration); overrides ``validation_checks``. ``None``:
            from ``validation_checks``.
        validation_continues: The validation record continues the estimation
            record: the two are simulated together from the learned initial
            state and the score is the RMSE over both. ``False``: it is
            simulated on its own, from the state its first samples give
            (encoder) or after a washout. ``None``: ``True`` with the learned
            state, else ``False``.
        score_weights: Weights of :class:`WeightedEarlyStopping`'s score, e.g.
            ``{"val_rmse": 0.8, "loss": 0.2}``: ``val_rmse`` is the validation
            RMSE (standardised units), ``loss`` the training MSE (the running
            mean over the current epoch). Weights are finite and ``>= 0``, at
            least one positive.
        selection: How :func:`identify` chooses among its runs, on
            validation: ``"ensemble"`` (default: the average of runs chosen
            greedily; see :mod:`~keras_mgu.sysid.choice.selection`) or ``"best"``
            (the run with the lowest validation RMSE). Chosen on the first
            half of the validation record and scored on the second, the
            average did at least as well as the best run on every benchmark
            and backend of ``docs/sweeps.md``, and it depends less on one
            lucky run as the runs grow in number.
        time_budget: A cap on the wall time of all runs of :func:`identify`
            together, in seconds: a run that would overrun its share is
            shortened after its second epoch (the schedule shrinks with it).
            Where it binds, the model depends on the machine's speed and load.
            ``None`` (default): no cap; every run does its iterations.
        capacity: ``"fixed"`` (default): the units and learning rate as
            given. ``"search"``: :func:`identify` chooses the units of one MGU
            layer and the learning rate on the validation record, with short
            screening runs before the restarts (:mod:`~keras_mgu.sysid.choice.capacity`);
            ``units`` must then be left ``None``.
        effort: Multiplies the derived iterations (a positive integer; more
            work, usually a better model, in proportionally more time). An
            explicit ``iterations`` is used as given.
        model_classes: The model classes :func:`identify` tries, among
            :data:`MODEL_CLASSES`: ``"network"`` (the recurrent network
            alone), ``"linear+network"`` (on the linear model's residual,
            where the linear model explains the validation record),
            ``"narx"`` (:mod:`~keras_mgu.sysid.models.narx`) and ``"loop"`` (the
            ``cell`` inside the linear model's loop,
            :mod:`~keras_mgu.sysid.models.loop`), ``"linear"`` (the
            ARX model refined on the simulation error,
            :mod:`~keras_mgu.sysid.models.output_error`) and ``"polynomial"``
            (monomials of the lags chosen by FROLS,
            :mod:`~keras_mgu.sysid.models.polynomial`); ``"all"``: every one.
            ``None`` (default): every one.
        input_delay: Dead time, in samples: how long each input takes to
            reach the output. ``None`` (default): estimated on the record
            (:func:`~keras_mgu.sysid.models.delay.estimate_input_delay`); an
            integer ``>= 0``: every input's; a tuple: one per input. Every
            class then sees ``u_i(k - nk_i)`` in place of ``u_i(k)``.
        held_out: The share of the estimation record's first experiment set
            aside before anything is fitted, to score the choice beside the
            validation record (:mod:`~keras_mgu.sysid.choice.held_out`), in
            ``[0, 0.5]``. ``0`` (default): nothing is held out, and the
            choice's second half is the free run through the estimation
            record the runs fitted.
        held_out_at: Which part is held out: ``"start"`` (default), the
            first experiment's first ``held_out`` share; ``"end"``, the last
            experiment's last share, so that the runs fit the record's start.
        refit: Once the choice is made, train the runs it keeps again on the
            whole estimation record, the held-out start included
            (:mod:`~keras_mgu.sysid.choice.refit`). ``False`` (default): keep
            the runs the choice scored, which measured better on the records
            tried (``benchmarks/RESULTS.md``, "The choice on samples no run
            fitted").
        racing: ``True`` (default): the first run of a class trained by
            gradient steps stops at a quarter of its iterations where it is
            far behind the best run finished before it, so that the classes
            that cannot win cost little (:mod:`~keras_mgu.sysid.choice.racing`).
            ``False``: every first run does all its iterations.
        edge_guard: ``True``: keep no nonlinear run whose error at the record's
            edges is above the ARX model's (:mod:`~keras_mgu.sysid.judging.edges`).
            ``False`` (default): reported, not acted on (on EMPS the guard keeps
            the ARX model, 52.6 mm, over linear+network, 5.4 mm:
            ``benchmarks/RESULTS.md``, "The edge guard").
    """

    cell: str = "mgu"
    units: tuple[int, ...] | None = None
    linear_path: bool = True
    linear_prior: bool | None = None
    initial_state: str | None = None
    n_initial: int | None = None
    iterations: int | None = None
    learning_rate: float = 0.01
    clipnorm: float | None = None
    weight_decay: float | None = None
    decay_points: tuple[float, ...] = (0.5, 0.8)
    decay_rate: float = 0.3
    window: int | None = None
    batch_size: int | None = None
    washout: int | None = None
    steps_per_epoch: int = 100
    validation_checks: int = 100
    validation_every: int | None = None
    validation_continues: bool | None = None
    score_weights: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"val_rmse": 1.0}
    )
    time_budget: float | None = None
    selection: str = "ensemble"
    effort: int = 1
    capacity: str = "fixed"
    model_classes: tuple[str, ...] | None = None
    input_delay: int | tuple[int, ...] | None = None
    held_out: float = 0.0
    held_out_at: str = "start"
    refit: bool = False
    racing: bool = True
    edge_guard: bool = False

    def __post_init__(self) -> None:
        check_rule(self.selection)
        object.__setattr__(self, "held_out", check_held_out(self.held_out))
        check_held_out_at(self.held_out_at)
        for name in ("refit", "racing", "edge_guard"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"`{name}` must be True or False; received {value!r}.")
        # A tuple from here on (one integer: every input's, widened per record).
        object.__setattr__(self, "input_delay", check_input_delay(self.input_delay))
        if self.model_classes is not None:
            classes = MODEL_CLASSES if self.model_classes == "all" else self.model_classes
            classes = tuple((classes,) if isinstance(classes, str) else classes)
            unknown = [c for c in classes if c not in MODEL_CLASSES]
            if not classes or unknown:
                raise ValueError(
                    f"`model_classes` must name some of {list(MODEL_CLASSES)}; "
                    f"received {self.model_classes!r}."
                )
            object.__setattr__(self, "model_classes", classes)
        if self.capacity not in CAPACITIES:
            raise ValueError(f"`capacity` must be one of {CAPACITIES}; received {self.capacity!r}.")
        if self.units is not None:
            units = (self.units,) if isinstance(self.units, int) else tuple(self.units)
            object.__setattr__(self, "units", units)
        for name in ("steps_per_epoch", "validation_checks", "effort"):
            positive_int(name, getattr(self, name))
        for name in ("iterations", "batch_size", "n_initial", "validation_every"):
            positive_int(name, getattr(self, name), allow_none=True)
        object.__setattr__(self, "decay_points", check_decay(self.decay_points, self.decay_rate))
        object.__setattr__(self, "score_weights", check_score_weights(self.score_weights))
        non_negative("weight_decay", self.weight_decay)
        if self.initial_state not in (None, "learned", "encoder"):
            raise ValueError(
                "`initial_state` must be None, 'learned' or 'encoder'; received "
                f"{self.initial_state!r}."
            )
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise ValueError(f"`learning_rate` must be positive; received {self.learning_rate!r}.")
        if self.time_budget is not None and not (
            isinstance(self.time_budget, (int, float)) and self.time_budget > 0
        ):
            raise ValueError(
                "`time_budget` must be a positive number of seconds; received "
                f"{self.time_budget!r}."
            )

    @classmethod
    def checked(cls, config: RecipeConfig | None, restarts: int) -> RecipeConfig:
        """``config`` (default ``RecipeConfig()``) checked for ``identify`` of ``restarts`` runs."""
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
            raise ValueError(f"`restarts` must be a positive integer; received {restarts!r}.")
        config = config or cls()
        if config.capacity == "search" and config.units is not None:
            raise ValueError(
                "`capacity='search'` chooses the units on validation; leave `units` None "
                f"(received units={config.units})."
            )
        return config

    @property
    def classes(self) -> tuple[str, ...]:
        """The classes ``identify`` tries: ``model_classes``, else :data:`DEFAULT_MODEL_CLASSES`."""
        return tuple(self.model_classes or DEFAULT_MODEL_CLASSES)

    def validation_interval(self) -> int:
        """Iterations between validation checks of a resolved config (``iterations`` set)."""
        if self.validation_every is not None:
            return self.validation_every
        if self.iterations is None:
            raise ValueError("The validation interval is known once `iterations` is resolved.")
        return max(1, self.iterations // self.validation_checks)

    def resolved(
        self,
        n_samples: int,
        n_initial: int | None = None,
        time_constant: float | None = None,
        linear_prior: bool | None = None,
        shortest_experiment: int | None = None,
    ) -> RecipeConfig:
        """A copy with every ``None`` field set for an ``n_samples`` estimation record.

        Args:
            n_samples: Estimation samples ``N``.
            n_initial: The data's protocol ``n`` (measured outputs a test gives).
            time_constant: Slowest time constant of the linear model in samples
                (``None``: unknown; ``inf``: an integrator).
            linear_prior: Whether the linear model is used (when the config
                leaves it to the data).
            shortest_experiment: Samples of the shortest experiment when the
                record holds several (``None``: one experiment).
        """
        several = shortest_experiment is not None and shortest_experiment < n_samples
        whole = self.window is None and n_samples <= WHOLE_RECORD_MAX
        state = self.initial_state or ("learned" if whole else "encoder")
        lag = self.n_initial or n_initial or DEFAULT_N_INITIAL
        history = lag if state == "encoder" else 0
        span = shortest_experiment if several else n_samples
        window = self._window(span, whole, history, time_constant, several)
        iterations = self.iterations or self.effort * _iterations(n_samples, whole)
        washout = window // 4 if self.washout is None else self.washout
        if isinstance(washout, bool) or not isinstance(washout, int) or not 0 <= washout < window:
            raise ValueError(
                f"`washout` must be an integer in [0, window={window}); received {washout!r}."
            )
        return dataclasses.replace(
            self,
            units=self.units or (32,),
            linear_prior=bool(self.linear_prior if self.linear_prior is not None else linear_prior),
            initial_state=state,
            n_initial=lag,
            iterations=iterations,
            weight_decay=(
                WEIGHT_DECAY * min(1.0, SHORT_ITERATIONS / iterations)
                if self.weight_decay is None
                else self.weight_decay
            ),
            window=window,
            batch_size=self.batch_size or (1 if whole else _batch(window)),
            washout=washout,
            validation_continues=(
                state == "learned" and not several if self.validation_continues is None
                else self.validation_continues
            ),
        )  # fmt: skip

    def _window(
        self, n_samples: int, whole: bool, history: int, tau: float | None, several: bool
    ) -> int:
        """The window for ``n_samples`` (the shortest experiment's, with ``several``)."""
        room = n_samples - history
        record = "shortest estimation experiment" if several else "estimation record"
        if self.window is not None:
            window = self.window
            if isinstance(window, bool) or not isinstance(window, int) or window < 2:
                raise ValueError(f"`window` must be an integer >= 2; received {window!r}.")
            if window > room:
                raise ValueError(
                    f"The {record} has {n_samples} samples, fewer than the training "
                    f"window of {window} (plus {history} encoder samples); choose a window of "
                    f"at most {room} samples (or None)."
                )
            return window
        if whole:
            return n_samples
        return min(room, window_for_memory(tau))


def _iterations(n_samples: int, whole: bool) -> int:
    if whole:
        return SHORT_ITERATIONS
    return int(min(LONG_ITERATIONS_MAX, max(SHORT_ITERATIONS, n_samples // 8)))


def _batch(window: int) -> int:
    return int(min(64, max(8, SAMPLES_PER_BATCH // window)))
