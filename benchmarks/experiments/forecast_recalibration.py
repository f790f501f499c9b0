"""The forecast backtest's band recalibrated on other sources' PIT values (calibration issue).

The forecast backtest's headline split (``python benchmarks/backtest.py --split loso``: leave one
source out, each run's stated range given, cuts at 10/25/50%), the bayesgrpo forecasts redrawn
with the backtest's own forecasters and seeds, so that "as shipped" is the backtest's row. Each
forecast is kept as its 1,000 sorted draws at every later point (cached per run under
``benchmarks/_scratch/forecast_recalibration``, keyed by the code the forecasts depend on).

Recalibration (Kuleshov, Fenner & Ermon 2018, "Accurate uncertainties for deep learning using
calibrated regression"): on the runs of *the other sources* (cross-fitted by source: no run's
map is learnt from its own source), the empirical CDF ``R`` of the PIT values of their later
points at the same cut, each run weighted equally (the coverage is a mean over runs). The
recalibrated forecast's quantile at level ``q`` is the old forecast's quantile at level
``R^-1(q)``. Variants:

- ``isotonic``: ``R`` per cut, all runs of the other sources pooled;
- ``isotonic by range``: ``R`` per cut and per kind of run (stated range or not), since the live
  path knows which it has;
- ``shift only``: only the median moves (the old quantiles shifted by ``Q(R^-1(0.5)) - Q(0.5)``),
  to tell a bias from a band too narrow;
- ``isotonic, median kept``: the levels below and above ``R^-1(0.5)`` rescaled to keep the old
  median, so only the band's spread is recalibrated;
- ``isotonic where it pays``: ``isotonic`` only where the other sources' runs, each recalibrated
  without its own source, score a lower mean CRPS with it than without (a nested choice, by the
  proper score, as a user's run would get it).

The old quantile at a level past the draws' range is extended linearly from the outermost 5% of
the draws (``TAIL``), so a recalibrated band can reach points that lie above every draw.

The recalibrated draws at each point are the old draws' quantiles at the same 1,000 levels, so
they move together across points (a comonotone set): the per-point scores (CRPS, coverage, PIT)
are exact for the marginal forecasts; the final-reward error uses the median of the draws' mean
over the run's last 5% of points, which for comonotone draws is the mean of the medians.

Usage::

    python benchmarks/experiments/forecast_recalibration.py    # -> results/forecast_recalibration.md
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _loso import loso_populations  # noqa: E402
from _markdown import markdown_table  # noqa: E402
from live_backtest import code_hash  # noqa: E402  (the code the forecasts depend on)

RESULTS = HERE / "results"
CACHE = BENCHMARKS / "_scratch" / "forecast_recalibration"
CUTS = (0.1, 0.25, 0.5)
N_DRAWS = 1000
#: The share of draws at each end the tail past the draws is extended from.
TAIL = 0.05
#: The PIT grid the recalibration map is tabulated on.
GRID = np.linspace(0.0, 1.0, 2001)


def forecasts() -> tuple[list[dict[str, Any]], float]:
    """Every run and cut: its later rewards, their sorted draws, its source and kind of range.

    Returns the records and the seconds spent forecasting (0 for what the cache held).
    """
    from bayesgrpo.evaluate.backtest.cuts import (
        BAYES_METHOD,
        FINAL_FRACTION,
        MIN_OBSERVED,
        cut_points,
        run_points,
        run_seed,
    )
    from bayesgrpo.evaluate.backtest.engine import population_specs
    from bayesgrpo.evaluate.backtest.forecast import _bayes_draws
    from bayesgrpo.evaluate.backtest.populations import source_group
    from bayesgrpo.interfaces.fleet import Population
    from bayesgrpo.model.datasets import load_bundled

    table = load_bundled(warn=False)
    populations = loso_populations(table)
    specs, index = population_specs(populations, table.run_ids, N_DRAWS, 0)
    built: dict[int, Any] = {}
    stated = table.runs[["reward_min", "reward_max"]].notna().all(axis=1)
    kinds = dict(zip(table.runs["run_id"].astype(str), np.where(stated, "stated", "unstated"), strict=True))
    sources = {row["run_id"]: source_group(row) for row in table.runs.to_dict("records")}
    folder = CACHE / code_hash()
    folder.mkdir(parents=True, exist_ok=True)
    records, seconds = [], 0.0
    for run_id in table.run_ids:
        path = folder / f"{run_id}.npz"
        points = run_points(table, run_id)
        rewards = points["reward"].to_numpy(dtype=float)
        spread = float(rewards.max() - rewards.min())
        if spread <= 0:
            continue
        n_final_run = max(1, int(np.ceil(FINAL_FRACTION * len(points))))
        if not path.exists():
            start = time.perf_counter()
            k = index[run_id]
            if k not in built:
                spec = specs[k]
                built[k] = spec.forecaster() if isinstance(spec, Population) else spec
            run = table.select([run_id])
            saved: dict[str, np.ndarray] = {}
            for fraction in CUTS:
                cut = cut_points(points, fraction)
                if len(cut.observed) < MIN_OBSERVED or cut.held_out.empty:
                    continue
                target = cut.held_out["step"].to_numpy(dtype=float)
                seed = run_seed(0, run_id, fraction, BAYES_METHOD)
                draws, status, _, _ = _bayes_draws(built[k], run, cut, target, seed, fraction)
                if status != "ok" or not np.isfinite(draws).all():
                    continue
                saved[f"draws_{fraction}"] = np.sort(draws, axis=0).astype(np.float32)
                saved[f"y_{fraction}"] = cut.held_out["reward"].to_numpy(dtype=float)
            np.savez_compressed(path, **saved)  # type: ignore[arg-type]
            seconds += time.perf_counter() - start
        with np.load(path) as saved_file:
            for fraction in CUTS:
                if f"draws_{fraction}" not in saved_file:
                    continue
                y = saved_file[f"y_{fraction}"]
                cut = cut_points(points, fraction)
                steps = points["step"].to_numpy(dtype=float)
                ahead = (cut.held_out["step"].to_numpy(dtype=float) - cut.step) / (steps[-1] - steps[0])
                records.append(
                    {
                        "run_id": run_id,
                        "source": sources[run_id],
                        "range": kinds[run_id],
                        "cut": fraction,
                        "spread": spread,
                        "n_final": min(n_final_run, len(y)),
                        "sorted_draws": saved_file[f"draws_{fraction}"].astype(float),
                        "y": y,
                        "ahead": ahead,
                    }
                )
    return records, seconds


def pit_cdf(records: list[dict[str, Any]]) -> np.ndarray:
    """``R`` on :data:`GRID`: the share of PIT values at or below each grid value, each run
    weighted equally.
    """
    values = np.concatenate([r["pit"] for r in records])
    weights = np.concatenate([np.full(len(r["y"]), 1.0 / len(r["y"])) for r in records])
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order]) / weights.sum()
    at = np.searchsorted(values[order], GRID, side="right")
    return np.where(at > 0, cumulative[np.maximum(at - 1, 0)], 0.0)


def inverse(cdf: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """``R^-1`` at ``levels``: the smallest grid value whose ``R`` reaches the level (linear in
    between grid values).
    """
    # R is a non-decreasing step function; interpolate on its strictly increasing part.
    keep = np.concatenate([[True], np.diff(cdf) > 0])
    return np.interp(levels, cdf[keep], GRID[keep])


def quantiles_at(sorted_draws: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """The draws' quantiles at ``levels`` (shape (L, N)), extended linearly past the draws.

    Inside the draws, the empirical quantile (linear interpolation between order statistics at
    the plotting positions ``(i + 0.5) / S``); past them, the line through the quantiles at
    ``TAIL`` and at the outermost plotting position, on each side.
    """
    n = sorted_draws.shape[0]
    positions = (np.arange(n) + 0.5) / n

    def inside(at: np.ndarray) -> np.ndarray:  # the same levels for every point: one index
        index = np.interp(at, positions, np.arange(n, dtype=float))
        low = np.floor(index).astype(int)
        high = np.minimum(low + 1, n - 1)
        share = (index - low)[:, None]
        return (1.0 - share) * sorted_draws[low] + share * sorted_draws[high]

    out = inside(levels)
    lo_edge, hi_edge = positions[0], positions[-1]
    q_lo_tail, q_hi_tail = inside(np.array([TAIL, 1.0 - TAIL]))
    low, high = levels < lo_edge, levels > hi_edge
    if low.any():
        slope = (q_lo_tail - sorted_draws[0]) / (TAIL - lo_edge)
        out[low] = sorted_draws[0][None, :] - slope[None, :] * (lo_edge - levels[low])[:, None]
    if high.any():
        slope = (sorted_draws[-1] - q_hi_tail) / (hi_edge - (1.0 - TAIL))
        out[high] = sorted_draws[-1][None, :] + slope[None, :] * (levels[high] - hi_edge)[:, None]
    return out


def score(record: dict[str, Any], draws: np.ndarray) -> dict[str, float]:
    """The forecast backtest's scores of one forecast given as draws (S, N), and the share of its
    points above every draw.
    """
    from bayesgrpo.evaluate.backtest.forecast import score_forecast

    y = record["y"]
    scored = score_forecast(draws, y, record["spread"], record["n_final"])
    return scored | {"above_all": float((y > draws.max(axis=0)).mean())}


Recalibrate = Callable[[dict[str, Any], list[dict[str, Any]]], np.ndarray]
LEVELS = (np.arange(N_DRAWS) + 0.5) / N_DRAWS


def as_shipped(record: dict[str, Any], others: list[dict[str, Any]]) -> np.ndarray:
    """The backtest's own draws."""
    return record["sorted_draws"]


