"""The cost of one gradient of the bundled-runs model inside compiled JAX, by CPU device count.

numpyro runs NUTS inside one compiled loop, so the gradient's cost there (not from Python) is what
a fit pays per leapfrog step. JAX splits its CPU thread pool over the devices
``--xla_force_host_platform_device_count`` asks for: PyMC's JAX module asks for 100,
``bayesgrpo.model.sampling.use_cores_for_chains`` for one per chain. Each count is measured in its
own process (the flag is read once, when JAX starts): 1,000 gradients in a ``fori_loop``, best of 5.

Usage::

    python benchmarks/jax_devices.py                 # 1, 2 and 100 devices
    python benchmarks/jax_devices.py --devices 2 100

Writes ``results/jax_devices.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import time, warnings
warnings.simplefilter("ignore")
import jax
from pymc.sampling.jax import get_jaxified_logp
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
model = RewardModel().build(load_bundled(warn=False))
logp = get_jaxified_logp(model)
point = model.initial_point()
x = [jax.numpy.asarray(point[v.name]) for v in model.value_vars]
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
    """Measure each device count in a fresh process and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 100])
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
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        devices, micros = out.stdout.split()
        rows.append((count, int(devices), float(micros)))
        print(rows[-1], flush=True)
    lines = [
        "# One gradient inside compiled JAX, by CPU device count",
        "",
        f"Command: `python benchmarks/jax_devices.py --devices {' '.join(map(str, args.devices))}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        "Bundled runs, default model; best of 5 loops of 1,000 gradients.",
        "",
        "| devices asked | devices JAX has | us per gradient |",
        "|---|---|---|",
        *(f"| {asked} | {have} | {micros:.0f} |" for asked, have, micros in rows),
        "",
    ]
    (HERE / "results" / "jax_devices.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
