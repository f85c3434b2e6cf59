"""Fused sequence loops for any user-written recurrent cell.

:class:`FusedCell` splits a cell into ``project_inputs`` (run once on the
whole sequence) and ``step`` (run per time step); :class:`FusedRNN` runs it in
a compiled loop per backend (:mod:`keras_mgu.fused.engines`) with a backward
pass through time derived from ``step``.
"""

from keras_mgu.fused.cell import FusedCell
from keras_mgu.fused.layer import FusedRNN

__all__ = ["FusedCell", "FusedRNN"]
