"""The live forecast of a run that left its band: as fitted, or following the run's level and noise.

Each live update sets the run's latest 20% of logged points against its own 90% predictive band
(``bayesgrpo.questions.live.recent_departure``). Where far more of them lie on one side than the
band allows (a late jump, a collapse), the Student-t noise has read them as outliers and the
fitted curve stays where it was. ``LiveForecaster(follow_departure=True)`` (the package's default
since this experiment) then adds the run's latest level to the curve (``departure_level``: per
draw, the mean residual of the latest 10% of points, with the standard error of that mean) from
those points on; where they scatter on both sides more than the band allows, it widens the
band's noise until they fit (``noise_widening``); ``follow_departure=False`` keeps the forecast
as fitted. Nothing else differs, so only the updates that departed change.

Both leave-one-source-out splits of the backtests (``benchmarks/_loso.py``): the live path (each
run given no stated range, as ``live_backtest.py``) and the forecast backtest's (stated ranges
given, as ``backtest.py --split loso``), each run's band stretch learnt without its source, cut
at every tenth of a run from 10% to 80% (more cuts than the backtests' three, so that more
updates depart), scored on every later logged point against persistence on the same prefix.

Usage::

    python benchmarks/experiments/live_follow_departure.py   # writes results/live_follow_departure.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _loso import loso_populations
from _markdown import markdown_table
from live_backtest import code_hash, range_kinds, without_stated_range

RESULTS = HERE / "results"
SCRATCH = BENCHMARKS / "_scratch" / "live_follow_departure"
CUTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
DRAWS = 1000
SEED = 0


def forecasts(table, populations, follow: bool, split: str) -> pd.DataFrame:
    """``forecast_backtest`` rows (bayesgrpo and persistence) with the departure followed or not
    (cached per run under the code's hash).
    """
    from live_band_stretch import cross_fitted_stretches

    from bayesgrpo.evaluate.backtest import forecast_backtest
    from bayesgrpo.questions.live import LiveForecaster

    key = json.dumps({"follow": follow, "split": split, "cuts": CUTS, "code": code_hash()}, sort_keys=True)
    folder = SCRATCH / hashlib.sha256(key.encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    stretches = cross_fitted_stretches(table)
    update = LiveForecaster.update

    def update_as_asked(self, *args, **kwargs):
        self.follow_departure = follow
        return update(self, *args, **kwargs)

    frames = []
    LiveForecaster.update = update_as_asked  # type: ignore[method-assign]
    try:
        for run_id in table.run_ids:
            path = folder / f"{hashlib.sha256(run_id.encode()).hexdigest()[:16]}.csv"
            if not path.exists():
                frame = forecast_backtest(
                    table.select([run_id]),
                    {run_id: populations[run_id]},
                    cuts=CUTS,
                    methods=["bayesgrpo", "persistence"],
                    n_draws=DRAWS,
                    random_seed=SEED,
                    band_stretch={run_id: stretches[run_id]},
                )
                frame.to_csv(path, index=False)
            frames.append(pd.read_csv(path))
    finally:
        LiveForecaster.update = update  # type: ignore[method-assign]
    return pd.concat(frames, ignore_index=True)


def paired(table, populations, split: str, kinds: dict[str, str]) -> pd.DataFrame:
    """One row per (run, cut) with both variants' scores and persistence's."""
    followed = forecasts(table, populations, True, split)
    kept = forecasts(table, populations, False, split)
    keys = ["run_id", "cut"]
    columns = ["crps", "cover50", "cover90", "final_abs_error", "width90"]
    bayes_on = followed[followed["method"] == "bayesgrpo"].set_index(keys)
    bayes_off = kept[kept["method"] == "bayesgrpo"].set_index(keys)
    persistence = kept[kept["method"] == "persistence"].set_index(keys)
    out = pd.concat(
        {
            "followed": bayes_on[columns],
            "kept": bayes_off[columns],
            "persistence": persistence[columns],
        },
        axis=1,
    )
    out.columns = [f"{variant}_{name}" for variant, name in out.columns]
    out["departure"] = bayes_off["departure"].fillna("").astype(str)
    out = out.reset_index()
    out["range"] = out["run_id"].map(kinds)
    out["split"] = split
    return out


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per split and kind of update: counts and the three forecasts' scores."""
    kinds = {"above": "left its curve", "below": "left its curve", "noise": "scattered more"}
    rows = rows.assign(kind=rows["departure"].map(kinds).fillna("other"))
    groups = []
    for (split, kind), group in rows.groupby(["split", "kind"], sort=False):
        groups.append(
            {
                "split": split,
                "updates": kind,
                "n": len(group),
                "runs": group["run_id"].nunique(),
                "crps_kept": group["kept_crps"].median(),
                "crps_followed": group["followed_crps"].median(),
                "crps_persistence": group["persistence_crps"].median(),
                "crps_mean_kept": group["kept_crps"].mean(),
                "crps_mean_followed": group["followed_crps"].mean(),
                "crps_mean_persistence": group["persistence_crps"].mean(),
                "cover90_kept": group["kept_cover90"].mean(),
                "cover90_followed": group["followed_cover90"].mean(),
                "cover90_persistence": group["persistence_cover90"].mean(),
                "final_error_kept": group["kept_final_abs_error"].median(),
                "final_error_followed": group["followed_final_abs_error"].median(),
                "final_error_persistence": group["persistence_final_abs_error"].median(),
                "unchanged": bool(np.allclose(group["kept_crps"], group["followed_crps"])),
            }
        )
    return pd.DataFrame(groups)


def main(argv: list[str] | None = None) -> None:
    """Run both splits and write ``results/live_follow_departure.md``."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    warnings.simplefilter("ignore")
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    kinds = range_kinds(bundled)
    rows = pd.concat(
        [
            paired(without_stated_range(bundled), populations, "live path, no range given", kinds),
            paired(bundled, populations, "forecast, ranges given", kinds),
        ],
        ignore_index=True,
    )
    seconds = time.perf_counter() - start
    RESULTS.mkdir(exist_ok=True)
    rows.to_csv(RESULTS / "live_follow_departure_runs.csv", index=False)
    departed = rows[rows["departure"].isin(["above", "below", "noise"])].sort_values(
        ["split", "run_id", "cut"]
    )
    lines = [
        "# The live forecast of a run that left its band: as fitted, or following the run",
        "",
        f"Command: `python benchmarks/experiments/live_follow_departure.py` ({seconds:.0f} s, 2 cores, "
        "forecasts cached per run)",
        "",
        "60 bundled runs, each updated on the population fitted without its source, cut at "
        f"{', '.join(f'{c:.0%}' for c in CUTS)} of its steps; "
        "`kept`: `LiveForecaster(follow_departure=False)`, "
        "the forecast stays as fitted; `followed`: the default, where the latest 20% of points "
        "left the update's 90% band on one side the run's latest level is carried forward "
        "(`bayesgrpo.questions.live.departure_level`), where they scattered on both sides more than it "
        "allows its noise is widened until they fit (`noise_widening`). Scores on every later logged point, "
        "in units of "
        "the run's logged range: CRPS (median and mean over updates), the share inside the 90% predictive "
        "band (mean), the final-reward error (median); persistence on the same prefix. Only updates that "
        "departed can differ (`unchanged` checks the others). Raw rows: "
        "`live_follow_departure_runs.csv`.",
        "",
        markdown_table(summary(rows)),
        "",
        "## Every update that departed",
        "",
        markdown_table(
            departed[
                [
                    "split",
                    "run_id",
                    "cut",
                    "departure",
                    "kept_crps",
                    "followed_crps",
                    "persistence_crps",
                    "kept_cover90",
                    "followed_cover90",
                    "kept_final_abs_error",
                    "followed_final_abs_error",
                ]
            ]
        ),
        "",
    ]
    (RESULTS / "live_follow_departure.md").write_text("\n".join(lines))
    print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
