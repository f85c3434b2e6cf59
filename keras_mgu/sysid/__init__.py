"""System identification with MGU simulation models, as a library.

The rooms, from the top floor down (each uses only those below it):

* :mod:`~keras_mgu.sysid.tuning`: :func:`tune`, sweeps of the recipe's
  settings with KerasTuner (each trial one :func:`identify`);
  :mod:`~keras_mgu.sysid.timing`: :func:`estimate_training`, how long the
  recipe will train, from a few timed steps.
* :mod:`~keras_mgu.sysid.recipe`: :func:`identify`, the recipe.
* :mod:`~keras_mgu.sysid.choice`: the candidate classes and their settings
  (``candidates``), their restarts trained and scored on validation
  (``restarts``), the best run or an ensemble (``selection``,
  :func:`greedy_ensemble`), the capacity screening (``capacity``) and the
  recipe's printed report (``report``).
* :mod:`~keras_mgu.sysid.identification`: :class:`Identification`, the
  result: simulation, k-step prediction and their band; :func:`load`.
* :mod:`~keras_mgu.sysid.files`: the ``.kmgu`` model file (``kmgu``) and the
  standalone simulator for export (``standalone``, ``onnx_export``).
* :mod:`~keras_mgu.sysid.judging`: the k-step prediction (``prediction``,
  ``noise_model``), the band (``band``, :class:`Band`), :func:`score`,
  :func:`rmse` and :func:`fit_percent` (``scoring``),
  :func:`residual_analysis` and :func:`evaluate`.
* :mod:`~keras_mgu.sysid.training`: one run of a network class
  (``run``, :func:`train_simulator` on :class:`TrainingWindows`) or of a lag
  class (``lag_run``), both on one trainer (``trainer``), and several runs at once
  (``population``, :func:`train_population`; ``grouped``).
* :mod:`~keras_mgu.sysid.models`: the model classes: the network
  (``network``, :func:`build_simulator`), the ARX model (``arx``,
  :class:`LinearModel`), NARX, the loop and the linear class (``narx``,
  ``loop``, ``output_error`` on ``loop_cell``), the signal path
  (:class:`SignalPath`) and the state of a new experiment (``state``,
  :func:`fit_initial_state`).
* :mod:`~keras_mgu.sysid.config`: :class:`RecipeConfig` and the rules that
  derive its open settings from the record.

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

from keras_mgu.sysid.choice.candidates import Structure, structures
from keras_mgu.sysid.choice.selection import SELECTION_RULES, greedy_ensemble
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.files.kmgu import ModelFileError
from keras_mgu.sysid.files.onnx_export import export_simulator
from keras_mgu.sysid.files.standalone import standalone_simulator
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
from keras_mgu.sysid.recipe import identify
from keras_mgu.sysid.timing import TrainingEstimate, estimate_training
from keras_mgu.sysid.training.population import PlannedRun, population_groups, train_population
from keras_mgu.sysid.training.run import RunResult, train_simulator
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
    "export_simulator",
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
    "standalone_simulator",
    "structures",
    "train_population",
    "train_simulator",
    "tune",
]
