"""Does a speed-up of the live path change its answers? The same updates under two revisions.

Every 4th bundled run, cut at 25% and 50% of its steps as the backtests cut it
(``bayesgrpo.evaluate.backtest.cuts``) and given its planned horizon, is updated through
``LiveForecaster(bundled_population(), random_seed=0)`` by the code of this working tree and by
the code of ``--against`` (a git revision, checked out in a temporary worktree), each in its own
process. Compared: P(gain < 1% of the range), the path that answered, and the 5/50/95% quantiles
of the predictive band at the horizon. Also timed per revision: ``prepare`` of one run (the
Qwen3 4B notebook run's first half, its horizon given), median of 50 calls.

Usage::

    python benchmarks/experiments/live_same_answers.py --against 07e7dc7
    # writes results/live_same_answers.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from _markdown import command_line, machine_line, write_result  # noqa: E402

RESULTS = HERE / "results"
TIMED_RUN = "nb_unslothai_notebooks_Qwen3_4B_GRPO_bac83a2_n312"

CHILD = """
import json, sys, time, warnings
# an editable install's finder would import the working tree's package whatever the path says
sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
sys.path.insert(0, sys.argv[2])
import numpy as np
warnings.simplefilter("ignore")
from bayesgrpo.evaluate.backtest.cuts import cut_points, planned_horizon, prefix_table, run_points
from bayesgrpo.model.data import prepare
from bayesgrpo.model.datasets import bundled_population, load_bundled
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import prob_gain_below

table = load_bundled(warn=False)
population = bundled_population()
live = LiveForecaster(population, random_seed=0)

def prefix(run_id, cut):  # as the backtests cut a run
    one = table.select([run_id])
    return prefix_table(one, cut_points(run_points(one, run_id), cut).observed), planned_horizon(one)

answers = []
for run_id in table.run_ids[::4]:
    for cut in (0.25, 0.5):
        run, horizon = prefix(run_id, cut)
        if len(run.points) < 3:
            continue
        update = live.update(run, horizon=horizon)
        p = float(prob_gain_below(update.curve_draws, update.step, eps=0.01, relative=True)[0])
        q = np.quantile(update.reward_draws([update.horizon_step]), [0.05, 0.5, 0.95])
        answers.append({"run": run_id, "cut": cut, "p": p, "path": update.posterior.method,
                        "quantiles": q.ravel().tolist()})
run, horizon = prefix(sys.argv[1], 0.5)
settings = dict(progress=population.progress, horizon=horizon, max_points=population.max_points,
                bounds_margin=population.bounds_margin,
                size_standardizer=population.data.size_standardizer,
                samples_standardizer=population.data.samples_standardizer)
times = []
for _ in range(51):
    start = time.perf_counter()
    prepare(run, **settings)
    times.append(time.perf_counter() - start)
print(json.dumps({"answers": answers, "prepare_ms": 1000 * float(np.median(times[1:]))}))
import bayesgrpo
bayesgrpo_file = bayesgrpo.__file__
"""


def answers_of(source: Path) -> dict:
    """The child's answers with ``source`` first on the import path."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD + f"\nassert bayesgrpo_file.startswith({str(source)!r})",
            TIMED_RUN,
            str(source),
        ],
        env={"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run both revisions and write the comparison."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--against", required=True, help="the git revision to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "against"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), args.against], check=True
        )
        try:
            old = answers_of(tree)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True)
    new = answers_of(REPO)
    pairs = list(zip(old["answers"], new["answers"], strict=True))
    p_diff = max(abs(a["p"] - b["p"]) for a, b in pairs)
    q_diff = max(float(np.max(np.abs(np.subtract(a["quantiles"], b["quantiles"])))) for a, b in pairs)
    same_path = sum(a["path"] == b["path"] for a, b in pairs)
    lines = [
        "# The live path's answers under two revisions",
        "",
        f"Command: `{command_line('experiments/live_same_answers.py', None)}`  ",
        f"{machine_line()}",
        "",
        f"{len(pairs)} live updates on the shipped population (every 4th bundled run, cuts 25% and 50%), "
        f"this tree against `{args.against}`:",
        "",
        f"- largest |P(gain < 1%) difference|: {p_diff:.3g}",
        "- largest difference of the 5/50/95% predictive quantiles at the horizon (reward units): "
        f"{q_diff:.3g}",
        f"- same answering path: {same_path} of {len(pairs)}",
        f"- `prepare` of one run (`{TIMED_RUN}`, first half), median of 50 calls: "
        f"{old['prepare_ms']:.1f} ms at `{args.against}`, {new['prepare_ms']:.1f} ms here",
        "",
    ]
    write_result(RESULTS / "live_same_answers.md", lines)


if __name__ == "__main__":
    main()
