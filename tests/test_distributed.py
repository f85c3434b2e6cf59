"""Data-parallel training over 2 CPU devices equals training on one device.

TensorFlow: ``tf.distribute.MirroredStrategy`` over 2 logical CPU devices.
JAX: ``keras.distribution.DataParallel`` over 2 host devices. Each needs its
device setup before the framework initializes, so the training runs in
``tests/scripts/distributed_train.py`` in a subprocess; each test runs only in
its backend's test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_mgu import MGU
from tests.helpers import BACKEND

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "distributed_train.py")


def run_script() -> dict:
    env = dict(os.environ, KERAS_BACKEND=BACKEND, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, SCRIPT], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_same_training(result: dict) -> None:
    assert result["devices"] == 2
    assert result["weights_moved"] > 1e-3  # training did change the weights
    assert result["max_weight_difference"] < 1e-5
    np.testing.assert_allclose(
        result["distributed_learning_rates"], result["single_learning_rates"], rtol=1e-7
    )
    # LearningRateDecayPoints([0.5, 0.75], 0.5) over 4 epochs: decays at epochs 2 and 3.
    np.testing.assert_allclose(
        result["single_learning_rates"], [0.02, 0.01, 0.005, 0.005], rtol=1e-6
    )
    assert result["distributed_checks"] == result["single_checks"] == 7  # iterations 1,2,4,..,12
    np.testing.assert_allclose(
        result["distributed_best_score"], result["single_best_score"], rtol=1e-5
    )
    if MGU(4).uses_fused_path:
        assert result["distributed_uses_fused_path"]
        assert result["distributed_fused_calls"] > 0 and result["single_fused_calls"] > 0


@pytest.mark.skipif(BACKEND != "tensorflow", reason="MirroredStrategy runs on TensorFlow only")
def test_mirrored_strategy_two_cpus_equals_one_device():
    check_same_training(run_script())


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution.DataParallel test runs on JAX")
def test_jax_data_parallel_two_host_devices_equals_one_device():
    check_same_training(run_script())
