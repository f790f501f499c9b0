"""Stop where the run's own points say it no longer rises: flat evidence for the default stop rule.

The default :class:`~bayesgrpo.questions.stopping.rules.GuardedBudgetRule` stops before its budget
only on a sure plateau of the *curve* (``P(gain < 1%) >= 0.9``), and past its budget goes on while
the curve still expects a gain of 2%. On a run that is flat or falling the right answer is to stop
early, and the curve does not always say so: on a stated range the population (verl runs that climb
high in theirs) expects a rise the run's points do not show, so the rule stops flat and falling
simulated runs at 51-59% of their steps (``results/stopping_simulated.md``, by shape).

The run's points can say so, as they say "still rising" for the rise guard: over the latest
``window`` of the run's planned steps, the least-squares rise of the logged reward at its
one-sided *upper* bound (``rise + z se``) below a share ``threshold`` of the rule's range is
evidence, not a dip, that the run no longer climbs (a long window and a confident bound: a noisy
prefix does not pass). Variants stop on it from ``min_progress`` of the run on (before the budget,
and past it where the curve would go on), optionally only where the curve agrees that a gain of 1%
is no more likely than ``p_min`` says.

No rule is changed in the package. The checks are those of ``stop_momentum.py`` (its records:
every check of each stopping set answered once by the live update, the default rule's two
probabilities and the range); the default emulated here reproduces the stopping benchmarks' rows
of ``guarded budget 0.5`` (``results/default_rule.md``: 49.0% at -0.0% over the 60 bundled runs
with their ranges, 50.3% at -3.3% on simulated runs without one, ...).

Usage::

    python benchmarks/experiments/stop_flat_evidence.py   # -> results/stop_flat_evidence.md
    python benchmarks/experiments/stop_flat_evidence.py --seeds 0 1 2   # more live-update seeds
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
sys.path.insert(0, str(HERE))
from _markdown import markdown_table  # noqa: E402
from stop_momentum import (  # noqa: E402
    BUDGET,
    PROB,
    Guard,
    fixed_stops,
    rise_lower_bound,
    score_stop,
    scored_sets,
    stopping_sets,
    summary,
)

RESULTS = HERE / "results"
#: The shipped default's rise guard and early stop (``default_rule()``).
RISE_GUARD = Guard(0.1, 1.645, 0.01, True)
EARLY_PROB = 0.9


@dataclass(frozen=True)
class Flat:
    """Flat evidence: the rise over the latest ``window`` of the run at its one-sided upper bound
    (``rise + z se``) below ``threshold`` x the range, from ``min_progress`` of the run on; with
    ``p_min``, only where the curve's ``P(gain < 1%) >= p_min`` too; ``past_budget``: also past the
    budget where the curve would go on.
    """

    window: float
    threshold: float
    min_progress: float
    z: float = 1.645
    p_min: float | None = None
    past_budget: bool = True
    ar1_se: bool = False
    stated_only: bool = False


#: (name, flat evidence or None): the shipped default, and with flat evidence.
VARIANTS: tuple[tuple[str, Flat | None], ...] = (
    ("default", None),
    ("flat 0.2, rise < 1%, from 0.2", Flat(0.2, 0.01, 0.2)),
    ("flat 0.2, rise < 0, from 0.2", Flat(0.2, 0.0, 0.2)),
    ("flat 0.2, rise < 2%, from 0.2", Flat(0.2, 0.02, 0.2)),
    ("flat 0.3, rise < 1%, from 0.3", Flat(0.3, 0.01, 0.3)),
    ("flat 0.3, rise < 1%, from 0.3, z 1.28", Flat(0.3, 0.01, 0.3, z=1.282)),
    ("flat 0.2, rise < 1%, from 0.2, P >= 0.5", Flat(0.2, 0.01, 0.2, p_min=0.5)),
    ("flat 0.2, rise < 1%, from 0.2, before budget", Flat(0.2, 0.01, 0.2, past_budget=False)),
    ("flat 0.2, rise < 1%, past budget only", Flat(0.2, 0.01, BUDGET)),
    ("flat 0.2, rise < 1%, from 0.2, AR(1) se", Flat(0.2, 0.01, 0.2, ar1_se=True)),
    ("flat 0.2, rise < 2%, from 0.2, AR(1) se", Flat(0.2, 0.02, 0.2, ar1_se=True)),
    ("flat 0.3, rise < 2%, from 0.3, AR(1) se", Flat(0.3, 0.02, 0.3, ar1_se=True)),
    ("flat 0.2, rise < 2%, from 0.2, stated range only", Flat(0.2, 0.02, 0.2, stated_only=True)),
)


def rise_upper_bound(steps: np.ndarray, reward: np.ndarray, now: float, horizon: float, flat: Flat) -> float:
    """The one-sided upper bound of the rise over the latest ``flat.window`` of the horizon (the
    package's :func:`~bayesgrpo.questions.stopping.momentum.recent_rise` on the points up to ``now``);
    +inf with too few points (no evidence).
    """
    from bayesgrpo.questions.stopping.momentum import recent_rise

    seen = steps <= now
    found = recent_rise(steps[seen], reward[seen], horizon, flat.window)
    se = found.se * (ar1_inflation(steps[seen], reward[seen], horizon, flat.window) if flat.ar1_se else 1.0)
    bound = found.rise + flat.z * se
    return bound if np.isfinite(bound) else np.inf


def ar1_inflation(steps: np.ndarray, reward: np.ndarray, horizon: float, window: float) -> float:
    """How much an AR(1) residual widens the least-squares slope's standard error over the window:
    ``sqrt((1 + rho) / (1 - rho))`` from the lag-1 autocorrelation ``rho`` of the residuals about the
    line (clipped to 0 .. 0.95; 1 with too few points).
    """
    inside = steps > steps.max() - window * horizon
    x, y = steps[inside], reward[inside]
    if x.size < 8 or np.ptp(x) <= 0:
        return 1.0
    residual = y - np.polyval(np.polyfit(x, y, 1), x)
    denom = float(residual @ residual)
    rho = float(residual[1:] @ residual[:-1]) / denom if denom > 0 else 0.0
    rho = min(max(rho, 0.0), 0.95)
    return float(np.sqrt((1 + rho) / (1 - rho)))


def stop_step(
    run: pd.DataFrame,
    steps: np.ndarray,
    reward: np.ndarray,
    horizon: float,
    flat: Flat | None,
    stated: bool = False,
) -> tuple[float | None, str]:
    """The emulated default rule's stop on one run's records, with flat evidence (None: it never
    stops), and what stopped it (``curve`` or ``flat``).
    """
    last = float(steps[-1])
    for row in run.itertuples(index=False):
        progress = row.step / last
        past = progress >= BUDGET - 1e-9
        stop = row.p_eps >= PROB if past else row.p_early >= EARLY_PROB
        if stop and rise_lower_bound(steps, reward, row.step, horizon, RISE_GUARD) > 0.01 * row.scale:
            stop = False
        if stop:
            return float(row.step), "curve"
        if (
            flat is not None
            and (stated or not flat.stated_only)
            and progress >= flat.min_progress - 1e-9
            and (flat.past_budget or not past)
            and (flat.p_min is None or row.p_early >= flat.p_min)
            and rise_upper_bound(steps, reward, row.step, horizon, flat) < flat.threshold * row.scale
        ):
            return float(row.step), "flat"
    return None, "none"


def scored(
    name: str, table: Any, recs: pd.DataFrame, truth: dict[str, np.ndarray] | None, seed: int
) -> pd.DataFrame:
    """Every variant's stop (and the fixed budgets') on every run, scored as ``stop_momentum.py``
    scores it (its measures: steps saved, given up against the end, the dip).
    """
    from live_backtest import range_kinds

    from bayesgrpo.evaluate.backtest.cuts import planned_horizon
    from bayesgrpo.evaluate.backtest.stopping import scored_run

    kinds = range_kinds(table)  # the range given to the update, not the one the run has
    rows = []
    for run_id in table.run_ids:
        run_scored = scored_run(table, run_id, 0.05)
        steps, reward = run_scored.steps, run_scored.rewards
        run = recs[recs["run_id"] == run_id].sort_values("step")
        horizon = planned_horizon(table.select([run_id]))
        stated = kinds[run_id] == "stated"
        stops = {variant: stop_step(run, steps, reward, horizon, flat, stated) for variant, flat in VARIANTS}
        stops.update({variant: (stop, "fixed") for variant, stop in fixed_stops(steps).items()})
        for variant, (stop, by) in stops.items():
            measures = score_stop(run_scored, stop, None if truth is None else truth[run_id])
            rows.append(
                {
                    "set": name,
                    "seed": seed,
                    "run_id": run_id,
                    "variant": variant,
                    "stopped_by": by,
                    **measures,
                }
            )
    return pd.DataFrame(rows)


def by_shape(rows: pd.DataFrame, shapes: dict[str, str]) -> pd.DataFrame:
    """On the simulated sets: each variant's stop fraction, given up and dip by shape (seed 0)."""
    sim = rows[rows["set"].str.startswith("simulated") & (rows["seed"] == rows["seed"].min())].copy()
    sim["shape"] = sim["run_id"].map(shapes)
    sim["stop_fraction"] = 1.0 - sim["steps_saved"]
    sim["stopped_flat"] = (sim["stopped_by"] == "flat").astype(float)
    keep = sim["variant"].isin(["default", "fixed 0.5", *(v for v, f in VARIANTS[1:3])])
    out = (
        sim[keep]
        .groupby(["set", "shape", "variant"], sort=False)[["stop_fraction", "vs_end", "dip", "stopped_flat"]]
        .mean()
        .reset_index()
    )
    return out.round(3)


