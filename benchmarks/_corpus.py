"""What the corpus benchmarks share: the code hash their caches key on, and their summaries.

Every summary is given for the source folds 0-4 and for the sealed fold apart, pooled over runs
(no source above 10% of the weight) and with each source weighted equally, each with a 90%
interval from a bootstrap over sources (``bayesgrpo.evaluate.corpus``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.corpus import SEALED, source_bootstrap, weighted_median

HERE = Path(__file__).resolve().parent
#: Where ``benchmarks/corpus/build.py`` builds the corpus.
BUILT = HERE / "_scratch" / "corpus" / "built"
#: The two weightings every figure is given in: label -> ``run_weights`` scheme.
WEIGHTINGS = {"pooled (<= 10% a source)": "pooled", "each source equal": "equal"}


#: The package code a forecast or a stop decision depends on (the corpus's own summaries aside).
FORECAST_CODE = (
    "model",
    "questions",
    "logs",
    "evaluate/backtest",
    "evaluate/baselines",
    "evaluate/transfer_eval",
    "evaluate/scores.py",
)


def code_hash(parts: Sequence[str] = FORECAST_CODE) -> str:
    """A hash of the package code (and shipped population) results depend on: a change re-runs them."""
    digest = hashlib.sha256()
    root = HERE.parent / "bayesgrpo"
    for part in parts:
        path = root / part
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            digest.update(file.read_bytes())
    digest.update((root / "_data" / "bundled_population.nc").read_bytes())
    return digest.hexdigest()[:12]


def cached_rows(
    folder: Path,
    run_ids: Sequence[str],
    keys: Mapping[str, str],
    settings: Mapping[str, Any],
    compute: Callable[[list[str]], pd.DataFrame],
) -> pd.DataFrame:
    """Rows of ``compute([run_id])`` for each run, each cached in ``folder`` under a hash of the
    run, its key (the population it is forecast from), the settings and the package code.
    """
    log = logging.getLogger(folder.name)
    code = code_hash()
    frames = []
    for i, run_id in enumerate(run_ids):
        payload = {"run": run_id, "settings": settings, "population": keys[run_id], "code": code}
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]
        path = folder / f"{digest}.csv"
        if path.exists():
            frames.append(pd.read_csv(path))
            continue
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frame = compute([run_id])
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        frames.append(frame)
        log.info("%d/%d %s: %.1f s", i + 1, len(run_ids), run_id, time.perf_counter() - start)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fold_group(folds: pd.Series) -> np.ndarray:
    """``"sealed"`` or ``"folds 0-4"`` for each run's fold."""
    return np.where(folds.astype(str) == SEALED, "sealed", "folds 0-4")


def interval(estimate: tuple[float, float, float], digits: int = 2) -> str:
    """``value [low, high]``."""
    value, low, high = estimate
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def ratio_of_medians(values: np.ndarray, weights: np.ndarray) -> float:
    """The weighted median of column 0 over that of column 1."""
    return weighted_median(values[:, 0], weights) / weighted_median(values[:, 1], weights)


def ratio_of_means(values: np.ndarray, weights: np.ndarray) -> float:
    """The weighted mean of column 0 over that of column 1."""
    return float(np.sum(values[:, 0] * weights) / np.sum(values[:, 1] * weights))


