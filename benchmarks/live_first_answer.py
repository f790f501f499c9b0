"""The first live answer in a fresh process: what a user waits for on the first call.

Each repeat starts a new Python process that reads one bundled run (not timed), then times, in
order: the imports the live path needs (``bayesgrpo.questions.live``, ``bayesgrpo.model.datasets``),
``bundled_population()`` (reading the shipped population), ``LiveForecaster(...)``, the first
``update`` and a second one. A second series times the whole command ``bayesgrpo stop RUN.csv
--horizon H`` from process start to exit.

Usage::

    python benchmarks/live_first_answer.py --repeats 5   # writes results/live_first_answer.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import markdown_table

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
population = bundled_population()
t2 = time.perf_counter()
live = LiveForecaster(population, random_seed=1)
update = live.update(run, horizon=float(sys.argv[2]))
t3 = time.perf_counter()
answered_at = time.time()
live.update(run, horizon=float(sys.argv[2]) + 1)
t4 = time.perf_counter()
HEAVY = ("pymc", "pytensor", "arviz", "jax", "numpyro", "scipy.stats", "emcee")
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


def main() -> None:
    """Time fresh processes and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows, commands = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path, horizon = write_run(Path(tmp))
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        for _ in range(args.repeats):
            launched = time.time()
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), str(horizon)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
                cwd=tmp,
            )
            row = json.loads(out.stdout.strip().splitlines()[-1])
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
    frame = pd.DataFrame(rows)
    timed = ["imports", "load", "first_update", "second_update", "first_answer", "from_process_start"]
    summary = pd.DataFrame(
        {
            "part": timed + ["`bayesgrpo stop run.csv` (whole process)"],
            "median_s": [float(frame[c].median()) for c in timed] + [float(np.median(commands))],
            "slowest_s": [float(frame[c].max()) for c in timed] + [float(np.max(commands))],
        }
    )
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [
        "# The first live answer in a fresh process",
        "",
        f"Command: `python benchmarks/live_first_answer.py --repeats {args.repeats}`  ",
        f"Machine: {machine}, {time.strftime('%Y-%m-%d')}. Run: the first half of `{RUN}` as a plain "
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
        "PyTensor, ArviZ, JAX, numpyro, scipy.stats, emcee).",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_first_answer.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
