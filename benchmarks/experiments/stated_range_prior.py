"""Issue 25: why the plateau rules keep a flat run going when its reward range is stated.

On the simulated runs of ``benchmarks/stopping_simulated.py`` the plateau rules stop a flat run at
70% of its steps with a stated 0..1 range and at 34-39% without one. This script shows what the
live update believes there, on the shipped population:

* the population's Gaussian prior of a new run's levels (``LiveForecaster.prior_for``) with and
  without a stated range: its end level ``r1`` as a share of the range, and the prior gain
  ``r1 - r0``, with a run of unknown model size placed at the population's mean size
  (``unknown_covariates="mean"``) and integrated over its sizes (``"integrate"``);
* where the population's runs on a stated range end (mean of the last 10% of their points, as a
  share of the stated range), per source;
* for a few simulated runs (flat, falling, rise then plateau), at 20%, 40% and 60% of the run:
  the posterior of the gain still to come (5/50/95% quantiles, a share of the range the rule
  uses), P(gain < 1%) and the posterior of the rise's time ``tau``.

Usage::

    python benchmarks/experiments/stated_range_prior.py   # about 30 s

Writes ``benchmarks/experiments/results/stated_range_prior.md``.
"""

from __future__ import annotations

import itertools
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _markdown import command_line, machine_line, markdown_table
from stopping_simulated import runs_table, simulate

RESULTS = HERE / "results"
PROBED = ("sim_flat_00", "sim_flat_01", "sim_falling_00", "sim_rise_plateau_00")
CUTS = (0.2, 0.4, 0.6)
#: ``LiveForecaster(unknown_covariates=...)``: a run of unknown size at the mean size (as shipped
#: before 2026-11-26) or integrated over the population's sizes (the default since).
UNKNOWN_SIZE = ("mean", "integrate")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _quantiles(x: np.ndarray, fmt: str) -> str:
    return " / ".join(format(q, fmt) for q in np.quantile(x, [0.05, 0.5, 0.95]))


def prior_rows(live_of) -> list[dict]:
    """The new-run prior's end level and gain, with and without a stated range, for a run of
    unknown size placed at the mean size and integrated over the population's sizes.
    """
    rows = []
    for mode, (label, metadata) in itertools.product(
        UNKNOWN_SIZE, (("stated 0..1", {"reward_min": 0.0, "reward_max": 1.0}), ("no stated range", {}))
    ):
        prior = live_of(mode).prior_for(metadata)
        draws = np.random.default_rng(0).multivariate_normal(prior.mean, prior.cov, 20000)
        r0, r1 = _sigmoid(draws[:, 0]), _sigmoid(draws[:, 1])
        gain = r1 - r0
        rows.append(
            {
                "unknown size": mode,
                "run": label,
                "r1 q05/50/95": _quantiles(r1, ".2f"),
                "gain q05/50/95": _quantiles(gain, ".2f"),
                "P(gain < 0.02)": float((gain < 0.02).mean()),
            }
        )
    return rows


def stated_end_levels() -> pd.DataFrame:
    """Where the bundled runs on a stated range end, per source."""
    from bayesgrpo.evaluate.backtest import source_groups
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.questions.live import stated_reward_range

    table = load_bundled(warn=False)
    runs = table.runs.set_index("run_id")
    rows = []
    for source, run_ids in source_groups(table).items():
        bounds = stated_reward_range(runs.loc[run_ids[0]].to_dict())
        if bounds is None:
            continue
        ends = []
        for run_id in run_ids:
            reward = table.run(run_id).sort_values("step")["reward"].to_numpy(dtype=float)
            reward = reward[np.isfinite(reward)]
            tail = reward[-max(1, reward.size // 10) :]
            ends.append((tail.mean() - bounds[0]) / (bounds[1] - bounds[0]))
        rows.append(
            {
                "source": source,
                "runs": len(run_ids),
                "end level (share of the range)": ", ".join(f"{e:.2f}" for e in ends),
            }
        )
    return pd.DataFrame(rows)


def posterior_rows(live_of) -> pd.DataFrame:
    """The gain still to come on a few simulated runs, with and without a stated range."""
    from bayesgrpo.evaluate.backtest.cuts import planned_horizon, prefix_table, run_points
    from bayesgrpo.questions.stopping.gain import remaining_gain

    points, _, runs = simulate(16, 0)
    rows = []
    for mode, stated in itertools.product(UNKNOWN_SIZE, (True, False)):
        table = runs_table(points, runs, stated)
        live = live_of(mode)
        for run_id in PROBED:
            run = table.select([run_id])
            frame = run_points(table, run_id)
            horizon = planned_horizon(run)
            last = float(frame["step"].iloc[-1])
            for cut in CUTS:
                i = int(cut * len(frame))
                update = live.update(prefix_table(run, frame.iloc[: i + 1]), horizon=horizon)
                draws = update.curve_draws
                gain = remaining_gain(draws, np.array([float(frame["step"].iloc[i])]), np.array([last]))[:, 0]
                gain = gain / float(np.atleast_1d(draws.reward_scale)[0])
                tau = draws.params["tau"][:, 0]
                rows.append(
                    {
                        "unknown size": mode,
                        "range": "stated 0..1" if stated else "no stated range",
                        "run": run_id,
                        "points": len(frame),
                        "cut": cut,
                        "gain q05/50/95": _quantiles(gain, "+.3f"),
                        "P(gain < 1%)": float((gain < 0.01).mean()),
                        "tau q05/50/95": _quantiles(tau, ".2f"),
                    }
                )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    """The three tables; write them."""
    warnings.simplefilter("ignore")
    from bayesgrpo.model.datasets import bundled_population
    from bayesgrpo.questions.live import LiveForecaster

    population = bundled_population()

    def live_of(mode: str) -> LiveForecaster:
        return LiveForecaster(population, random_seed=0, unknown_covariates=mode)

    lines = [
        "# Why a stated range keeps a flat run going (issue 25)",
        "",
        f"Command: `{command_line('experiments/stated_range_prior.py', argv)}`  ",
        f"Machine: {machine_line()}. The shipped population.",
        "",
        "## The population's prior of a new run's levels",
        "",
        markdown_table(pd.DataFrame(prior_rows(live_of))),
        "",
        "## Where the population's runs on a stated range end",
        "",
        markdown_table(stated_end_levels()),
        "",
        "## The gain still to come on simulated runs (share of the range the rule uses)",
        "",
        markdown_table(posterior_rows(live_of)),
        "",
    ]
    (RESULTS / "stated_range_prior.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
