"""keras-mgu: Minimal Gated Unit recurrent layers for Keras 3.

``MGUCell`` is the per-step cell, ``MGU`` the sequence layer with a fused
fast path per backend (TensorFlow, JAX, PyTorch).
"""

from keras_mgu.cell import MGUCell
from keras_mgu.layer import MGU

__version__ = "0.1.0.dev0"

__all__ = ["MGU", "MGUCell", "__version__"]