def isotonic(record: dict[str, Any], others: list[dict[str, Any]]) -> np.ndarray:
    """Quantiles at ``R^-1(q)``, ``R`` from the other sources' runs at this cut."""
    return quantiles_at(record["sorted_draws"], inverse(pit_cdf(others), LEVELS))


def isotonic_by_range(record: dict[str, Any], others: list[dict[str, Any]]) -> np.ndarray:
    """As :func:`isotonic`, ``R`` from the other sources' runs of the same kind of range."""
    same = [r for r in others if r["range"] == record["range"]]
    return isotonic(record, same or others)


def shift_only(record: dict[str, Any], others: list[dict[str, Any]]) -> np.ndarray:
    """The old draws shifted so that their median is the recalibrated median."""
    level = inverse(pit_cdf(others), np.array([0.5]))
    moved = quantiles_at(record["sorted_draws"], level)[0] - np.median(record["sorted_draws"], axis=0)
    return record["sorted_draws"] + moved[None, :]


#: Bins of a later point's distance from the cut, as a share of the run's step span.
AHEAD_BINS = (0.0, 0.05, 0.15, 0.3, 0.5, 1.01)


def isotonic_by_distance(record: dict[str, Any], others: list[dict[str, Any]]) -> np.ndarray:
    """As :func:`isotonic`, ``R`` per bin of :data:`AHEAD_BINS`, from the other sources' points
    at the same distance ahead of their cut (each run weighted equally within a bin).
    """
    out = np.empty_like(record["sorted_draws"])
    which = np.digitize(record["ahead"], AHEAD_BINS) - 1
    for b in np.unique(which):
        pieces = []
        for r in others:
            inside = (np.digitize(r["ahead"], AHEAD_BINS) - 1) == b
            if inside.any():
                pieces.append({"pit": r["pit"][inside], "y": r["y"][inside]})
        columns = which == b
        levels = inverse(pit_cdf(pieces), LEVELS) if pieces else LEVELS
        out[:, columns] = quantiles_at(record["sorted_draws"][:, columns], levels)
    return out


