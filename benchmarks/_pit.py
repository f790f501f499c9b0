"""PIT histograms of a forecast backtest's rows, per cut and kind of reward range, drawn and tabulated.

A forecast backtest row (``bayesgrpo.evaluate.backtest.forecast_backtest``) carries, per run, cut and
method, the share of the run's later logged points in each tenth of their predictive distribution
(``pit0`` .. ``pit9``). Averaged over runs (each weighted equally) they are the PIT histogram: 0.1 a
tenth when calibrated, U-shaped when the band is too narrow, more mass below 0.5 when the forecast
is too high.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from _markdown import markdown_table

#: The two kinds of run the backtests report apart, as ``live_backtest.range_kinds`` names them.
RANGE_KINDS = ("unstated", "stated")

#: Line colours of the methods drawn (others: matplotlib's cycle).
COLOURS = {"bayesgrpo": "C0", "persistence": "0.6", "scalerl_sigmoid": "C3", "domhan_ensemble": "C2"}


def pit_section(
    frame: pd.DataFrame,
    kinds: dict[str, str],
    path: Path,
    methods: Sequence[str] = ("bayesgrpo", "persistence"),
    title: str = "## PIT histograms",
) -> list[str]:
    """Draw the PIT histograms per cut (columns) and kind of range (rows) to ``path``; return the
    markdown section that names the figure and tabulates what it shows.

    Parameters
    ----------
    frame : pandas.DataFrame
        Forecast backtest rows: ``run_id``, ``cut``, ``method`` and the PIT columns.
    kinds : dict of str to str
        Each run's kind of range, ``"unstated"`` or ``"stated"``.
    path : Path
        The PNG to write.
    methods : sequence of str
        The methods drawn and tabulated.
    title : str
        The section's heading line.
    """
    from bayesgrpo.evaluate.backtest.forecast import PIT_COLUMNS
    from bayesgrpo.interfaces.plotting import subplots

    frame = frame.assign(range=frame["run_id"].map(kinds))
    cuts = sorted(frame["cut"].unique())
    figure, axes = subplots(len(RANGE_KINDS), len(cuts), figsize=(3.4 * len(cuts), 4.8), squeeze=False)
    rows = []
    centres = (np.arange(len(PIT_COLUMNS)) + 0.5) / len(PIT_COLUMNS)
    for j, cut in enumerate(cuts):
        for i, kind in enumerate(RANGE_KINDS):
            ax = axes[i, j]
            for method in methods:
                part = frame[(frame["cut"] == cut) & (frame["method"] == method) & (frame["range"] == kind)]
                shares = part[list(PIT_COLUMNS)].mean(axis=0).to_numpy()
                ax.step(centres, shares, where="mid", color=COLOURS.get(method), label=method)
                rows.append(
                    {
                        "cut": cut,
                        "range": kind,
                        "method": method,
                        "runs": part["run_id"].nunique(),
                        "lowest_tenth": shares[0],
                        "highest_tenth": shares[-1],
                        "middle_fifth": shares[4:6].sum(),
                        "below_half": shares[:5].sum(),
                    }
                )
            ax.axhline(0.1, color="k", linewidth=0.6, linestyle=":")
            ax.set_title(f"cut {cut:g}, {kind} range", fontsize=8)
            ax.set_xlabel("PIT of a later logged point", fontsize=7)
            ax.tick_params(labelsize=6)
    axes[0, 0].legend(fontsize=6, frameon=False)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    table = pd.DataFrame(rows)
    return [
        title,
        "",
        f"`{path.name}`: the share of later logged points in each tenth of their predictive distribution "
        "(uniform, 0.1 each, when calibrated; U-shaped when the band is too narrow; more mass below 0.5 "
        "when the forecast is too high). Runs weighted equally. A calibrated forecast has 0.1 in the "
        "lowest and highest tenth, 0.2 in the middle fifth and 0.5 below the half.",
        "",
        markdown_table(table),
        "",
    ]
