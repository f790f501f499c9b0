"""The tables a fitted ``RewardModel`` answers with, as pure functions of its posterior and fit data.

``RewardModel.forecast``, ``final_reward``, ``run_parameters`` and ``fit_summary`` check that the
model is fitted and call these; the draws themselves come from ``model.predict``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.data import ModelData
from bayesgrpo.model.predict import quantile_columns, reward_draws, run_draws
from bayesgrpo.model.structure import covariate_used

if TYPE_CHECKING:  # a model read from its live summary answers live updates without xarray
    import xarray as xr


def forecast_table(
    draws: xr.DataArray, quantiles: Sequence[float], observed: RunsTable | None
) -> pd.DataFrame:
    """Long table of mean and quantiles per (run, step).

    Parameters
    ----------
    draws : xarray.DataArray
        Dims ``(sample, run, step)``, reward units (``model.predict.reward_draws``).
    quantiles : sequence of float
        One column each (``q05``, ``q50``...: ``model.predict.quantile_columns``).
    observed : RunsTable, optional
        Adds an ``observed`` column with the logged reward at each step where one exists.

    Returns
    -------
    pandas.DataFrame
        ``run_id``, ``step``, ``mean``, the quantile columns, and ``observed`` where asked for.
    """
    values = draws.to_numpy()
    qs = np.quantile(values, list(quantiles), axis=0)
    runs = draws["run"].to_numpy()
    steps = draws["step"].to_numpy()
    frame = pd.DataFrame(
        {
            "run_id": np.repeat(runs, len(steps)),
            "step": np.tile(steps, len(runs)),
            "mean": values.mean(axis=0).ravel(),
            **{name: qs[j].ravel() for j, name in enumerate(quantile_columns(quantiles))},
        }
    )
    if observed is not None:
        logged = observed.points[["run_id", "step", "reward"]].rename(columns={"reward": "observed"})
        logged = logged.assign(run_id=logged["run_id"].astype(str), step=logged["step"].astype(float))
        frame = frame.merge(logged, on=["run_id", "step"], how="left")
    return frame


def final_reward_table(
    posterior: xr.Dataset,
    data: ModelData,
    curve: str,
    quantiles: Sequence[float],
    *,
    include_noise: bool,
    random_seed: int | None,
) -> pd.DataFrame:
    """Forecast reward at each run's horizon (``RewardModel.final_reward``).

    Parameters
    ----------
    posterior : xarray.Dataset
        The fitted model's posterior.
    data : ModelData
        Its fit data (each run's horizon).
    curve : str
        Its curve family.
    quantiles : sequence of float
    include_noise : bool
        Quantiles of a logged reward (the predictive band) instead of the expected reward.
    random_seed : int, optional
        Of the noise.

    Returns
    -------
    pandas.DataFrame
        ``run_id, horizon_step, mean, q..``: a row per fitted run.
    """
    rows = []
    # one step per run: evaluate at every run's own horizon (vectorised by a diagonal pick)
    draws = reward_draws(
        posterior,
        data,
        curve,
        data.horizon_step,
        max_samples=2000,
        include_noise=include_noise,
        random_seed=random_seed,
    )
    values = draws.to_numpy()[:, np.arange(data.n_runs), np.arange(data.n_runs)]
    names = quantile_columns(quantiles)
    qs = np.quantile(values, quantiles, axis=0)
    for i, run_id in enumerate(data.run_ids):
        row = {
            "run_id": run_id,
            "horizon_step": int(data.horizon_step[i]),
            "mean": float(values[:, i].mean()),
        }
        row.update({name: float(qs[j, i]) for j, name in enumerate(names)})
        rows.append(row)
    return pd.DataFrame(rows)


def parameter_table(posterior: xr.Dataset, data: ModelData, curve: str) -> pd.DataFrame:
    """Posterior means and 90% intervals of each run's curve on natural scales
    (``RewardModel.run_parameters``).

    Parameters
    ----------
    posterior : xarray.Dataset
        The fitted model's posterior.
    data : ModelData
        Its fit data (each run's reward bounds).
    curve : str
        Its curve family.

    Returns
    -------
    pandas.DataFrame
        ``run_id, parameter, mean, q05, q95``: ``r0``, ``r1``, ``asymptote`` and ``sigma`` in
        reward units, shape parameters in normalised progress.
    """
    draws = run_draws(posterior, curve)
    rows = []
    for name, values in draws.items():
        if name == "nu":
            continue
        if name in ("r0", "r1", "asymptote"):
            values = data.lower[None, :] + values * (data.upper - data.lower)[None, :]
        if name == "sigma":
            values = values * (data.upper - data.lower)[None, :]
        low, high = np.quantile(values, [0.05, 0.95], axis=0)
        for i, run_id in enumerate(data.run_ids):
            rows.append(
                {
                    "run_id": run_id,
                    "parameter": name,
                    "mean": float(values[:, i].mean()),
                    "q05": float(low[i]),
                    "q95": float(high[i]),
                }
            )
    return pd.DataFrame(rows)


def fit_summary(
    config: dict[str, Any],
    data: ModelData,
    parametrisation: dict[str, int],
    diagnostics: dict[str, Any],
) -> dict[str, Any]:
    """How a fit was made and how reliable it is, in one dict (``RewardModel.fit_summary``).

    Parameters
    ----------
    config : dict
        The model's configuration (``RewardModel.config``); its priors are left out.
    data : ModelData
        The fit data.
    parametrisation : dict of str to int
        How many runs were sampled whitened, centred or non-centred.
    diagnostics : dict
        The fit's checks (``FitDiagnostics.to_dict``).

    Returns
    -------
    dict
        The configuration, the data's size, bounds, covariates and levels, the parametrisation
        and the diagnostics.
    """
    return {
        **{k: v for k, v in config.items() if k != "priors"},
        "n_runs": data.n_runs,
        "n_points": int(data.n_points.sum()),
        "n_cells_fitted": int(data.mask.sum()),
        "bounds_from_data": [r for r, s in zip(data.run_ids, data.bounds_source, strict=True) if s == "data"],
        "covariates_used": [
            name
            for name, values in (("log_size", data.log_size), ("log_samples", data.log_samples))
            if covariate_used(values)
        ],
        "families": list(data.families),
        "tasks": list(data.tasks),
        "parametrisation": parametrisation,
        **diagnostics,
    }
