"""``WeightedEarlyStopping``: a weighted score of logged metrics every N batches, best weights kept.

It scores the model every N training batches (or at each epoch end) with a
weighted sum of logged metrics, keeps the best weights, optionally stops early
and checkpoints the best model atomically (a crash while saving never destroys
an earlier good file).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import warnings
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

import keras
import numpy as np

from keras_mgu._atomic import write_atomically
from keras_mgu.kernels import native_inference

SAVE_SUFFIXES = (".keras", ".weights.h5")


def _check_weights(weights: Any) -> dict[str, float]:
    if not isinstance(weights, Mapping) or not weights:
        error = ValueError if isinstance(weights, Mapping) else TypeError
        raise error(
            "`weights` must be a non-empty dict mapping log names to weights, e.g. "
            f"{{'val_rmse': 1.0, 'loss': 0.1}}; got {weights!r}."
        )
    checked = {}
    for name, weight in weights.items():
        if not isinstance(name, str):
            raise TypeError(f"Log names in `weights` must be strings; got {name!r}.")
        if isinstance(weight, bool) or not isinstance(weight, Real) or not math.isfinite(weight):
            raise ValueError(f"The weight of '{name}' must be a finite number; got {weight!r}.")
        checked[name] = float(weight)
    return checked


def _check_frequency(frequency: Any) -> int | float | None:
    if frequency is None:
        return None
    if isinstance(frequency, bool) or not isinstance(frequency, Real):
        raise TypeError(
            "`validation_frequency` must be an int >= 1 (batches) or a float in (0, 1] "
            f"(fraction of the run); got {frequency!r}."
        )
    if isinstance(frequency, Integral):
        if frequency < 1:
            raise ValueError(f"An int `validation_frequency` must be >= 1; got {frequency}.")
        return int(frequency)
    if not (0.0 < frequency <= 1.0):
        raise ValueError(
            f"A float `validation_frequency` is a fraction of the run in (0, 1]; got {frequency}."
        )
    return float(frequency)


def _check_filepath(filepath: Any) -> str | None:
    if filepath is None:
        return None
    filepath = os.fspath(filepath)
    if not filepath.endswith(SAVE_SUFFIXES):
        raise ValueError(
            f"`filepath` must end in '.keras' (whole model) or '.weights.h5' (weights "
            f"only); got '{filepath}'."
        )
    return filepath


def _to_float(value: Any) -> float:
    return float(np.asarray(keras.ops.convert_to_numpy(value)).reshape(()))


def _scalar_logs(logs: Mapping | None) -> dict[str, float]:
    """The scalar entries of ``logs`` as Python floats."""
    out = {}
    for name, value in (logs or {}).items():
        with contextlib.suppress(TypeError, ValueError):
            out[name] = _to_float(value)
    return out


def _write_json(path: str, data: dict) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())

    write_atomically(path, write)


def _torch_training_mode(model: Any) -> bool | None:
    """The torch module mode of ``model`` (PyTorch backend only, else None)."""
    if keras.backend.backend() != "torch":
        return None
    return bool(getattr(model, "training", False))


def _set_torch_training_mode(model: Any, mode: bool | None) -> None:
    if mode is not None:
        model.train(mode)


@keras.saving.register_keras_serializable(package="keras_mgu")
class WeightedEarlyStopping(keras.callbacks.Callback):
    """Keep (and optionally save) the model with the lowest weighted score.

    A *check* computes::

        score = sum(weight[name] * value[name] for name in weights)

    (lower is better). Names starting with ``val_`` are validation values,
    the others come from the training logs at that moment.

    When checks run:

    * ``validation_frequency`` set: at the first training batch of the run
      (global iteration 1; under ``compile(steps_per_execution=k)``, where
      Keras calls back once per ``k`` batches, the first block's last
      iteration) and at every iteration that is a multiple of ``N`` (with
      ``k`` a divisor of ``N``, exactly those; else the first block end past
      each),
      with ``N`` the int given, or ``ceil(fraction * total)`` for a float in
      ``(0, 1]`` where ``total = steps_per_epoch * epochs`` of the ``fit``
      call. ``val_*`` values are then ``model.evaluate(validation_data)``
      results (with the model's compiled loss and metrics, e.g.
      ``val_rmse`` from ``keras.metrics.RootMeanSquaredError(name="rmse")``).
      The training values are the batch logs, which in Keras 3 are the
      running means over the current epoch, as Keras reports them. The
      training metrics' state is saved before and restored after each
      evaluation, so the epoch logs and progress bar are unaffected.
    * Otherwise: at each epoch end, from the epoch logs (``val_*`` values come
      from ``fit``'s own ``validation_data``).

    With ``validation_frequency`` set, ``check_at_start`` moves the first
    check from iteration 1 to iteration 0, before the first batch (the
    weights the run starts from can then be the best; only ``val_*`` names
    may be weighed, since no training logs exist yet), and ``check_at_end``
    adds a check after the last batch where that is no multiple of ``N``.

    A check whose score is NaN or infinite never becomes the best. A check
    improves when ``score < best_score - min_delta``; the weights at the best
    check are kept (a NumPy copy) and restored at the end of training when
    ``restore_best_weights``. With ``patience`` set, training stops after
    ``patience`` checks in a row without improvement.

    Checkpointing: with ``filepath`` (``.keras`` for the whole model,
    ``.weights.h5`` for weights only) the best model is written whenever the
    best improves, to a temporary file in the same folder that is then renamed
    over ``filepath``, so an interruption never leaves a broken or worse file.
    Next to it ``<filepath>.json`` records ``best_score``, ``best_epoch`` and
    ``best_iteration`` (written the same way, after the model). If that JSON
    exists when training begins, its score is the bar to beat: a resumed run
    never replaces a better saved model with a worse one, and when no check of
    the run beats it, ``restore_best_weights`` loads the weights from
    ``filepath``.

    Args:
        weights: Dict mapping log names to weights, e.g.
            ``{"val_rmse": 1.0, "loss": 0.1}``.
        validation_data: ``(x, y)``, ``(x, y, sample_weight)`` or a
            re-iterable dataset (``tf.data.Dataset``, ``keras.utils.PyDataset``)
            evaluated at each check when ``validation_frequency`` is set.
        validation_frequency: ``None`` (check at epoch ends), an int ``N >= 1``
            (every N batches) or a float in ``(0, 1]`` (fraction of the run).
        patience: ``None`` (never stop early) or the number of checks without
            improvement after which training stops.
        min_delta: Minimum decrease of the score that counts as improvement.
        restore_best_weights: Restore the best weights when training ends.
        filepath: Optional ``.keras`` or ``.weights.h5`` path for the best model.
        verbose: ``1`` prints a line at each new best.
        validation_batch_size: Batch size for evaluating array validation data
            (Keras's default when ``None``).
        check_at_start: Check before the first batch instead of after it.
        check_at_end: Also check after the last batch.

    Attributes (after ``fit``):
        best_score, best_epoch, best_iteration: The best check (epochs and
            iterations counted from 1; ``inf``/``None`` if none was finite).
        best_weights: NumPy copies of the best weights of this run, or None.
        history: One dict per check: ``iteration``, ``epoch``, ``score`` and
            each weighted name with its unweighted value.
        train_history: One dict per training batch (per block of ``k`` under
            ``steps_per_execution=k``): ``iteration``, ``epoch`` and the batch
            logs (``loss`` etc., running means over the epoch).
        stopped_epoch: Epoch (from 1) at which ``patience`` stopped training,
            else None.
    """

    def __init__(
        self,
        weights: Mapping[str, float],
        validation_data: Any = None,
        validation_frequency: int | float | None = None,
        patience: int | None = None,
        min_delta: float = 0.0,
        restore_best_weights: bool = True,
        filepath: str | os.PathLike | None = None,
        verbose: int = 0,
        validation_batch_size: int | None = None,
        check_at_start: bool = False,
        check_at_end: bool = False,
    ) -> None:
        super().__init__()
        self.weights = _check_weights(weights)
        self.validation_frequency = _check_frequency(validation_frequency)
        self.check_at_start, self.check_at_end = bool(check_at_start), bool(check_at_end)
        self._check_edges()
        self._check_validation_setup(validation_data)
        self.validation_data = validation_data
        if patience is not None and (
            isinstance(patience, bool) or not isinstance(patience, Integral) or patience < 1
        ):
            raise ValueError(f"`patience` must be None or an int >= 1; got {patience!r}.")
        self.patience = None if patience is None else int(patience)
        if isinstance(min_delta, bool) or not isinstance(min_delta, Real) or min_delta < 0:
            raise ValueError(f"`min_delta` must be a number >= 0; got {min_delta!r}.")
        self.min_delta = float(min_delta)
        self.restore_best_weights = bool(restore_best_weights)
        self.filepath = _check_filepath(filepath)
        self.verbose = int(verbose)
        self.validation_batch_size = validation_batch_size
        self._reset_state()

    def _check_validation_setup(self, validation_data: Any) -> None:
        if validation_data is not None and self.validation_frequency is None:
            raise ValueError(
                "`validation_data` is evaluated every `validation_frequency` batches; set "
                "`validation_frequency` too (or pass validation data to `fit` and leave both "
                "unset to check at epoch ends)."
            )
        val_names = [n for n in self.weights if n.startswith("val_")]
        if self.validation_frequency is not None and validation_data is None and val_names:
            raise ValueError(
                f"Batch-wise checks of {val_names} need `validation_data` on the callback."
            )

    def _check_edges(self) -> None:
        if (self.check_at_start or self.check_at_end) and self.validation_frequency is None:
            raise ValueError(
                "`check_at_start` and `check_at_end` place checks between batches; set "
                "`validation_frequency` too."
            )
        trained = sorted(n for n in self.weights if not n.startswith("val_"))
        if self.check_at_start and trained:
            raise ValueError(
                f"`check_at_start` scores the model before any batch, when {trained} is not "
                "logged yet; weigh only `val_*` names."
            )

    def _reset_state(self) -> None:
        self.best_score = math.inf
        self.best_epoch: int | None = None
        self.best_iteration: int | None = None
        self.best_weights: list[np.ndarray] | None = None
        self.history: list[dict[str, float]] = []
        self.train_history: list[dict[str, float]] = []
        self.stopped_epoch: int | None = None
        self.wait = 0
        self._every: int | None = None
        self._iteration = 0
        self._epoch_start: int | None = None
        self._epoch = 0
        self._loaded_from_file = False
        self._last_logs: dict[str, float] = {}

    # -- run bookkeeping -------------------------------------------------

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._reset_state()
        self._every = self._resolve_frequency()
        if self.filepath is not None:
            self._load_saved_best()
        if self.check_at_start:
            self._check({}, self._validate(), 0)

    def _resolve_frequency(self) -> int | None:
        frequency = self.validation_frequency
        if frequency is None or isinstance(frequency, int):
            return frequency
        steps, epochs = self.params.get("steps"), self.params.get("epochs")
        if not steps or not epochs:
            raise ValueError(
                "A float `validation_frequency` is a fraction of the run's batches, which is "
                "unknown here: pass `steps_per_epoch` to `fit` or give an int frequency."
            )
        return max(1, math.ceil(round(frequency * steps * epochs, 9)))

    def _load_saved_best(self) -> None:
        meta_path = self.filepath + ".json"
        if not os.path.exists(meta_path):
            return
        if not os.path.exists(self.filepath):
            warnings.warn(
                f"Ignoring '{meta_path}': the model file '{self.filepath}' is missing.",
                stacklevel=2,
            )
            return
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("weights") not in (None, self.weights):
            warnings.warn(
                f"'{meta_path}' was scored with weights {meta['weights']}, not {self.weights}; "
                "its best score is still the bar to beat.",
                stacklevel=2,
            )
        self.best_score = float(meta["best_score"])
        self.best_epoch = meta.get("best_epoch")
        self.best_iteration = meta.get("best_iteration")
        self._loaded_from_file = True

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self._epoch_start is None:
            steps = self.params.get("steps") if self.params else None
            self._iteration = epoch * steps if steps else 0
        self._epoch = epoch
        self._epoch_start = self._iteration

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        previous = self._iteration
        iteration = self._epoch_start + batch + 1
        self._iteration = iteration
        train_logs = _scalar_logs(logs)
        self.train_history.append({"iteration": iteration, "epoch": self._epoch + 1, **train_logs})
        if self._every is None:
            return
        first = previous == 0 and not self.check_at_start
        if first or iteration // self._every > previous // self._every:
            self._check(train_logs, self._validate(), iteration)
        self._last_logs = train_logs

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._every is None:
            epoch_logs = _scalar_logs(logs)
            self._check(epoch_logs, epoch_logs, self._iteration)

    def on_train_end(self, logs: dict | None = None) -> None:
        last = self._iteration
        checked = self.history and self.history[-1]["iteration"] == last
        if self.check_at_end and last and not checked:
            self._check(self._last_logs, self._validate(), last)
        if not self.restore_best_weights:
            return
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)
        elif self._loaded_from_file:
            self.model.load_weights(self.filepath)

    # -- checks ----------------------------------------------------------

    def _validate(self) -> dict[str, float]:
        """``val_*`` results of ``model.evaluate`` that leave training metrics intact."""
        if self.validation_data is None:
            return {}
        model = self.model
        # Before the first batch (check_at_start) the metrics may not be built yet:
        # the evaluation builds them, and the epoch's start resets them.
        variables = list(model.metrics_variables)
        saved = [keras.ops.convert_to_numpy(v) for v in variables]
        mode = _torch_training_mode(model)
        try:
            with native_inference():  # never exported: the compiled loops (TensorFlow)
                results = self._evaluate(model)
        finally:
            for variable, value in zip(variables, saved, strict=True):
                variable.assign(value)
            _set_torch_training_mode(model, mode)
        return {f"val_{name}": _to_float(value) for name, value in results.items()}

    def _evaluate(self, model: keras.Model) -> dict[str, Any]:
        data = self.validation_data
        kwargs = {"verbose": 0, "return_dict": True}
        if isinstance(data, (tuple, list)):
            if len(data) not in (2, 3):
                raise ValueError(
                    "`validation_data` must be (x, y), (x, y, sample_weight) or a dataset; "
                    f"got a {type(data).__name__} of length {len(data)}."
                )
            sample_weight = data[2] if len(data) == 3 else None
            if _fits_one_batch(data[0], self.validation_batch_size):
                # One batch: the compiled test step directly, without building a
                # data pipeline on every check (the metrics are restored by the caller).
                model.reset_metrics()
                return model.test_on_batch(data[0], data[1], sample_weight, return_dict=True)
            return model.evaluate(
                data[0],
                data[1],
                sample_weight=sample_weight,
                batch_size=self.validation_batch_size,
                **kwargs,
            )
        return model.evaluate(data, **kwargs)

    def _check(self, train_logs: dict, val_logs: dict, iteration: int) -> None:
        values = {}
        for name in self.weights:
            source = val_logs if name.startswith("val_") else train_logs
            if name not in source:
                available = sorted(set(train_logs) | set(val_logs))
                raise KeyError(
                    f"WeightedEarlyStopping: '{name}' is not in the logs; available names: "
                    f"{available}."
                )
            values[name] = source[name]
        score = math.fsum(self.weights[n] * values[n] for n in self.weights)
        epoch = self._epoch + 1
        self.history.append({"iteration": iteration, "epoch": epoch, "score": score, **values})
        if math.isfinite(score) and score < self.best_score - self.min_delta:
            self._new_best(score, epoch, iteration)
        else:
            self.wait += 1
            if self.patience is not None and self.wait >= self.patience:
                self.model.stop_training = True
                self.stopped_epoch = epoch

    def _new_best(self, score: float, epoch: int, iteration: int) -> None:
        self.best_score, self.best_epoch, self.best_iteration = score, epoch, iteration
        self.wait = 0
        self.best_weights = [np.array(w, copy=True) for w in self.model.get_weights()]
        if self.filepath is not None:
            self._save_best()
        if self.verbose:
            print(f"\nIteration {iteration} (epoch {epoch}): new best score {score:.6g}.")

    def _save_best(self) -> None:
        model = self.model
        if self.filepath.endswith(".keras"):
            write_atomically(self.filepath, model.save)
        else:
            write_atomically(self.filepath, model.save_weights)
        _write_json(
            self.filepath + ".json",
            {
                "best_score": self.best_score,
                "best_epoch": self.best_epoch,
                "best_iteration": self.best_iteration,
                "weights": self.weights,
            },
        )

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the model it watched: its scores, history and best weights."""
        return {**self.__dict__, "_model": None}

    def get_config(self) -> dict[str, Any]:
        """Configuration without ``validation_data`` (data is not serialized)."""
        return {
            "weights": dict(self.weights),
            "validation_frequency": self.validation_frequency,
            "patience": self.patience,
            "min_delta": self.min_delta,
            "restore_best_weights": self.restore_best_weights,
            "filepath": self.filepath,
            "verbose": self.verbose,
            "validation_batch_size": self.validation_batch_size,
            "check_at_start": self.check_at_start,
            "check_at_end": self.check_at_end,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> WeightedEarlyStopping:
        return cls(**config)


def _fits_one_batch(x: Any, batch_size: int | None) -> bool:
    """Whether array inputs ``x`` (or a list/dict of arrays) make a single evaluation batch."""
    first = next(iter(x.values())) if isinstance(x, dict) else x
    if isinstance(first, (list, tuple)):
        first = first[0] if first else None
    rows = getattr(first, "shape", (None,))[0] if first is not None else None
    return isinstance(rows, int) and rows <= (batch_size or 32)
