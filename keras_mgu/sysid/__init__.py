"""System identification with MGU simulation models, as a library.

* :mod:`~keras_mgu.sysid.model`: :func:`build_simulator` and the
  :class:`LearnedInitialState` layer.
* :mod:`~keras_mgu.sysid.windows`: :class:`TrainingWindows`, the training
  batches cut from an estimation record.
* :mod:`~keras_mgu.sysid.recipe`: :func:`identify` (restarts, selection on
  validation), :func:`train_simulator` (one run) and :class:`RecipeConfig`.
* :mod:`~keras_mgu.sysid.scoring`: :func:`score` and :func:`rmse` under the
  ``"all"`` and ``"benchmark"`` conventions.

Example::

    from keras_mgu import datasets, sysid

    data = datasets.simulate_cascaded_tanks(seed=0)
    result = sysid.identify(data, restarts=3)
    print(result.score(data.test), result.score(data.test, "benchmark"))
"""

from keras_mgu.sysid.model import LearnedInitialState, build_simulator
from keras_mgu.sysid.recipe import (
    Identification,
    RecipeConfig,
    RunResult,
    identify,
    train_simulator,
)
from keras_mgu.sysid.scoring import CONVENTIONS, rmse, score
from keras_mgu.sysid.windows import TrainingWindows

__all__ = [
    "CONVENTIONS",
    "Identification",
    "LearnedInitialState",
    "RecipeConfig",
    "RunResult",
    "TrainingWindows",
    "build_simulator",
    "identify",
    "rmse",
    "score",
    "train_simulator",
]
