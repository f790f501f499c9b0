"""The cost of one gradient of the bundled-runs model inside compiled JAX, by CPU device count and precision.

numpyro runs NUTS inside one compiled loop, so the gradient's cost there (not from Python) is what
a fit pays per leapfrog step. JAX splits its CPU thread pool over the devices
``--xla_force_host_platform_device_count`` asks for: PyMC's JAX module asks for 100,
``bayesgrpo.model.sampling.use_cores_for_chains`` for one per chain. Each count is measured in its
own process (the flag is read once, when JAX starts): 1,000 gradients in a ``fori_loop``, best of 5.
``--precisions float64 float32`` measures each count in both: in single precision the float64
constants of PyMC's graph are taken as float32, as ``bayesgrpo.model.nuts`` samples it.

Usage::

    python benchmarks/jax_devices.py                 # 1, 2 and 100 devices, float64
    python benchmarks/jax_devices.py --devices 1 2 --precisions float64 float32

Writes ``results/jax_devices.md``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from _markdown import machine_line

HERE = Path(__file__).resolve().parent

CHILD = r"""
import sys, time, warnings
warnings.simplefilter("ignore")
import jax
import numpy as np
from pymc.sampling.jax import get_jaxified_logp
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
model = RewardModel().build(load_bundled(warn=False))
logp = get_jaxified_logp(model)
point = model.initial_point()
single = sys.argv[1] == "float32"
jax.config.update("jax_enable_x64", not single)
x = [jax.numpy.asarray(point[v.name], dtype=np.float32 if single else np.float64) for v in model.value_vars]
grad = jax.grad(logp)

@jax.jit
def loop(x):
    def body(i, c):
        return [ci + 1e-9 * gi for ci, gi in zip(c, grad(c), strict=True)]
    return jax.lax.fori_loop(0, 1000, body, x)

jax.block_until_ready(loop(x))
best = float("inf")
for _ in range(5):
    start = time.perf_counter()
    jax.block_until_ready(loop(x))
    best = min(best, (time.perf_counter() - start) / 1000 * 1e6)
print(jax.local_device_count(), best)
"""


def main() -> None:
    """Measure each device count and precision in a fresh process and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 100])
    parser.add_argument("--precisions", nargs="+", default=["float64"], choices=["float64", "float32"])
    args = parser.parse_args()
    rows = []
    for count in args.devices:
        # set after PyMC's import too: its module prepends =100 and XLA takes the last flag
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={count}")
        code = CHILD.replace(
            "import jax\n", f"import jax, os\nos.environ['XLA_FLAGS'] = '{env['XLA_FLAGS']}'\n", 1
        ).replace(
            "from pymc.sampling.jax import get_jaxified_logp\n",
            "from pymc.sampling.jax import get_jaxified_logp\n"
            f"os.environ['XLA_FLAGS'] += ' --xla_force_host_platform_device_count={count}'\n",
        )
        for precision in args.precisions:
            out = subprocess.run(
                [sys.executable, "-c", code, precision], env=env, capture_output=True, text=True, check=True
            )
            devices, micros = out.stdout.split()
            rows.append((count, int(devices), precision, float(micros)))
            print(rows[-1], flush=True)
    lines = [
        "# One gradient inside compiled JAX, by CPU device count and precision",
        "",
        f"Command: `python benchmarks/jax_devices.py --devices {' '.join(map(str, args.devices))} "
        f"--precisions {' '.join(args.precisions)}`  ",
        f"Machine: {machine_line()}. Bundled runs, default model; best of 5 loops of 1,000 gradients.",
        "",
        "| devices asked | devices JAX has | precision | us per gradient |",
        "|---|---|---|---|",
        *(f"| {asked} | {have} | {precision} | {micros:.0f} |" for asked, have, precision, micros in rows),
        "",
    ]
    (HERE / "results" / "jax_devices.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
