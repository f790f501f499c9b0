"""Posterior draws of reward curves (pure numpy functions of a posterior and the fit data).

All functions are vectorised over draws, runs and steps: no Python loop over draws.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from bayesgrpo.curves import asymptote_from_levels, get_curve, reward_curve_by_levels
from bayesgrpo.model.data import ModelData
from bayesgrpo.model.priors import curve_params


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def run_draws(posterior: xr.Dataset, curve: str) -> dict[str, np.ndarray]:
    """Run parameters per posterior sample on their natural scales, each of shape (S, R).

    Returns ``r0``, ``r1`` and ``asymptote`` (normalised reward), the shape parameters
    (progress units), ``sigma`` (normalised reward) and ``nu`` (shape (S, 1)).
    """
    stacked = posterior.stack(sample=("chain", "draw"))
    out: dict[str, np.ndarray] = {}
    for name in curve_params(curve):
        values = stacked[f"{name}_run"].transpose("sample", "run").to_numpy()
        out[name] = _sigmoid(values) if name in ("r0", "r1") else np.exp(values)
    shape = {name: out[name] for name in get_curve(curve).shape_params}
    out["asymptote"] = asymptote_from_levels(curve, out["r0"], out["r1"], **shape)
    out["sigma"] = stacked["sigma_run"].transpose("sample", "run").to_numpy()
    out["nu"] = stacked["nu"].to_numpy()[:, None]
    return out


def mean_curve_draws(draws: dict[str, np.ndarray], curve: str, t: np.ndarray) -> np.ndarray:
    """Expected normalised reward, shape (S, R, N), at progress ``t`` of shape (R, N)."""
    shape = {name: draws[name][:, :, None] for name in get_curve(curve).shape_params}
    return reward_curve_by_levels(curve, t[None, :, :], draws["r0"][:, :, None], draws["r1"][:, :, None], **shape)


def add_noise(mean: np.ndarray, draws: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Draws of an observed reward: the mean plus Student-t noise of one logged point."""
    nu = draws["nu"][:, :, None]
    noise = rng.standard_t(np.broadcast_to(nu, mean.shape)) * draws["sigma"][:, :, None]
    return mean + noise


def reward_draws(
    posterior: xr.Dataset,
    data: ModelData,
    curve: str,
    steps: np.ndarray,
    *,
    include_noise: bool = False,
    random_seed: int | None = None,
    max_samples: int | None = None,
) -> xr.DataArray:
    """Draws of the reward (in reward units) at ``steps`` for every fitted run.

    Parameters
    ----------
    posterior : xarray.Dataset
    data : ModelData
    curve : str
    steps : array of step numbers, shape (N,)
    include_noise : bool
        Draws of an observed point (curve plus noise) rather than of the curve itself.
    random_seed : int, optional
    max_samples : int, optional
        Thin the posterior to at most this many samples.

    Returns
    -------
    xarray.DataArray
        Dims ``(sample, run, step)``.
    """
    draws = run_draws(posterior, curve)
    n_samples = draws["r0"].shape[0]
    if max_samples is not None and n_samples > max_samples:
        keep = np.linspace(0, n_samples - 1, max_samples).round().astype(int)
        draws = {name: value[keep] for name, value in draws.items()}
    steps = np.asarray(steps, dtype=float)
    mean = mean_curve_draws(draws, curve, data.to_t(steps))
    if include_noise:
        mean = add_noise(mean, draws, np.random.default_rng(random_seed))
    values = data.to_reward(mean, run_axis=1)
    return xr.DataArray(
        values,
        dims=("sample", "run", "step"),
        coords={"run": list(data.run_ids), "step": steps},
        name="reward",
    )


def quantile_columns(quantiles: Sequence[float]) -> list[str]:
    """Column names of quantiles: 0.05 -> ``q05``, 0.5 -> ``q50``, 0.975 -> ``q97.5``."""
    names = []
    for q in quantiles:
        percent = 100 * q
        names.append(f"q{percent:02.0f}" if float(percent).is_integer() else f"q{percent:g}")
    return names
