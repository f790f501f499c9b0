r"""Weights & Biases panel exports, written as W&B writes them ("Download CSV" of a line plot).

What W&B writes (checked against exports committed to public repositories): every cell quoted,
comma separated, ``\\n`` line ends and none after the last line; the x-axis column first, then
per run (in the panel's order) and per metric the value, ``__MIN`` and ``__MAX`` columns; one
line per x value of any run, in increasing order; empty cells where a run has no point. Numbers
are written as JavaScript writes them (``"2"``, ``"0.1"``, ``"1e-7"``, ``"1.5e+21"``). Without
bucketing a point's ``__MIN`` and ``__MAX`` equal its value; pass ``<metric>__min`` and
``<metric>__max`` columns to write bucket bands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd

STEP = "step"


def js_number(value: float) -> str:
    """A number as JavaScript's ``Number.prototype.toString`` writes it.

    The shortest digits that read back to the same double (what Python's ``repr`` finds too),
    laid out by ECMAScript's rules: plain notation for 1e-7 < |x| < 1e21, exponent otherwise
    (``"1e-7"``, ``"1.5e+21"``); whole numbers without a decimal point.

    Parameters
    ----------
    value : float

    Returns
    -------
    str
    """
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in digit_tuple)
    k = len(digits)
    n = k + int(exponent)  # value = 0.digits x 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        power = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"
    return sign + text


def _quote(cell: str) -> str:
    return '"' + cell.replace('"', '""') + '"'


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    return js_number(float(value))  # type: ignore[arg-type]  # anything float() takes


def write_wandb_csv(
    path: str | Path,
    points_by_run: Mapping[str, pd.DataFrame] | pd.DataFrame,
    metric: str | Sequence[str] | None = None,
    *,
    x_axis: str = "Step",
) -> Path:
    """Write runs' points as a W&B line-plot panel export.

    Parameters
    ----------
    path : str or Path
        The ``.csv`` file to write.
    points_by_run : dict of run name -> DataFrame, or one DataFrame
        Each frame has a ``step`` column and one column per metric (W&B's names, e.g.
        ``"train/reward"``), optionally ``<metric>__min`` / ``<metric>__max`` bands. A single
        frame is one run named after the file's stem.
    metric : str or list of str, optional
        The panel's metrics, in order. Default: every column of the first frame other than
        ``step`` and the bands.
    x_axis : str
        The x-axis column's name (``"Step"`` unless the panel plots against another value).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        When a frame lacks ``step`` or a metric, or repeats a step.
    """
    path = Path(path)
    runs = {path.stem: points_by_run} if isinstance(points_by_run, pd.DataFrame) else dict(points_by_run)
    if not runs:
        raise ValueError("no run to write")
    if metric is None:
        first = next(iter(runs.values()))
        metrics = [c for c in first.columns if c != STEP and not c.endswith(("__min", "__max"))]
    else:
        metrics = [metric] if isinstance(metric, str) else list(metric)
    header = [x_axis]
    indexed: dict[str, pd.DataFrame] = {}
    for run, frame in runs.items():
        missing = [c for c in [STEP, *metrics] if c not in frame.columns]
        if missing:
            raise ValueError(f"run {run!r} has no column(s) {missing}; it has {list(frame.columns)}")
        if frame[STEP].duplicated().any():
            raise ValueError(f"run {run!r} repeats steps; a panel has one point per run and x value")
        indexed[run] = frame.set_index(STEP)
        for name in metrics:
            header += [f"{run} - {name}", f"{run} - {name}__MIN", f"{run} - {name}__MAX"]
    steps = np.unique(np.concatenate([frame.index.to_numpy(dtype=float) for frame in indexed.values()]))
    columns: list[np.ndarray] = []
    for frame in indexed.values():
        frame = frame.reindex(steps)
        for name in metrics:
            value = frame[name].to_numpy(dtype=float)
            low = frame[f"{name}__min"].to_numpy(dtype=float) if f"{name}__min" in frame.columns else value
            high = frame[f"{name}__max"].to_numpy(dtype=float) if f"{name}__max" in frame.columns else value
            # a band exists only where the point does
            absent = np.isnan(value)
            columns += [value, np.where(absent, np.nan, low), np.where(absent, np.nan, high)]
    # W&B writes a line per x value at which some run has a point
    has_point = np.any([~np.isnan(column) for column in columns], axis=0)
    lines = [",".join(_quote(cell) for cell in header)]
    for row in np.flatnonzero(has_point):
        step = steps[row]
        cells = [js_number(step)] + [_cell(column[row]) for column in columns]
        lines.append(",".join(_quote(cell) for cell in cells))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write("\n".join(lines))
    return path


__all__ = ["js_number", "write_wandb_csv"]
