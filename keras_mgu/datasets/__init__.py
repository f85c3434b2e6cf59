"""System-identification data: records, a cascaded-tanks simulator and loaders.

Everything here is plain NumPy (no backend code), so the arrays can be fed to
any Keras backend. Only :class:`Normalizer` and :func:`make_windows` import
Keras, on first use, so reading and checking data files does not load a
backend.

* :class:`Record`: one input/output experiment, ``u`` ``(N, n_inputs)`` and
  ``y`` ``(N, n_outputs)`` sampled every ``ts`` seconds; :class:`SysIdData`
  groups the estimation, validation and test records.
* :func:`simulate_cascaded_tanks`: a simulated two-tank plant resembling the
  public Cascaded Tanks benchmark (equations in its docstring and in
  :class:`TankParameters`).
* :func:`zoo_plant`, :data:`ZOO`: a zoo of simulated plants (Duffing,
  Bouc-Wen, Wiener-Hammerstein, two-mass drive with friction, overflowing
  tanks, a hardening oscillator, a pendulum, a Van der Pol oscillator, a
  heated tank with dead time) with a
  test record within and one beyond the estimation input's range, as a
  :class:`ZooPlant`.
* :func:`load_record`: your own data from a ``.csv``/``.txt`` (any common
  delimiter, with or without a header), ``.mat`` or ``.npz`` file;
  :func:`join_experiments` puts several experiments into one record.
* :func:`load_csv_records`, :func:`load_cascaded_tanks`, :func:`load_wh2009`,
  :func:`load_emps`, :func:`load_benchmark`, :func:`load_nonlinear_benchmark`:
  readers for measured data.
* :class:`Protocol`, :data:`PROTOCOLS`, :func:`get_protocol`: how each public
  benchmark is split and scored (``n_initial``, unit of the published score).
* :class:`Normalizer`: per-channel standardisation fitted on estimation data.
* :func:`make_windows`: paired ``(u, y)`` training windows from a long record.

Import these names from ``keras_mgu.datasets``; the modules they live in:

* ``records``: :class:`Record`, :class:`SysIdData`, :func:`join_experiments`
  and their input checks.
* ``protocols``: :class:`Protocol`, :data:`PROTOCOLS` and :func:`get_protocol`.
* ``simulator``: :class:`TankParameters`, :func:`simulate_tank_levels`,
  :func:`simulate_cascaded_tanks` and the multisine/steps excitations.
* ``plants``: the zoo's plants, their parameters and noise-free simulators
  (:class:`DuffingParameters`, :func:`simulate_duffing`, ...).
* ``process_plants``: the heated tank with dead time
  (:class:`HeatedTankParameters`, :func:`simulate_heated_tank`).
* ``zoo``: :data:`ZOO`, :class:`ZooPlant` and :func:`zoo_plant`.
* ``loaders``: :func:`load_record`, by suffix, and :func:`load_csv_records`,
  over ``tables`` (column selection and checks), ``text_files`` (delimited
  text; also the benchmarks' files) and ``array_files`` (``.mat``, ``.npz``).
* ``benchmarks``: :func:`load_cascaded_tanks`, :func:`load_wh2009`,
  :func:`load_emps`, :func:`load_benchmark` and
  :func:`load_nonlinear_benchmark`.
* ``preprocessing``: :class:`Normalizer` and :func:`make_windows`.
"""

# CASCADED_TANKS_FILE stays importable from here but, as before, outside ``__all__``.
from keras_mgu.datasets.benchmarks import (
    CASCADED_TANKS_FILE as CASCADED_TANKS_FILE,
)
from keras_mgu.datasets.benchmarks import (
    load_benchmark,
    load_cascaded_tanks,
    load_emps,
    load_nonlinear_benchmark,
    load_wh2009,
)
from keras_mgu.datasets.loaders import load_csv_records, load_record
from keras_mgu.datasets.plants import (
    BoucWenParameters,
    DuffingParameters,
    PendulumParameters,
    TwoMassParameters,
    VanDerPolParameters,
    WienerHammersteinParameters,
    simulate_bouc_wen,
    simulate_duffing,
    simulate_pendulum,
    simulate_two_mass_drive,
    simulate_van_der_pol,
    simulate_wiener_hammerstein,
)
from keras_mgu.datasets.process_plants import HeatedTankParameters, simulate_heated_tank
from keras_mgu.datasets.protocols import (
    NONLINEAR_BENCHMARKS_VERSION,
    PROTOCOLS,
    Protocol,
    get_protocol,
)
from keras_mgu.datasets.records import Record, SysIdData, join_experiments
from keras_mgu.datasets.simulator import (
    TankParameters,
    simulate_cascaded_tanks,
    simulate_tank_levels,
)
from keras_mgu.datasets.zoo import ZOO, ZooPlant, zoo_plant

__all__ = [
    "NONLINEAR_BENCHMARKS_VERSION",
    "PROTOCOLS",
    "ZOO",
    "BoucWenParameters",
    "DuffingParameters",
    "HeatedTankParameters",
    "Normalizer",
    "PendulumParameters",
    "Protocol",
    "Record",
    "SysIdData",
    "TankParameters",
    "TwoMassParameters",
    "VanDerPolParameters",
    "WienerHammersteinParameters",
    "ZooPlant",
    "get_protocol",
    "join_experiments",
    "load_benchmark",
    "load_cascaded_tanks",
    "load_csv_records",
    "load_emps",
    "load_nonlinear_benchmark",
    "load_record",
    "load_wh2009",
    "make_windows",
    "simulate_bouc_wen",
    "simulate_cascaded_tanks",
    "simulate_duffing",
    "simulate_heated_tank",
    "simulate_pendulum",
    "simulate_tank_levels",
    "simulate_two_mass_drive",
    "simulate_van_der_pol",
    "simulate_wiener_hammerstein",
    "zoo_plant",
]

#: Names whose module imports Keras: loaded on first use (PEP 562).
_KERAS_NAMES = {"Normalizer", "make_windows"}


def __getattr__(name: str):
    if name in _KERAS_NAMES:
        from keras_mgu.datasets import preprocessing

        return getattr(preprocessing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