def isotonic_median_kept(record: dict[str, Any], others: list[dict[str, Any]]) -> np.ndarray:
    """As :func:`isotonic`, each half of the levels rescaled so that the median stays the old one:
    the band's spread recalibrated, its centre (and so the final-reward error) left as it was.
    """
    cdf = pit_cdf(others)
    levels = inverse(cdf, LEVELS)
    middle = float(inverse(cdf, np.array([0.5]))[0])
    kept = np.where(LEVELS < 0.5, levels * 0.5 / middle, 0.5 + (levels - middle) * 0.5 / (1.0 - middle))
    return quantiles_at(record["sorted_draws"], kept)


def _mean_crps(records: list[dict[str, Any]], recalibrate: Recalibrate) -> float:
    """The mean CRPS of ``records``, each recalibrated on the others of a source not its own."""
    return float(
        np.mean(
            [
                score(r, recalibrate(r, [q for q in records if q["source"] != r["source"]]))["crps"]
                for r in records
            ]
        )
    )


def isotonic_where_it_pays(record: dict[str, Any], others: list[dict[str, Any]]) -> np.ndarray:
    """:func:`isotonic` if, on the other sources' runs (each cross-fitted without its own source
    too), it gives a lower mean CRPS than the draws as they are; else the draws as they are.

    The choice a user's run would get: made without the run's source, by the proper score (made
    once for each source and cut: :data:`_PAYS`).
    """
    key = (record["source"], record["cut"])
    if key not in _PAYS:
        _PAYS[key] = _mean_crps(others, isotonic) < _mean_crps(others, as_shipped)
    return isotonic(record, others) if _PAYS[key] else as_shipped(record, others)


