"""How a fitted population pools its runs: shrinkage toward the group and scaling with size
(the numbers behind ``plotting.plot_shrinkage`` and ``plotting.plot_scaling``).

Values are on the model's own scales, where runs are comparable: the levels ``r0`` (start),
``r1`` (level at the horizon) and ``asymptote`` as normalised reward (0 = the run's lower reward
bound, 1 = its upper one), shape parameters (``tau``, ``k``, ``B``, ``zeta``...) in units of
normalised progress (1 = the run's horizon for ``progress="step"``).

* :func:`shrinkage_table`: each run's estimate on its own (the per-run Laplace fit under a weak
  prior of ``model.precondition.run_laplace``, or a ``pooling="none"`` fit), its partially pooled
  posterior, and the population location it is pulled toward (its family and task effects, its
  size, and its start's pull on the other parameters, as ``model.build`` writes it).
* :func:`scaling_table`: each run's posterior against its model size, and the population's
  curve of the parameter in size (``<p>_mu + <p>_size_slope * standardised log size``, the
  start's pull included) with its credible band.

All functions are vectorised over posterior draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import special

from bayesgrpo.errors import BayesGRPOError, NotFittedError
from bayesgrpo.model.curves import asymptote_from_levels, get_curve
from bayesgrpo.model.precondition import run_laplace
from bayesgrpo.model.structure import (
    LEVEL_PARAMS,
    bounds_from_data,
    curve_params,
    effect_grouping,
    run_location,
)

if TYPE_CHECKING:
    import xarray as xr

    from bayesgrpo.model.reward_model import RewardModel

__all__ = ["Scaling", "laplace_modes", "param_label", "scaling_table", "shrinkage_params", "shrinkage_table"]


def shrinkage_params(curve: str) -> tuple[str, ...]:
    """Parameters :func:`shrinkage_table` and :func:`scaling_table` accept for a curve family."""
    return (*curve_params(curve), "asymptote")


def param_label(param: str) -> str:
    """Axis label of a parameter on the scale of this module."""
    if param in ("r0", "r1", "asymptote"):
        names = {"r0": "start r0", "r1": "level at horizon r1", "asymptote": "asymptote"}
        return f"{names[param]} (normalised reward)"
    return f"{param} (normalised progress)"


def _check(model: RewardModel, param: str) -> None:
    if model.idata is None or model.data is None:
        raise NotFittedError("a fitted model is needed (RewardModel.fit or RewardModel.load)")
    valid = shrinkage_params(model.curve)
    if param not in valid:
        raise BayesGRPOError(
            f"param={param!r} is not a parameter of a {model.curve!r} model; choose one of {list(valid)}"
        )


def _natural(curve: str, param: str, theta: Mapping[str, np.ndarray]) -> np.ndarray:
    """A parameter on this module's scale from unconstrained values (logit levels, log shapes)."""
    if param in ("r0", "r1"):
        return special.expit(theta[param])
    if param != "asymptote":
        return np.exp(theta[param])
    shape = {name: np.exp(theta[name]) for name in get_curve(curve).shape_params}
    return asymptote_from_levels(curve, special.expit(theta["r0"]), special.expit(theta["r1"]), **shape)


def _needed(curve: str, param: str) -> tuple[str, ...]:
    """The unconstrained run parameters a parameter is computed from."""
    return curve_params(curve) if param == "asymptote" else (param,)


def _stacked(posterior: xr.Dataset, name: str) -> np.ndarray:
    """A posterior variable as (S, ...) with the samples first."""
    stacked = posterior[name].stack(sample=("chain", "draw"))
    return np.moveaxis(stacked.to_numpy(), -1, 0)


