"""Check subnet.py's test score against a step-by-step simulation (run in the peers' environment).

``subnet.simulated_rmse`` scores through deepSI's ``SUBNET.simulate``; here an
untrained SUBNET is stepped one sample at a time from the raw test arrays
(encoder on the ``max(na, nb)`` samples before ``n``, then ``y = h(x)``,
``x = f(x, u)``) and the two RMSEs over samples ``n`` onward must agree to
float32 round-off. Exits 1 when they do not.

Usage (from the checkout's root)::

    PYTHONPATH=$PWD peers-venv/bin/python benchmarks/peers/check_subnet.py
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import subnet  # noqa: E402


def stepwise_rmse(model, u, y, n: int) -> float:
    """RMSE over samples ``n`` onward of a sample-by-sample simulation; ``u``, ``y``: ``(N,)``."""
    import numpy as np
    import torch

    u_t, y_t = (torch.tensor(a, dtype=torch.float32) for a in (u, y))
    outputs = []
    with torch.no_grad():
        x = model.encoder(u_t[n - model.nb : n][None], y_t[n - model.na : n][None])
        for k in range(n, len(u)):
            outputs.append(float(model.h(x)[0]))
            x = model.f(x, u_t[k : k + 1])
    return float(np.sqrt(np.mean((y[n:] - np.array(outputs)) ** 2)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=subnet.DEFAULT_ROOT)
    args = parser.parse_args(argv)
    import deepSI
    import torch

    from keras_mgu import datasets

    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = datasets.load_benchmark("cascaded_tanks", os.path.join(args.data_root, "cascaded_tanks"))
    est, test = subnet.as_deepsi(data.estimation, "est"), subnet.as_deepsi(data.test, "test")
    nu, ny, norm = deepSI.get_nu_ny_and_auto_norm(est)
    model = deepSI.SUBNET(nu, ny, norm, nx=10, na=20, nb=20)
    n = data.protocol.n_initial
    got = subnet.simulated_rmse(model, test, n)
    reference = stepwise_rmse(model, data.test.u[:, 0], data.test.y[:, 0], n)
    ok = abs(got - reference) <= 1e-5 * reference
    print(f"simulated_rmse {got:.9g}, step by step {reference:.9g}: {'ok' if ok else 'DIFFER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
