"""keras-mgu: Minimal Gated Unit recurrent layers for Keras 3.

``MGUCell`` is the per-step cell, ``MGU`` the sequence layer with a fused
fast path per backend (TensorFlow, JAX, PyTorch), ``Ensemble`` ``K``
independent copies of a layer trained at once. The submodules
``callbacks``, ``derivatives``, ``datasets``, ``sysid``, ``plotting`` and
``native`` hold the training callbacks, derivative-target training,
system-identification data, the identification recipe, training plots and the
MGU's time loop in compiled C++.
"""

from keras_mgu import callbacks, datasets, derivatives, native, plotting, sysid
from keras_mgu._version import __version__
from keras_mgu.cell import MGUCell
from keras_mgu.derivatives import DerivativeTargetModel, input_gradient
from keras_mgu.ensemble import Ensemble
from keras_mgu.fused import FusedCell, FusedRNN
from keras_mgu.layer import MGU

__all__ = [
    "MGU",
    "DerivativeTargetModel",
    "Ensemble",
    "FusedCell",
    "FusedRNN",
    "MGUCell",
    "__version__",
    "callbacks",
    "datasets",
    "derivatives",
    "input_gradient",
    "native",
    "plotting",
    "sysid",
]
