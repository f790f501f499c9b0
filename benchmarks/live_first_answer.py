"""The first live answer in a fresh process: what a user waits for on the first call.

Each repeat starts a new Python process that reads one bundled run (not timed), then times, in
order: the imports the live path needs (``bayesgrpo.questions.live``, ``bayesgrpo.model.datasets``),
``bundled_population()`` (reading the shipped population), ``LiveForecaster(...)``, the first
``update`` and a second one. A second series times the whole command ``bayesgrpo stop RUN.csv
--horizon H`` from process start to exit. A third reads the same population from a copy of its
netCDF file without the live summary beside it (``bundled_population(path)``), as a population
saved without one is read.

Usage::

    python benchmarks/live_first_answer.py --repeats 5   # writes results/live_first_answer.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table

RESULTS = HERE / "results"
RUN = "nb_unslothai_notebooks_Qwen3_4B_GRPO_bac83a2_n312"
CUT = 0.5

CHILD = """
import json, sys, time
import bayesgrpo
from bayesgrpo.logs.readers import load_runs
run = load_runs(sys.argv[1], warn=False)
t0 = time.perf_counter()
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.model.datasets import bundled_population
t1 = time.perf_counter()
population = bundled_population(sys.argv[3] if len(sys.argv) > 3 else None)
t2 = time.perf_counter()
live = LiveForecaster(population, random_seed=1)
update = live.update(run, horizon=float(sys.argv[2]))
t3 = time.perf_counter()
answered_at = time.time()
live.update(run, horizon=float(sys.argv[2]) + 1)
t4 = time.perf_counter()
HEAVY = ("pymc", "pytensor", "arviz", "jax", "numpyro", "scipy", "emcee", "xarray", "h5py")
heavy = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps({"imports": t1 - t0, "load": t2 - t1, "first_update": t3 - t2, "second_update": t4 - t3,
                  "first_answer": t3 - t0, "answered_at": answered_at,
                  "method": update.method, "heavy": heavy}))
"""


def write_run(folder: Path) -> tuple[Path, float]:
    """The run's first half as a plain ``step,reward`` CSV (a user's log), and its horizon."""
    from bayesgrpo.model.datasets import load_bundled

    points = load_bundled(warn=False).run(RUN)
    horizon = float(points["step"].max())
    half = points[points["step"] <= CUT * horizon][["step", "reward"]]
    path = folder / "run.csv"
    half.to_csv(path, index=False)
    return path, horizon


def child(path: Path, horizon: float, env: dict[str, str], cwd: str, population: Path | None = None) -> dict:
    """One fresh process's times (``CHILD``), reading ``population`` (default: the shipped one)."""
    command = [sys.executable, "-c", CHILD, str(path), str(horizon)]
    if population is not None:
        command.append(str(population))
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env, cwd=cwd)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Time fresh processes and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows, commands, whole_file = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        path, horizon = write_run(Path(tmp))
        from bayesgrpo.model.datasets import POPULATION_FILE

        alone = Path(tmp) / "population_alone.nc"  # no live summary beside it
        shutil.copy(POPULATION_FILE, alone)
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        for _ in range(args.repeats):
            launched = time.time()
            row = child(path, horizon, env, tmp)
            row["from_process_start"] = row.pop("answered_at") - launched
            rows.append(row)
            start = time.perf_counter()
            subprocess.run(
                ["bayesgrpo", "stop", str(path), "--horizon", str(horizon), "-q"],
                capture_output=True,
                check=True,
                env=env,
                cwd=tmp,
            )
            commands.append(time.perf_counter() - start)
            whole_file.append(child(path, horizon, env, tmp, alone))
    frame = pd.DataFrame(rows)
    timed = ["imports", "load", "first_update", "second_update", "first_answer", "from_process_start"]
    summary = pd.DataFrame(
        {
            "part": timed + ["`bayesgrpo stop run.csv` (whole process)"],
            "median_s": [float(frame[c].median()) for c in timed] + [float(np.median(commands))],
            "slowest_s": [float(frame[c].max()) for c in timed] + [float(np.max(commands))],
        }
    )
    alone_frame = pd.DataFrame(whole_file)
    alone_parts = ["imports", "load", "first_update", "first_answer"]
    alone_summary = pd.DataFrame(
        {
            "part": alone_parts,
            "median_s": [float(alone_frame[c].median()) for c in alone_parts],
            "slowest_s": [float(alone_frame[c].max()) for c in alone_parts],
        }
    )
    lines = [
        "# The first live answer in a fresh process",
        "",
        f"Command: `python benchmarks/live_first_answer.py --repeats {args.repeats}`  ",
        f"Machine: {machine_line()}. Run: the first half of `{RUN}` as a plain "
        "`step,reward` CSV (no metadata), horizon its last step.",
        "",
        "Each repeat is a new process: after `import bayesgrpo` and reading the run, `imports` is the "
        "import of the live path (`bayesgrpo.questions.live`, `bayesgrpo.model.datasets`), `load` is "
        "`bundled_population()`, `first_update` is `LiveForecaster(...)` and its first `update`, "
        "`first_answer` is all three (the live-path issue's target: <= 0.5 s), and `from_process_start` "
        "the same answer timed from launching the process (interpreter, `import bayesgrpo`, reading the "
        "CSV included). The last row is the whole command from process start to exit.",
        "",
        markdown_table(summary),
        "",
        f"Path that answered: {', '.join(sorted(set(frame['method'])))}. Heavy modules loaded by the time "
        f"of the answer: {', '.join(sorted({m for row in rows for m in row['heavy']})) or 'none'} (of PyMC, "
        "PyTensor, ArviZ, JAX, numpyro, SciPy, emcee, xarray, h5py).",
        "",
        "## The same population read from its netCDF file alone",
        "",
        "The shipped population's file copied to a folder without its live summary "
        "(`bundled_population(path)`), in the same fresh processes' turn: the whole file is read "
        "(h5py, xarray), as a population saved without a summary is.",
        "",
        markdown_table(alone_summary),
        "",
        f"Heavy modules loaded by the time of the answer: "
        f"{', '.join(sorted({m for row in whole_file for m in row['heavy']})) or 'none'}.",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_first_answer.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
