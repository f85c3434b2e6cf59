"""keras-mgu: Minimal Gated Unit recurrent layers for Keras 3.

``MGUCell`` is the per-step cell, ``MGU`` the sequence layer with a fused
fast path per backend (TensorFlow, JAX, PyTorch). The submodules
``callbacks``, ``derivatives``, ``datasets``, ``sysid`` and ``plotting`` hold
the training callbacks, derivative-target training, system-identification
data, the identification recipe and training plots.
"""

from keras_mgu import callbacks, datasets, derivatives, plotting, sysid
from keras_mgu.cell import MGUCell
from keras_mgu.derivatives import DerivativeTargetModel, input_gradient
from keras_mgu.fused import FusedCell, FusedRNN
from keras_mgu.layer import MGU

__version__ = "0.1.0.dev0"

__all__ = [
    "MGU",
    "DerivativeTargetModel",
    "FusedCell",
    "FusedRNN",
    "MGUCell",
    "__version__",
    "callbacks",
    "datasets",
    "derivatives",
    "input_gradient",
    "plotting",
    "sysid",
]
