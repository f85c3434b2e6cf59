"""Training callbacks for recurrent system-identification runs.

* :mod:`~keras_mgu.callbacks.decay`: ``LearningRateDecayPoints`` multiplies the
  learning rate by a constant factor at fixed fractions of the run.
* :mod:`~keras_mgu.callbacks.early_stopping`: ``WeightedEarlyStopping`` scores
  the model every N training batches (or at each epoch end) with a weighted sum
  of logged metrics, keeps the best weights, optionally stops early and
  checkpoints the best model atomically.
* :mod:`~keras_mgu.callbacks.budget`: ``TimeBudget`` ends ``fit`` within a
  wall-time budget and shortens a ``LearningRateDecayPoints`` schedule with it.
* :mod:`~keras_mgu.callbacks.population`: ``PopulationEarlyStopping`` gives
  each branch of a model that trains several runs at once its own
  ``WeightedEarlyStopping``.
* :mod:`~keras_mgu.callbacks.progress`: ``TerminalProgress`` rewrites one line
  with the iterations done as a run trains, on a terminal.

All work on the TensorFlow, JAX and PyTorch backends.
"""

from keras_mgu.callbacks.budget import TimeBudget
from keras_mgu.callbacks.decay import LearningRateDecayPoints, decay_epochs, decay_iterations
from keras_mgu.callbacks.early_stopping import SAVE_SUFFIXES, WeightedEarlyStopping
from keras_mgu.callbacks.population import PopulationEarlyStopping
from keras_mgu.callbacks.progress import TerminalProgress

__all__ = [
    "SAVE_SUFFIXES",
    "LearningRateDecayPoints",
    "PopulationEarlyStopping",
    "TerminalProgress",
    "TimeBudget",
    "WeightedEarlyStopping",
    "decay_epochs",
    "decay_iterations",
]