def forecast_summary(
    frame: pd.DataFrame,
    runs: pd.DataFrame,
    methods: Sequence[str],
    n_boot: int,
    baseline: str = "persistence",
    by: str = "group",
) -> pd.DataFrame:
    """Each method against ``baseline`` on the same (run, cut) pairs, per group, cut and weighting.

    Parameters
    ----------
    frame : DataFrame
        ``forecast_backtest`` rows (``run_id, cut, method, crps, final_abs_error, cover90,
        cover50``).
    runs : DataFrame
        One row a run, indexed by run id: ``source`` and the column ``by`` names.
    methods : sequence of str
        The methods compared with ``baseline`` (``baseline`` itself is skipped).
    n_boot : int
    baseline : str
    by : str
        The column of ``runs`` the rows are grouped by.

    Returns
    -------
    DataFrame
        One row per (group, cut, weighting, method): runs, sources, the ratio of median CRPS and
        of mean final-reward error over the baseline's, and the share of later points inside the
        90% and 50% bands, each ``value [90% interval]``.
    """
    wide = frame.pivot_table(
        index=["run_id", "cut"], columns="method", values=["crps", "final_abs_error", "cover90", "cover50"]
    )
    wide.columns = [f"{metric}|{method}" for metric, method in wide.columns]
    wide = wide.reset_index()
    wide["source"] = wide["run_id"].map(runs["source"])
    wide["by"] = wide["run_id"].map(runs[by])
    rows = []
    for (group, cut), part in wide.groupby(["by", "cut"], sort=True):
        for method in methods:
            if method == baseline or f"crps|{method}" not in part:
                continue
            pair = part.dropna(subset=[f"crps|{method}", f"crps|{baseline}"])
            if pair.empty:
                continue
            crps = pair[[f"crps|{method}", f"crps|{baseline}"]].to_numpy()
            final = pair[[f"final_abs_error|{method}", f"final_abs_error|{baseline}"]].to_numpy()
            for label, scheme in WEIGHTINGS.items():
                rows.append(
                    {
                        by: group,
                        "cut": cut,
                        "weights": label,
                        "method": method,
                        "n runs": pair["run_id"].nunique(),
                        "n sources": pair["source"].nunique(),
                        f"median CRPS / {baseline}": interval(
                            source_bootstrap(crps, pair["source"], ratio_of_medians, scheme, n_boot)
                        ),
                        "90% band holds": interval(
                            source_bootstrap(pair[f"cover90|{method}"], pair["source"], None, scheme, n_boot)
                        ),
                        "50% band holds": interval(
                            source_bootstrap(pair[f"cover50|{method}"], pair["source"], None, scheme, n_boot)
                        ),
                        f"final error / {baseline}": interval(
                            source_bootstrap(final, pair["source"], ratio_of_means, scheme, n_boot)
                        ),
                    }
                )
    return pd.DataFrame(rows)


def stop_summary(
    frame: pd.DataFrame,
    runs: pd.DataFrame,
    rules: Sequence[str],
    n_boot: int,
    by: str = "group",
) -> pd.DataFrame:
    """Per group and rule: steps saved and reward given up against the run's end, with intervals.

    The first of ``rules`` is the one compared: for each other rule, its difference from that one,
    run for run, with an interval over sources. Each source weighted equally.

    Parameters
    ----------
    frame : DataFrame
        ``stopping_backtest`` rows (``run_id, rule, steps_saved, reward_vs_end, dip``).
    runs : DataFrame
        One row a run, indexed by run id: ``source`` and the column ``by`` names.
    rules : sequence of str
    n_boot : int
    by : str

    Returns
    -------
    DataFrame
    """
    wide = frame.pivot_table(index="run_id", columns="rule", values=["steps_saved", "reward_vs_end", "dip"])
    wide.columns = [f"{metric}|{rule}" for metric, rule in wide.columns]
    wide = wide.reset_index()
    wide["source"] = wide["run_id"].map(runs["source"])
    wide["by"] = wide["run_id"].map(runs[by])
    first = rules[0]
    rows = []
    for group, part in wide.groupby("by", sort=True):
        for rule in rules:
            row = {by: group, "rule": rule, "n runs": len(part), "n sources": part["source"].nunique()}
            for column, metric, digits in (
                ("steps saved", "steps_saved", 2),
                ("given up vs the end", "reward_vs_end", 3),
                ("dip at the stop", "dip", 3),
            ):
                row[column] = interval(
                    source_bootstrap(part[f"{metric}|{rule}"], part["source"], None, "equal", n_boot), digits
                )
            if rule != first:
                for column, metric, digits in (("saved", "steps_saved", 2), ("given up", "reward_vs_end", 3)):
                    difference = part[f"{metric}|{first}"] - part[f"{metric}|{rule}"]
                    row[f"{first} minus this: {column}"] = interval(
                        source_bootstrap(difference, part["source"], None, "equal", n_boot), digits
                    )
            rows.append(row)
    return pd.DataFrame(rows).fillna("")
