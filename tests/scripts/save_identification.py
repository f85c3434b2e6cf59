"""Identify two tiny models on this process's backend, save them, and write their simulations.

Usage: ``python save_identification.py FOLDER``. For each initial state
(``learned``, ``encoder``) writes ``FOLDER/<state>.kmgu`` and
``FOLDER/<state>.npz`` (``free``: the test record simulated from ``u``
alone; ``given``: from its first 5 measured outputs), for
tests/sysid/files/test_kmgu.py to load on another backend.
"""

import os
import sys

import numpy as np

from keras_mgu import datasets, sysid

folder = sys.argv[1]
data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
tiny = {"units": (4,), "iterations": 4, "steps_per_epoch": 2, "validation_checks": 2}
tiny["model_classes"] = ("network", "linear+network")  # the recurrent network's files
configs = {
    "learned": sysid.RecipeConfig(**tiny),
    "encoder": sysid.RecipeConfig(
        **tiny, initial_state="encoder", n_initial=5, window=40, batch_size=4
    ),
}
u, y = data.test.u, data.test.y
for state, config in configs.items():
    found = sysid.identify(data, config, restarts=1)
    found.save(os.path.join(folder, f"{state}.kmgu"))
    sims = {"free": found.simulate(u), "given": found.simulate(u, y[:5])}
    np.savez(os.path.join(folder, f"{state}.npz"), **sims)
