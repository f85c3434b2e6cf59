"""System identification with MGU simulation models, as a library.

* :mod:`~keras_mgu.sysid.models.network`: :func:`build_simulator` and the
  :class:`LearnedInitialState` layer.
* :mod:`~keras_mgu.sysid.training.windows`: :class:`TrainingWindows`, the training
  batches cut from an estimation record.
* :mod:`~keras_mgu.sysid.config`: :class:`RecipeConfig` and the rules that
  derive its open settings from the record.
* :mod:`~keras_mgu.sysid.models.arx`: :class:`LinearModel`, the ARX model fitted
  first, and :func:`select_linear_model`.
* :mod:`~keras_mgu.sysid.training.run`: :func:`train_simulator`, one run.
* :mod:`~keras_mgu.sysid.timing`: :func:`estimate_training`, how long the
  recipe will train a model, from a few timed steps.
* :mod:`~keras_mgu.sysid.recipe`: :func:`identify` (restarts of both
  structures, the choice on validation).
* :mod:`~keras_mgu.sysid.choice.selection`: choosing among the runs on validation,
  the best run or an average of runs (:func:`greedy_ensemble`).
* :mod:`~keras_mgu.sysid.training.population`: :func:`train_population`, several
  runs trained at once in one model.
* :mod:`~keras_mgu.sysid.tuning.search`: :func:`tune`, searches of the recipe's
  settings with KerasTuner, locally and across machines.
* :mod:`~keras_mgu.sysid.identification`: :class:`Identification`, the
  result: simulation from a learned or estimated initial state; its
  :meth:`~Identification.save` and :func:`load`.
* :mod:`~keras_mgu.sysid.models.signals`: :class:`SignalPath`, physical signals to
  the network's and back (standardisation, the linear model's residual).
* :mod:`~keras_mgu.sysid.files.kmgu`: the model file's format (``.kmgu``),
  written and read for :meth:`Identification.save` and :func:`load`.
* :mod:`~keras_mgu.sysid.models.state`: the state of a new experiment from its first
  measured samples.
* :mod:`~keras_mgu.sysid.judging.prediction`: one run's simulation and its k-step-ahead
  prediction (:meth:`Identification.predict`).
* :mod:`~keras_mgu.sysid.judging.scoring`: :func:`score` and :func:`rmse` under the
  ``"all"`` and ``"benchmark"`` conventions, and :func:`fit_percent`.
* :mod:`~keras_mgu.sysid.judging.evaluation`: :func:`evaluate`, a model judged on a
  measured experiment (simulation, k-step prediction, fit %, residuals).
* :mod:`~keras_mgu.sysid.judging.residuals`: :func:`residual_analysis`, the residual's
  autocorrelation and cross-correlation with the inputs, with their band.
* :mod:`~keras_mgu.sysid.models.loop_cell`: ``ArxLoopCell``, an ARX model whose loop
  carries a nonlinear branch that starts at zero, and ``lag_simulator``.
* :mod:`~keras_mgu.sysid.models.narx` and :mod:`~keras_mgu.sysid.models.loop`: the NARX
  and linear-loop model classes built on it.
* :mod:`~keras_mgu.sysid.training.lag_trainer`: training on short windows started
  from measured outputs; :mod:`~keras_mgu.sysid.training.lag_run`: their settings
  and one run in the recipe (``RecipeConfig(model_classes=...)``).
* :mod:`~keras_mgu.sysid.judging.noise_model`: the autoregression of a network
  class's simulation residual that its k-step prediction adds;
  :mod:`~keras_mgu.sysid.judging.band`: the band around every simulation and
  prediction, calibrated on the validation record.

Example::

    from keras_mgu import datasets, sysid

    data = datasets.simulate_cascaded_tanks(seed=0)
    result = sysid.identify(data, restarts=3)
    y_sim = result.simulate(data.test.u, y_initial=data.test.y[:5])
    print(result.score(data.test), result.score(data.test, "benchmark"))
    y_5 = result.predict(data.test.u, data.test.y, steps_ahead=5)  # 5-step-ahead
    y, lower, upper = result.simulate(data.test.u, data.test.y[:5], band=0.95)
    print(sysid.fit_percent(data.test.y, y_sim))
"""

from keras_mgu.sysid.choice.selection import SELECTION_RULES, greedy_ensemble
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.files.kmgu import ModelFileError
from keras_mgu.sysid.identification import Identification, load
from keras_mgu.sysid.judging.band import Band, Trajectory, calibrate_band
from keras_mgu.sysid.judging.evaluation import Evaluation, evaluate
from keras_mgu.sysid.judging.noise_model import NoiseModel, fit_noise_model
from keras_mgu.sysid.judging.residuals import ResidualAnalysis, residual_analysis
from keras_mgu.sysid.judging.scoring import CONVENTIONS, fit_percent, rmse, score
from keras_mgu.sysid.models.arx import LinearModel, select_linear_model
from keras_mgu.sysid.models.network import LearnedInitialState, build_simulator
from keras_mgu.sysid.models.signals import SignalPath
from keras_mgu.sysid.models.state import fit_initial_state
from keras_mgu.sysid.choice.candidates import Structure, structures
from keras_mgu.sysid.recipe import identify
from keras_mgu.sysid.training.run import RunResult, train_simulator
from keras_mgu.sysid.timing import TrainingEstimate, estimate_training
from keras_mgu.sysid.training.population import PlannedRun, population_groups, train_population
from keras_mgu.sysid.training.windows import TrainingWindows
from keras_mgu.sysid.tuning.search import DEFAULT_SPACE, TuneResult, check_space, tune

__all__ = [
    "Band",
    "CONVENTIONS",
    "DEFAULT_SPACE",
    "Evaluation",
    "Identification",
    "LearnedInitialState",
    "LinearModel",
    "ModelFileError",
    "NoiseModel",
    "PlannedRun",
    "RecipeConfig",
    "ResidualAnalysis",
    "RunResult",
    "SELECTION_RULES",
    "SignalPath",
    "Structure",
    "TrainingEstimate",
    "Trajectory",
    "TrainingWindows",
    "TuneResult",
    "build_simulator",
    "calibrate_band",
    "check_space",
    "estimate_training",
    "evaluate",
    "fit_initial_state",
    "fit_noise_model",
    "fit_percent",
    "greedy_ensemble",
    "identify",
    "load",
    "population_groups",
    "residual_analysis",
    "rmse",
    "score",
    "select_linear_model",
    "structures",
    "train_population",
    "train_simulator",
    "tune",
]