def main() -> None:
    """Record (or read) every set's checks, decide the variants, write the result file."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="live-update seeds")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    sets = stopping_sets()
    shapes = {run_id: shape for one in sets for run_id, shape in one.shapes.items()}
    rows = scored_sets(sets, scored, lambda known: args.seeds)
    rows.round(5).to_csv(RESULTS / "stop_flat_evidence_runs.csv", index=False)
    table = summary(rows.drop(columns="stopped_by"))
    flat_share = (
        rows.assign(flat=(rows["stopped_by"] == "flat").astype(float))
        .groupby(["set", "variant"], sort=False)["flat"]
        .mean()
        .rename("stopped_flat")
        .reset_index()
    )
    table = table.merge(flat_share, on=["set", "variant"], how="left")
    seconds = time.perf_counter() - start
    lines = [
        "# Flat evidence: stop where the run's own points no longer rise",
        "",
        "Command: `python benchmarks/experiments/stop_flat_evidence.py"
        + ("" if args.seeds == [0] else " --seeds " + " ".join(map(str, args.seeds)))
        + "`  ",
        f"{time.strftime('%Y-%m-%d')}, {seconds:.0f} s (records cached in "
        "`benchmarks/_scratch/stop_momentum`). Raw rows: `stop_flat_evidence_runs.csv`.",
        "",
        "`default`: the shipped `GuardedBudgetRule(0.5)` emulated on each set's checks. `flat W, rise < "
        "X, from F`: it also stops, from F of the run on, where the logged reward's least-squares rise "
        "over the latest W of the run's planned steps is below X of the rule's range at its one-sided 95%"
        " upper bound (z 1.645 unless said); `P >= 0.5`: only where the curve's P(gain < 1%) is at least "
        "0.5 too; `before budget`: not past the budget; `past budget only`: only there; `stated range "
        "only`: only for a run whose range is given to the update (metadata `reward_min`/`reward_max`). "
        "Means over runs (then over seeds, min to max): steps saved, given up against the run's end, the "
        "dip at the stop; `stopped_flat`: the share of runs stopped by the flat evidence. The last "
        "columns count seeds in which a variant dominates a fixed budget, saves 50% at <= 1%, and 45% at "
        "<= 1% with a mean dip within 1%.",
        "",
        markdown_table(table),
        "",
        "## Simulated runs by shape (seed 0)",
        "",
        markdown_table(by_shape(rows, shapes)),
        "",
    ]
    (RESULTS / "stop_flat_evidence.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
