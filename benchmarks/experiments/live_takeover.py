"""Which change lets a run's own points take over the live forecast: each measured on its own.

The live backtest's split (``benchmarks/live_backtest.py``: leave one source out, no stated
range, cuts at 10/25/50%) with only the live path rerun, once per variant of
``LiveForecaster``'s options:

* ``prior_scale``: the population's prior of the run's curve widened (its sds times this);
* ``bin_noise_exponent``: a bin of ``n`` logged points has noise ``sigma / n ** (e / 2)``; 1 treats
  the points as independent, 0.5 as correlated (the bin counts as ``sqrt(n)`` points), 0 as one;
* ``range_headroom``: room above the estimated whole range of a run without a stated range (the
  curve cannot climb past the range it is normalised by).

Persistence and the best baseline come from the live backtest's rows for the same pairs (run
it first). Each variant's rows are cached in ``benchmarks/_scratch/live_takeover/``.

Usage::

    python benchmarks/experiments/live_takeover.py   # writes results/live_takeover.md
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _loso import loso_populations
from _markdown import markdown_table
from live_backtest import code_hash, range_kinds, without_stated_range

RESULTS = HERE / "results"
SCRATCH = BENCHMARKS / "_scratch" / "live_takeover"
BACKTEST_ROWS = BENCHMARKS / "results" / "live_backtest_forecast_runs.csv"
#: (label, prior_scale, bin_noise_exponent, range_headroom)
VARIANTS = (
    ("as shipped", 1.0, 1.0, 0.0),
    ("prior x2", 2.0, 1.0, 0.0),
    ("bins correlated (e=0.5)", 1.0, 0.5, 0.0),
    ("bins as one point (e=0)", 1.0, 0.0, 0.0),
    ("prior x2, bins e=0.5", 2.0, 0.5, 0.0),
    ("prior x2, bins e=0", 2.0, 0.0, 0.0),
    ("range headroom 0.25", 1.0, 1.0, 0.25),
    ("range headroom 0.5", 1.0, 1.0, 0.5),
    ("range headroom 1", 1.0, 1.0, 1.0),
    ("prior x2, headroom 0.5", 2.0, 1.0, 0.5),
)
CUTS = (0.1, 0.25, 0.5)

logger = logging.getLogger("live_takeover")


def variant_rows(
    table, populations, label: str, prior_scale: float, exponent: float, headroom: float
) -> pd.DataFrame:
    """The live path's forecast rows under one variant (cached)."""
    from bayesgrpo.evaluate.backtest import forecast_backtest
    from bayesgrpo.questions.live import LiveForecaster

    key = json.dumps(
        {"v": [prior_scale, exponent, headroom], "code": code_hash(), "cuts": CUTS}, sort_keys=True
    )
    path = SCRATCH / f"{hashlib.sha256(key.encode()).hexdigest()[:12]}.csv"
    if path.exists():
        return pd.read_csv(path)
    forecasters: dict[int, LiveForecaster] = {}
    live = {}
    for run_id in table.run_ids:
        population = populations[run_id]
        if id(population) not in forecasters:
            forecasters[id(population)] = LiveForecaster(
                population,
                n_draws=1000,
                random_seed=len(forecasters),
                prior_scale=prior_scale,
                bin_noise_exponent=exponent,
                range_headroom=headroom,
            )
        live[run_id] = forecasters[id(population)]
    start = time.perf_counter()
    frame = forecast_backtest(table, live, cuts=CUTS, methods=["bayesgrpo"], n_draws=1000, random_seed=0)
    logger.info("%s: %.0f s", label, time.perf_counter() - start)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return frame


def main() -> None:
    """Run every variant and write the table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    from bayesgrpo.model.datasets import load_bundled

    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    kinds = range_kinds(bundled)
    table = without_stated_range(bundled)
    reference = pd.read_csv(BACKTEST_ROWS)
    persistence = reference[reference["method"] == "persistence"].set_index(["run_id", "cut"])["crps"]
    baselines = reference[reference["method"] != "bayesgrpo"]
    best = baselines.groupby(["run_id", "cut"])["crps"].min()
    rows = []
    for label, prior_scale, exponent, headroom in VARIANTS:
        frame = variant_rows(table, populations, label, prior_scale, exponent, headroom)
        frame = frame.assign(range=frame["run_id"].map(kinds))
        for kind in ("all", "unstated", "stated"):
            part = frame if kind == "all" else frame[frame["range"] == kind]
            for cut, at in part.groupby("cut"):
                index = pd.MultiIndex.from_arrays([at["run_id"], at["cut"]])
                rows.append(
                    {
                        "variant": label,
                        "range": kind,
                        "cut": cut,
                        "n": len(at),
                        "cover50": at["cover50"].mean(),
                        "cover90": at["cover90"].mean(),
                        "crps_median": at["crps"].median(),
                        "vs_persistence": at["crps"].median() / persistence.reindex(index).median(),
                        "vs_best_baseline_per_run": (
                            at["crps"].to_numpy() / best.reindex(index).to_numpy()
                        ).mean(),
                        "final_error_median": at["final_abs_error"].median(),
                        "fallbacks": int((at["path"] == "ensemble_mcmc").sum()),
                    }
                )
    summary = pd.DataFrame(rows)
    lines = [
        "# Which change lets a run's own points take over (live path, leave one source out)",
        "",
        "Command: `python benchmarks/experiments/live_takeover.py` (after "
        "`python benchmarks/live_backtest.py`)",
        "",
        "Each variant reruns only the live path on the live backtest's pairs (60 bundled runs, populations "
        "fitted without the run's source, no stated range given, cuts 10/25/50%). cover50/cover90: share of "
        "later logged points inside the 50%/90% predictive band (mean over runs; targets 48-52% and 88-92%). "
        "vs_persistence: median CRPS over persistence's median CRPS on the same pairs (target <= 0.85). "
        "vs_best_baseline_per_run: mean over runs of CRPS / the best baseline's CRPS on that run.",
        "",
        markdown_table(summary),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_takeover.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
