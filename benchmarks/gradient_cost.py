"""Cost of one log-density + gradient evaluation of the bundled-runs model, per PyTensor backend.

Usage::

    python benchmarks/gradient_cost.py FAST_RUN     # PyTensor's C backend (PyMC's default NUTS)
    python benchmarks/gradient_cost.py NUMBA        # what nutpie's numba backend compiles
    python benchmarks/gradient_cost.py JAX          # what nutpie's jax backend and numpyro use

Prints the compile time and the mean microseconds per call over 3000 calls (from Python, so
each includes the call overhead).
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel


def main() -> None:
    """Time one log-density and gradient evaluation on the backend named on the command line."""
    mode = sys.argv[1] if len(sys.argv) > 1 else "FAST_RUN"
    warnings.simplefilter("ignore")
    model = RewardModel().build(load_bundled(warn=False))
    point = model.initial_point()
    array = np.concatenate([np.ravel(point[v.name]) for v in model.value_vars])
    start = time.perf_counter()
    function = model.logp_dlogp_function(mode=mode, ravel_inputs=True)
    function.set_extra_values({})
    function(array)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(3000):
        function(array)
    per_call = (time.perf_counter() - start) / 3000 * 1e6
    print(
        f"{mode}: compile {compile_seconds:.1f} s, {per_call:.0f} us per logp+gradient, {array.size} "
        "parameters"
    )


if __name__ == "__main__":
    main()
