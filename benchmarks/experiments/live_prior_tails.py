"""A heavier-tailed run prior in the live update: do a run's own points then take over.

The live-path issue names "a wider or heavier-tailed run-level prior" among the changes that
could let a run's points take over its forecast. ``prior x2`` (``live_takeover.py``) widened
the prior everywhere; here the population's Gaussian summary of a new run's parameters becomes a
multivariate t of the same centre and shape (``LiveForecaster(prior_df=...)``): near the centre
it is the same prior, but a run whose points lie far from what its kin did is followed by its
points, since the t's tails cost less than the Gaussian's.

Both leave-one-source-out splits, each with the backtests' own forecasters and seeds (so that
the ``gaussian`` rows equal theirs):

- ``no stated range``: the live backtest's (``benchmarks/live_backtest.py``), every run given
  no stated range, as a user's run usually comes;
- ``stated range given``: the forecast backtest's (``python benchmarks/backtest.py --split
  loso``), each run's stated range given.

Persistence and the best baseline come from those backtests' rows for the same pairs (run them
first). Each variant's rows are cached in ``benchmarks/_scratch/live_prior_tails/``.

Usage::

    python benchmarks/experiments/live_prior_tails.py   # writes results/live_prior_tails.md
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _loso import loso_populations  # noqa: E402
from _markdown import markdown_table  # noqa: E402
from live_backtest import code_hash, range_kinds, without_stated_range  # noqa: E402

RESULTS = HERE / "results"
SCRATCH = BENCHMARKS / "_scratch" / "live_prior_tails"
#: Each split's reference rows (persistence and the baselines on the same pairs).
REFERENCE = {
    "no stated range": BENCHMARKS / "results" / "live_backtest_forecast_runs.csv",
    "stated range given": BENCHMARKS / "results" / "loso" / "backtest_forecast_runs.csv",
}
#: (label, prior_df)
VARIANTS = (("gaussian (as shipped)", np.inf), ("t, df 10", 10.0), ("t, df 5", 5.0), ("t, df 3", 3.0))
CUTS = (0.1, 0.25, 0.5)

logger = logging.getLogger("live_prior_tails")


def variant_rows(table, populations, split: str, label: str, prior_df: float) -> pd.DataFrame:
    """The live path's forecast rows of one split under one prior (cached)."""
    from bayesgrpo.evaluate.backtest import forecast_backtest
    from bayesgrpo.evaluate.backtest.engine import population_specs
    from bayesgrpo.questions.live import LiveForecaster

    key = json.dumps({"split": split, "df": str(prior_df), "code": code_hash(), "cuts": CUTS}, sort_keys=True)
    path = SCRATCH / f"{hashlib.sha256(key.encode()).hexdigest()[:12]}.csv"
    if path.exists():
        return pd.read_csv(path)
    # seeded as each backtest seeds them (``population_specs``): the live backtest asks one run
    # at a time, the forecast backtest the whole table
    batches = [[r] for r in table.run_ids] if split == "no stated range" else [list(table.run_ids)]
    live = {}
    for run_ids in batches:
        specs, index = population_specs({r: populations[r] for r in run_ids}, run_ids, 1000, 0)
        forecasters = [
            LiveForecaster(spec.model, n_draws=spec.n_draws, random_seed=spec.random_seed, prior_df=prior_df)
            for spec in specs
        ]
        live.update({r: forecasters[index[r]] for r in run_ids})
    start = time.perf_counter()
    frame = forecast_backtest(table, live, cuts=CUTS, methods=["bayesgrpo"], n_draws=1000, random_seed=0)
    logger.info("%s, %s: %.0f s", split, label, time.perf_counter() - start)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return frame


def main() -> None:
    """Run every variant on both splits and write the table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    kinds = range_kinds(bundled)
    tables = {"no stated range": without_stated_range(bundled), "stated range given": bundled}
    rows = []
    for split, table in tables.items():
        reference = pd.read_csv(REFERENCE[split])
        persistence = reference[reference["method"] == "persistence"].set_index(["run_id", "cut"])["crps"]
        best = reference[reference["method"] != "bayesgrpo"].groupby(["run_id", "cut"])["crps"].min()
        for label, prior_df in VARIANTS:
            frame = variant_rows(table, populations, split, label, prior_df)
            frame = frame.assign(range=frame["run_id"].map(kinds))
            for kind in ("all", "unstated", "stated"):
                part = frame if kind == "all" else frame[frame["range"] == kind]
                for cut, at in part.groupby("cut"):
                    index = pd.MultiIndex.from_arrays([at["run_id"], at["cut"]])
                    rows.append(
                        {
                            "split": split,
                            "prior": label,
                            "runs": kind,
                            "cut": cut,
                            "n": len(at),
                            "cover50": at["cover50"].mean(),
                            "cover90": at["cover90"].mean(),
                            "crps_median": at["crps"].median(),
                            "vs_persistence": at["crps"].median() / persistence.reindex(index).median(),
                            "vs_best_baseline": at["crps"].median() / best.reindex(index).median(),
                            "final_error_mean": at["final_abs_error"].mean(),
                            "fallbacks": int((at["path"] == "ensemble_mcmc").sum()),
                        }
                    )
    summary = pd.DataFrame(rows)
    lines = [
        "# A heavier-tailed run prior in the live update (leave one source out)",
        "",
        "Command: `python benchmarks/experiments/live_prior_tails.py` (after `python "
        "benchmarks/live_backtest.py` and `python benchmarks/backtest.py --split loso`; "
        f"{time.perf_counter() - start:.0f} s, 2 cores; code {code_hash()})",
        "",
        "60 bundled runs, each updated by the population fitted without its source at 10/25/50% of "
        "its steps; `no stated range`: every run given none (the live backtest's split), `stated "
        "range given`: the forecast backtest's. `prior`: the new run's prior as the population's "
        "Gaussian summary (as shipped) or a multivariate t of the same centre and shape with `df` "
        "degrees of freedom. `runs`: all, or the runs whose metadata states a range or not. "
        "cover50/cover90: mean over runs of the share of later logged points inside the 50%/90% "
        "predictive band (targets 48-52% and 88-92%); crps_median in units of a run's logged range; "
        "vs_persistence / vs_best_baseline: the median CRPS over persistence's / the best baseline's "
        "(per run) median CRPS on the same pairs; fallbacks: updates answered by the MCMC fallback.",
        "",
        markdown_table(summary),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_prior_tails.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