#: Whether :func:`isotonic_where_it_pays` recalibrates, by held-out source and cut.
_PAYS: dict[tuple[str, float], bool] = {}


VARIANTS: dict[str, Recalibrate] = {
    "as shipped": as_shipped,
    "isotonic": isotonic,
    "isotonic by range": isotonic_by_range,
    "shift only": shift_only,
    "isotonic by distance": isotonic_by_distance,
    "isotonic, median kept": isotonic_median_kept,
    "isotonic where it pays": isotonic_where_it_pays,
}


def main() -> None:
    """Forecast (or load), recalibrate each source's runs on the others, score, write the table."""
    from bayesgrpo.evaluate import scores

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    records, forecast_seconds = forecasts()
    for record in records:
        record["pit"] = scores.pit_values(record["sorted_draws"], record["y"])
    rows = []
    for record in records:
        others = [r for r in records if r["cut"] == record["cut"] and r["source"] != record["source"]]
        for name, recalibrate in VARIANTS.items():
            rows.append(
                {"variant": name, "run_id": record["run_id"], "range": record["range"], "cut": record["cut"]}
                | score(record, recalibrate(record, others))
            )
    per_run = pd.DataFrame(rows)
    summary_rows = []
    for (variant, cut), frame in per_run.groupby(["variant", "cut"], sort=False):
        for kind in ("all", "stated", "unstated"):
            part = frame if kind == "all" else frame[frame["range"] == kind]
            summary_rows.append(
                {
                    "variant": variant,
                    "range": kind,
                    "cut": cut,
                    "runs": len(part),
                    "cover50": part["cover50"].mean(),
                    "cover90": part["cover90"].mean(),
                    "crps_median": part["crps"].median(),
                    "crps_mean": part["crps"].mean(),
                    "final_err_mean": part["final_abs_error"].mean(),
                    "width90_median": part["width90"].median(),
                    "above_all": part["above_all"].mean(),
                }
            )
    summary = pd.DataFrame(summary_rows).sort_values(["range", "cut"], kind="stable")
    pits = (
        per_run.groupby(["variant", "cut"], sort=False)[[f"pit{i}" for i in range(10)]].mean().reset_index()
    )
    seconds = time.perf_counter() - start
    lines = [
        "# The forecast backtest's band recalibrated on other sources' PIT values",
        "",
        "Command: `python benchmarks/experiments/forecast_recalibration.py` "
        f"({forecast_seconds:.0f} s of forecasts not already cached, {seconds:.0f} s in all, 2 cores; "
        f"code {code_hash()})",
        "",
        f"{len({r['run_id'] for r in records})} bundled runs, each forecast by the population fitted "
        "without its source (`benchmarks/_loso.py`), its stated range given, cut at 10/25/50% of its "
        "steps: the forecast backtest's headline split, its forecasters and seeds. Each variant's map is "
        "learnt on the runs of the other sources at the same cut (the module docstring says how). "
        "cover50/cover90: mean over runs of the share of later points inside the 50%/90% band; "
        "crps: mean CRPS of a run's later points in units of its logged range, median / mean over runs; "
        "final_err_mean: mean over runs of the final-reward error; above_all: mean share of later points "
        "above every draw.",
        "",
        markdown_table(summary.reset_index(drop=True)),
        "",
        "## PIT histograms (mean share of a run's later points per tenth)",
        "",
        markdown_table(pits.round(3)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "forecast_recalibration.md").write_text("\n".join(lines))
    per_run.to_csv(RESULTS / "forecast_recalibration_runs.csv", index=False)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
