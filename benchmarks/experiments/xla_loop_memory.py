"""Why numpyro's parallel chains grew by gigabytes: XLA's CPU runtime and two loops at once.

``benchmarks/chain_memory.py`` found numpyro's parallel chains (one ``pmap`` call for the whole
run) growing by about 70 MB a second on 1,000 simulated runs, where one chain after the other
stayed flat. Neither a single-arena glibc malloc (``MALLOC_ARENA_MAX=1``), nor a fixed mmap
threshold, nor jemalloc or tcmalloc stopped it (scratch runs of this session, 2026-11-27), so it is
memory held, not memory fragmented. This script shows it without numpyro or PyMC: one compiled
``lax.fori_loop`` of a gradient step over 200,000 float32 points (the size of 1,000 runs of 200
points), 100,000 iterations per chain, run

- ``one``: one loop alone;
- ``two-devices``: two loops at once, each in its own thread on its own CPU device;
- ``same-device``: two loops at once, both on one device;
- ``pmap``: both loops in one ``jax.pmap`` call over two devices (numpyro's ``"parallel"``);
- ``two-devices-in-calls``: as ``two-devices``, each loop cut into ten calls of 10,000 iterations
  (what ``bayesgrpo.model.nuts`` now does, in calls of ``ITERATIONS_PER_CALL``).

Each mode runs in its own process; resident memory is sampled every 0.5 s.

Usage::

    python benchmarks/experiments/xla_loop_memory.py    # writes results/xla_loop_memory.md
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE / "results" / "xla_loop_memory.md"
MODES = ("one", "two-devices", "same-device", "pmap", "two-devices-in-calls")
ITERATIONS = 100_000
CALLS = 10

CHILD = r"""
import json, os, sys, threading, time
mode, iterations, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp, numpy as np, psutil

process = psutil.Process()
x = np.linspace(0.0, 1.0, 200_000).astype(np.float32)


def loss(theta):
    fit = (theta[2] * x - jnp.tanh(x * theta[0])) ** 2
    return jnp.sum(jnp.log1p(jnp.exp(-theta[0] * x)) * theta[1] + fit)


def step(_, carry):
    theta, total = carry
    gradient = jax.grad(loss)(theta)
    return theta - 1e-6 * gradient, total + jnp.sum(gradient)


def loop(theta, n):
    return jax.lax.fori_loop(0, n, step, (theta, jnp.float32(0.0)))


compiled = jax.jit(loop, static_argnums=1)
devices = jax.local_devices()
samples = []
start = time.perf_counter()
done = threading.Event()


def watch():
    while not done.is_set():
        samples.append(process.memory_info().rss / 2**30)
        time.sleep(0.5)


def chain(device, pieces):
    theta = jax.device_put(jnp.ones(3, jnp.float32), device)
    for _ in range(pieces):
        theta, _ = compiled(theta, iterations // pieces)
        jax.block_until_ready(theta)


compiled(jnp.ones(3, jnp.float32), 1)  # compile before measuring
baseline = process.memory_info().rss / 2**30
threading.Thread(target=watch, daemon=True).start()
if mode == "one":
    chain(devices[0], 1)
elif mode == "pmap":
    jax.block_until_ready(jax.pmap(lambda t: loop(t, iterations))(jnp.ones((2, 3), jnp.float32)))
else:
    targets = {"two-devices": devices[:2], "same-device": [devices[0]] * 2}
    targets["two-devices-in-calls"] = devices[:2]
    pieces = calls if mode == "two-devices-in-calls" else 1
    threads = [threading.Thread(target=chain, args=(d, pieces)) for d in targets[mode]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
wall = time.perf_counter() - start
done.set()
print(json.dumps({"mode": mode, "wall": wall, "baseline_gib": baseline, "peak_gib": max(samples + [baseline]),
                  "end_gib": process.memory_info().rss / 2**30}))
"""


def main() -> None:
    """Run every mode in its own process and write the table."""
    rows = []
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(ITERATIONS), str(CALLS)],
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    lines = [
        "# Memory of compiled JAX loops run at once on CPU devices",
        "",
        f"Command: `python benchmarks/experiments/xla_loop_memory.py`. Host: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}. One gradient step over 200,000 "
        f"float32 points per iteration, {ITERATIONS:,} iterations per loop; resident memory every 0.5 s "
        "after compiling.",
        "",
        "| mode | loops | wall s | GiB before | peak GiB | growth GiB |",
        "|---|---|---|---|---|---|",
    ]
    loops = {"one": 1}
    for r in rows:
        lines.append(
            f"| {r['mode']} | {loops.get(r['mode'], 2)} | {r['wall']:.0f} | {r['baseline_gib']:.2f} "
            f"| {r['peak_gib']:.2f} | {r['peak_gib'] - r['baseline_gib']:.2f} |"
        )
    lines += [
        "",
        "A loop alone holds nothing per iteration. Two loops at once, in one `pmap` or in two threads, "
        f"on two devices or one, grow with every iteration until the call returns; cut into {CALLS} "
        "calls, the same two loops grow by what one call of a tenth of the iterations holds, and no "
        "more. So the memory is held per call while another call runs, and short calls bound it: "
        "`bayesgrpo.model.nuts` samples its parallel chains in calls of `ITERATIONS_PER_CALL` "
        "iterations (`benchmarks/results/chain_memory.md`).",
        "",
    ]
    TABLE.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