def _run_values(model: RewardModel, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Posterior run values on the unconstrained scale, each (S, R)."""
    assert model.idata is not None
    return {name: _stacked(model.idata.posterior, f"{name}_run") for name in names}


def _group_effect(model: RewardModel, name: str, dim: str) -> np.ndarray:
    """Each run's fitted group effect (family or task) of a parameter, (S, R); 0 where none."""
    assert model.idata is not None and model.data is not None
    data, posterior = model.data, model.idata.posterior
    n_samples = posterior.sizes["chain"] * posterior.sizes["draw"]
    index, _, coord = effect_grouping(data, dim, name in LEVEL_PARAMS)
    if f"{name}_{coord}" not in posterior:
        return np.zeros((n_samples, data.n_runs))
    effect = _stacked(posterior, f"{name}_{coord}")  # (S, levels)
    padded = np.concatenate([effect, np.zeros((n_samples, 1))], axis=1)  # index -1: no effect
    return padded[:, index]


def _locations(
    model: RewardModel, names: tuple[str, ...], runs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Each run's population location on the unconstrained scale, (S, R), as ``model.build``:
    mean + family and task effects + size slope x size + the start's pull.
    """
    assert model.idata is not None and model.data is not None
    posterior, data = model.idata.posterior, model.data
    size = np.where(np.isfinite(data.log_size), data.log_size, 0.0)
    r0_mu = _stacked(posterior, "r0_mu")[:, None]
    data_bounded = bounds_from_data(data)[None, :]
    out = {}
    for name in names:
        effects = _group_effect(model, name, "family") + _group_effect(model, name, "task")
        if f"{name}_size_slope" in posterior:
            effects = effects + _stacked(posterior, f"{name}_size_slope")[:, None] * size[None, :]
        pull = (
            _stacked(posterior, f"{name}_r0_slope")[:, None] * (runs["r0"] - r0_mu) if name != "r0" else 0.0
        )
        offset = (
            _stacked(posterior, f"{name}_data_offset")[:, None]
            if f"{name}_data_offset" in posterior
            else None
        )
        out[name] = run_location(
            name, _stacked(posterior, f"{name}_mu")[:, None], effects, pull, data_bounded, offset
        )
    return out


def laplace_modes(model: RewardModel) -> dict[str, np.ndarray]:
    """Each run of a fitted model fitted alone, under the weak prior of ``model.precondition``.

    Parameters
    ----------
    model : RewardModel
        Fitted (its data and priors are used; its posterior is not).

    Returns
    -------
    dict of str to ndarray
        The Laplace modes on the unconstrained scales, each shape (R,): ``r0``, ``r1``, the
        shape parameters and ``log_sigma``. Reuse them across :func:`shrinkage_table` calls
        (one fit per run, about 0.05 s each).
    """
    if model.data is None:
        raise NotFittedError("a fitted model is needed (RewardModel.fit or RewardModel.load)")
    order = (*curve_params(model.curve), "log_sigma")
    # one run per call: fewer than MIN_RUNS_EMPIRICAL runs keeps run_laplace to the weak prior
    modes = np.stack(
        [
            run_laplace(model.data, model.curve, model.priors, np.array([i]), noise_floor=model.noise_floor)[
                0
            ][0]
            for i in range(model.data.n_runs)
        ]
    )
    return {name: modes[:, j] for j, name in enumerate(order)}


def shrinkage_table(
    model: RewardModel,
    param: str = "asymptote",
    *,
    unpooled: RewardModel | Mapping[str, np.ndarray] | None = None,
    interval: float = 0.9,
) -> pd.DataFrame:
    """Each run's own estimate of a parameter beside its partially pooled posterior.

    Parameters
    ----------
    model : RewardModel
        Fitted with ``pooling="partial"``.
    param : str
        ``"r0"``, ``"r1"``, ``"asymptote"`` or a shape parameter of the curve family.
    unpooled : RewardModel or mapping, optional
        A ``pooling="none"`` fit of the same runs (its posterior medians are the runs' own
        estimates), or :func:`laplace_modes` of ``model`` computed before. Default: each run's
        Laplace mode under a weak prior (:func:`laplace_modes`).
    interval : float
        Mass of the pooled posterior's equal-tailed interval.

    Returns
    -------
    pandas.DataFrame
        One row per run: ``run_id, family, unpooled`` (the run's own estimate: the Laplace mode,
        or the unpooled fit's posterior median), ``pooled`` (posterior median) with
        ``pooled_lower, pooled_upper``, ``target`` (the posterior median of the population
        location the run is pulled toward) and ``population`` (the population mean's posterior
        median, the same on every row). Medians, not means: the asymptote of a run still far
        from its plateau has a heavy right tail.

    Raises
    ------
    BayesGRPOError
        Unknown parameter, a model not partially pooled, or ``unpooled`` fitted on other runs.
    """
    _check(model, param)
    if model.pooling != "partial":
        raise BayesGRPOError(
            f"shrinkage needs a model with pooling='partial'; this one has {model.pooling!r}"
        )
    assert model.data is not None and model.idata is not None
    data = model.data
    names = _needed(model.curve, param)
    runs = _run_values(model, tuple(dict.fromkeys(("r0", *names))))
    pooled = _natural(model.curve, param, runs)
    target = np.median(_natural(model.curve, param, _locations(model, names, runs)), axis=0)
    posterior = model.idata.posterior
    population = float(
        np.median(_natural(model.curve, param, {n: _stacked(posterior, f"{n}_mu") for n in names}))
    )
    if unpooled is None or isinstance(unpooled, Mapping):
        modes = laplace_modes(model) if unpooled is None else unpooled
        own = _natural(model.curve, param, {name: np.asarray(modes[name], dtype=float) for name in names})
    else:
        _check(unpooled, param)
        assert unpooled.data is not None  # _check refuses an unfitted model
        if unpooled.curve != model.curve or tuple(unpooled.data.run_ids) != tuple(data.run_ids):
            raise BayesGRPOError(
                "the unpooled model must be the same curve family fitted on the same runs, in the same order"
            )
        own = np.median(_natural(model.curve, param, _run_values(unpooled, names)), axis=0)
    tail = (1.0 - interval) / 2.0
    lower, upper = np.quantile(pooled, [tail, 1.0 - tail], axis=0)
    return pd.DataFrame(
        {
            "run_id": list(data.run_ids),
            "family": [data.families[i] for i in data.family_index],
            "unpooled": own,
            "pooled": np.median(pooled, axis=0),
            "pooled_lower": lower,
            "pooled_upper": upper,
            "target": target,
            "population": population,
        }
    )


@dataclass(frozen=True)
class Scaling:
    """A parameter against model size.

    Attributes
    ----------
    param : str
    runs : pandas.DataFrame
        One row per run of known size: ``run_id, family, size_b, median, lower, upper``.
    line : pandas.DataFrame or None
        The population's curve in size: ``size_b, median, lower, upper``; None when the model has
        no size slope (too few runs of known size, or not partially pooled).
    slopes : pandas.DataFrame
        Posterior ``mean, lower, upper`` of each ``<p>_size_slope`` the parameter rests on
        (change per standard deviation of log size, on the unconstrained scale), by ``name``.
    n_unknown_size : int
        Runs left out for want of a size.
    n_own_range : int
        Runs of known size left out of a level (``r0``, ``r1``, ``asymptote``) because they are
        normalised by their own observed range in a population that has runs on a stated range:
        their levels say where they sit in that range, not how good they are
        (``model.structure.bounds_from_data``).
    """

    param: str
    runs: pd.DataFrame
    line: pd.DataFrame | None
    slopes: pd.DataFrame
    n_unknown_size: int
    n_own_range: int = 0


def scaling_table(
    model: RewardModel, param: str = "asymptote", *, n_grid: int = 60, interval: float = 0.9
) -> Scaling:
    """Run-level posteriors of a parameter by model size, and the population's size curve.

    The curve is the population mean at each size for the average family and task (their
    effects sum to zero): ``<p>_mu + <p>_size_slope * z`` with ``z`` the standardised log size,
    plus, for parameters other than the start, ``<p>_r0_slope`` times the start's own change
    with size. Its band is the posterior uncertainty of that mean, not the spread of runs.

    Parameters
    ----------
    model : RewardModel
    param : str
        As :func:`shrinkage_table`.
    n_grid : int
        Sizes on the curve (log-spaced over the runs' sizes).
    interval : float

    Returns
    -------
    Scaling
    """
    _check(model, param)
    assert model.data is not None and model.idata is not None
    data, posterior = model.data, model.idata.posterior
    names = _needed(model.curve, param)
    standardizer = data.size_standardizer
    size_b = np.exp(data.log_size * standardizer.scale + standardizer.centre)
    known = np.isfinite(size_b)
    own_range = (
        known & (bounds_from_data(data) == 1) if param in ("r0", "r1", "asymptote") else np.zeros_like(known)
    )
    values = _natural(model.curve, param, _run_values(model, names))
    tail = (1.0 - interval) / 2.0
    lower, upper = np.quantile(values, [tail, 1.0 - tail], axis=0)
    runs = pd.DataFrame(
        {
            "run_id": list(data.run_ids),
            "family": [data.families[i] for i in data.family_index],
            "size_b": size_b,
            "median": np.median(values, axis=0),
            "lower": lower,
            "upper": upper,
        }
    )[known & ~own_range].reset_index(drop=True)
    slope_names = [f"{n}_size_slope" for n in dict.fromkeys(("r0", *names) if param != "r0" else names)]
    has_slopes = model.pooling == "partial" and all(name in posterior for name in slope_names)
    slopes = pd.DataFrame(
        [
            {
                "name": name,
                "mean": float(draws.mean()),
                "lower": float(np.quantile(draws, tail)),
                "upper": float(np.quantile(draws, 1.0 - tail)),
            }
            for name in slope_names
            if name in posterior
            for draws in [_stacked(posterior, name)]
        ],
        columns=["name", "mean", "lower", "upper"],
    )
    line = None
    if has_slopes and known.sum() >= 1:
        grid = (
            np.geomspace(size_b[known].min(), size_b[known].max(), n_grid)
            if size_b[known].min() < size_b[known].max()
            else size_b[known][:1]
        )
        z = standardizer(np.log(grid))[None, :]
        r0_mu = _stacked(posterior, "r0_mu")[:, None]
        theta = {"r0": r0_mu + _stacked(posterior, "r0_size_slope")[:, None] * z}
        for name in names:
            if name == "r0":
                continue
            theta[name] = (
                _stacked(posterior, f"{name}_mu")[:, None]
                + _stacked(posterior, f"{name}_size_slope")[:, None] * z
                + _stacked(posterior, f"{name}_r0_slope")[:, None] * (theta["r0"] - r0_mu)
            )
        curve_values = _natural(model.curve, param, theta)
        low, high = np.quantile(curve_values, [tail, 1.0 - tail], axis=0)
        line = pd.DataFrame(
            {"size_b": grid, "median": np.median(curve_values, axis=0), "lower": low, "upper": high}
        )
    return Scaling(
        param=param,
        runs=runs,
        line=line,
        slopes=slopes,
        n_unknown_size=int((~known).sum()),
        n_own_range=int(own_range.sum()),
    )
