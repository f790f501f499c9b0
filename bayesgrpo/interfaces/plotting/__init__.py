"""Figures of runs, forecasts, stop decisions and the population.

Every plotting function takes ``ax=`` (or ``axes=``) and returns what it drew on; computing lives
in the layers below, so these only draw. matplotlib is imported on first use
(:func:`~bayesgrpo.interfaces.plotting.style.pyplot`), never by ``import bayesgrpo``.

- :mod:`~bayesgrpo.interfaces.plotting.forecasts`: runs by family, forecasts, fan charts;
- :mod:`~bayesgrpo.interfaces.plotting.stopping`: stop probability over a run, steps to a share of
  the gain;
- :mod:`~bayesgrpo.interfaces.plotting.population`: transfer, shrinkage, scaling with size;
- :mod:`~bayesgrpo.interfaces.plotting.style`: figures, labels and family colours they share.
"""

from __future__ import annotations

from bayesgrpo.interfaces.plotting.forecasts import plot_fan, plot_forecast, plot_forecast_grid, plot_runs
from bayesgrpo.interfaces.plotting.population import plot_scaling, plot_shrinkage, plot_transfer
from bayesgrpo.interfaces.plotting.stopping import plot_stop_probability, plot_t80
from bayesgrpo.interfaces.plotting.style import (
    PHASE_COLORS,
    UNKNOWN_LABEL,
    family_colors,
    figure_png,
    subplots,
)

__all__ = [
    "PHASE_COLORS",
    "UNKNOWN_LABEL",
    "family_colors",
    "figure_png",
    "plot_fan",
    "plot_forecast",
    "plot_forecast_grid",
    "plot_runs",
    "plot_scaling",
    "plot_shrinkage",
    "plot_stop_probability",
    "plot_t80",
    "plot_transfer",
    "subplots",
]
