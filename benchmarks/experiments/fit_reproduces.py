"""Does a seeded population fit reproduce? The same fit in two fresh processes, compared.

The population ``live_update.py`` fits (the bundled runs less its 10 held out by seed 1,
``RewardModel().fit(draws=500, tune=500, random_seed=1)``: numpyro NUTS, two chains on the CPU
devices) is fitted twice, each time in a fresh process, and every posterior variable compared
draw for draw. The slow-lane test ``tests/model/test_sampling.py`` checks the same at a small size.

Usage::

    python benchmarks/experiments/fit_reproduces.py
    # writes results/fit_reproduces.md (about 4 minutes on 2 cores)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _markdown import command_line, machine_line, write_result  # noqa: E402

RESULTS = HERE / "results"

CHILD = """
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
table = load_bundled(warn=False)
rng = np.random.default_rng(1)  # live_update.py's held-out runs
held_out = sorted(rng.choice(table.run_ids, size=10, replace=False).tolist())
train = table.select([r for r in table.run_ids if r not in held_out])
start = time.perf_counter()
model = RewardModel().fit(train, draws=500, tune=500, random_seed=1, progressbar=False)
seconds = time.perf_counter() - start
np.savez(sys.argv[1], **{k: v.values for k, v in model.idata.posterior.data_vars.items()})
print(json.dumps({"seconds": seconds, "runs": len(train.run_ids)}))
"""


def fit_in_a_fresh_process(path: Path) -> dict:
    """Fit in a child process; its posterior is saved to ``path``, its timing returned."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Fit twice, compare, write the result."""
    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / "first.npz", Path(folder) / "second.npz"]
        timings = [fit_in_a_fresh_process(path) for path in paths]
        with np.load(paths[0]) as first, np.load(paths[1]) as second:
            names = sorted(first.files)
            differing = [name for name in names if not np.array_equal(first[name], second[name])]
            largest = max(float(np.max(np.abs(first[name] - second[name]))) for name in names)
            n_values = sum(first[name].size for name in names)
    lines = [
        "# A seeded population fit, twice in fresh processes",
        "",
        f"Command: `{command_line('experiments/fit_reproduces.py', None)}`  ",
        f"{machine_line()}",
        "",
        f"`RewardModel().fit(draws=500, tune=500, random_seed=1)` on {timings[0]['runs']} bundled runs "
        "(`live_update.py`'s population), each fit in its own fresh process:",
        "",
        f"- fit times: {timings[0]['seconds']:.0f} s, {timings[1]['seconds']:.0f} s",
        f"- posterior variables compared: {len(names)} ({n_values:,} values)",
        f"- variables that differ: {len(differing)} {', '.join(differing[:10])}".rstrip(),
        f"- largest absolute difference: {largest:.3g}",
        "",
    ]
    write_result(RESULTS / "fit_reproduces.md", lines)


if __name__ == "__main__":
    main()
