"""Posterior draws of reward curves: the object that crosses from the model to its questions.

:class:`CurveDraws` holds the curve parameters of ``R`` runs per posterior draw, in reward units,
with the map from steps to the curve's progress axis. :meth:`RewardModel.curve_draws
<bayesgrpo.model.reward_model.RewardModel.curve_draws>`, the live update and transfer make it;
every stopping question (:mod:`bayesgrpo.questions.stopping`), figure and backtest reads it.
:func:`reward_at` gives the expected reward at steps, :func:`gain_share` and
:func:`gain_share_rate` the share of the total gain made at a progress and its rate. Arrays are
``(S, R)`` (draws x runs); nothing loops over draws.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import CURVES, asymptote_from_levels, get_curve
from bayesgrpo.model.data import UPDATES_BEFORE_STEP as updates_before_step

if TYPE_CHECKING:
    from bayesgrpo.model.data import ModelData


logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Input: posterior draws of curve parameters
# --------------------------------------------------------------------------------------------


def per_run(value: Any, n_runs: int, name: str) -> np.ndarray:
    """``value`` as a float array of shape (R,): a scalar is repeated, an array must have R."""
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        return np.full(n_runs, float(array))
    if array.shape != (n_runs,):
        raise BayesGRPOError(
            f"{name} has shape {array.shape}; give one number or one per run, shape ({n_runs},)."
        )
    return array.copy()


def frozen_array(array: np.ndarray) -> np.ndarray:
    """A read-only float copy of ``array``."""
    array = np.array(array, dtype=float)
    array.setflags(write=False)
    return array


def infer_curve(names: Iterable[str]) -> str:
    """The family whose shape parameters are exactly the shape-parameter names given."""
    all_shape = {p for family in CURVES.values() for p in family.shape_params}
    present = set(names) & all_shape
    for name, family in CURVES.items():
        if set(family.shape_params) == present:
            return name
    raise BayesGRPOError(
        f"cannot tell the curve family from the parameters {sorted(names)}; pass curve=..., one of "
        f"{list(CURVES)}."
    )


@dataclass(frozen=True, eq=False)
class CurveDraws:
    """Posterior draws of the reward curves of ``R`` runs: the input of every stopping question.

    Parameters
    ----------
    curve : str
        The curve family (a key of :data:`bayesgrpo.model.curves.CURVES`).
    params : mapping of str to ndarray
        Per posterior draw, shape ``(S,)`` for one run or ``(S, R)`` for ``R`` runs: ``r0`` (reward
        at ``t = 0``) and either ``asymptote`` or ``r1`` (the reward at ``t = 1``, from which the
        asymptote is derived), all in reward units, and the family's shape parameters in units of
        the progress ``t``. Stored as ``(S, R)`` arrays ``r0``, ``asymptote`` and the shape
        parameters.
    step_scale : float or ndarray of shape (R,)
        ``t = step / step_scale`` for each run (for a model fitted on ``progress="step"``, the
        horizon in steps).
    reward_scale : float or ndarray of shape (R,)
        Width of the run's reward range (upper minus lower bound): the unit of a relative ``eps``.
    horizon_step : float or ndarray of shape (R,), optional
        Default horizon ``T`` (in steps) of the stopping questions.
    run_ids : sequence of str, optional
        Names of the runs; default ``"0"``, ``"1"``...
    step_offset : float
        Updates before step 1 (``t = (step - step_offset) / step_scale``).
    noise_sd : ndarray of shape (S, R) or (S,), optional
        Per draw, the Student-t scale of one logged reward's noise around the curve, reward units.
        With it the draws also answer for a logged reward (:func:`predictive_at`: the
        *predictive* band); without it only for the expected curve.
    noise_df : float or ndarray of shape (S,)
        The noise's degrees of freedom (infinite: Gaussian).
    recent_rise, recent_rise_se : ndarray of shape (R,), optional
        Per run, the rise of its logged reward over its latest window of steps and its standard
        error, reward units (NaN: not known); not the curve's but the logged points' own
        (:func:`bayesgrpo.questions.stopping.momentum.with_recent_rise`). A rule may hold a
        plateau claim that the run's latest points contradict.
    long_rise, long_rise_se : ndarray of shape (R,), optional
        The same over a longer window of the run's latest steps
        (:data:`bayesgrpo.questions.stopping.momentum.FLAT_WINDOW`): the evidence a rule asking
        for a flat run reads (a short window's slope is too noisy to say "no longer rises").

    Raises
    ------
    BayesGRPOError
        Unknown family, missing, unknown or mis-shaped parameters, non-finite values, shape
        parameters or scales that are not positive.
    """

    curve: str
    params: Mapping[str, np.ndarray]
    step_scale: np.ndarray | float = 1.0
    reward_scale: np.ndarray | float = 1.0
    horizon_step: np.ndarray | float | None = None
    run_ids: tuple[str, ...] | None = None
    step_offset: float = 0.0
    noise_sd: np.ndarray | None = None
    noise_df: np.ndarray | float = float("inf")
    recent_rise: np.ndarray | None = None
    recent_rise_se: np.ndarray | None = None
    long_rise: np.ndarray | None = None
    long_rise_se: np.ndarray | None = None

    def __post_init__(self) -> None:
        family = get_curve(self.curve)
        valid = ("r0", "asymptote", "r1", *family.shape_params)
        unknown = sorted(set(self.params) - set(valid))
        if unknown:
            raise BayesGRPOError(
                f"unknown curve parameters {unknown} for family {self.curve!r}; valid names: {list(valid)}."
            )
        needed = ["r0", *family.shape_params]
        missing = [p for p in needed if p not in self.params]
        if "asymptote" not in self.params and "r1" not in self.params:
            missing.append("asymptote (or r1)")
        if missing:
            raise BayesGRPOError(f"curve parameters {missing} are missing for family {self.curve!r}.")
        arrays = {name: np.asarray(value, dtype=float) for name, value in self.params.items()}
        first = arrays["r0"]
        if first.ndim not in (1, 2) or first.shape[0] == 0:
            raise BayesGRPOError(
                f"parameter draws must have shape (S,) or (S, R) with S >= 1; 'r0' has shape {first.shape}."
            )
        for name, value in arrays.items():
            if value.shape != first.shape:
                raise BayesGRPOError(
                    f"parameter {name!r} has shape {value.shape} but 'r0' has {first.shape}; "
                    "give every parameter the same (S,) or (S, R) shape."
                )
            if not np.all(np.isfinite(value)):
                raise BayesGRPOError(f"parameter {name!r} has non-finite draws; drop or repair them.")
        if first.ndim == 1:
            arrays = {name: value[:, None] for name, value in arrays.items()}
        for name in family.shape_params:
            if not np.all(arrays[name] > 0):
                raise BayesGRPOError(
                    f"shape parameter {name!r} must be > 0 in every draw; found {arrays[name].min():g}."
                )
        shape = {name: arrays[name] for name in family.shape_params}
        asymptote = arrays.get("asymptote")
        if asymptote is None:
            asymptote = asymptote_from_levels(self.curve, arrays["r0"], arrays["r1"], **shape)
        normalised = {"r0": arrays["r0"], "asymptote": asymptote, **shape}
        n_runs = arrays["r0"].shape[1]
        object.__setattr__(
            self, "params", MappingProxyType({k: frozen_array(v) for k, v in normalised.items()})
        )
        for name in ("step_scale", "reward_scale"):
            value = per_run(getattr(self, name), n_runs, name)
            if not np.all(np.isfinite(value) & (value > 0)):
                raise BayesGRPOError(f"{name} must be finite and > 0 for every run; got {value}.")
            object.__setattr__(self, name, frozen_array(value))
        if self.horizon_step is not None:
            horizon = per_run(self.horizon_step, n_runs, "horizon_step")
            if not np.all(np.isfinite(horizon) & (horizon >= 0)):
                raise BayesGRPOError(f"horizon_step must be finite and >= 0 for every run; got {horizon}.")
            object.__setattr__(self, "horizon_step", frozen_array(horizon))
        if self.run_ids is None:
            run_ids = tuple(str(i) for i in range(n_runs))
        else:
            run_ids = tuple(str(r) for r in self.run_ids)
        if len(run_ids) != n_runs:
            raise BayesGRPOError(f"{len(run_ids)} run_ids given for {n_runs} runs.")
        object.__setattr__(self, "run_ids", run_ids)
        self._check_noise(first.shape[0], n_runs)
        for name in ("recent_rise", "recent_rise_se", "long_rise", "long_rise_se"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, frozen_array(per_run(value, n_runs, name)))

    def _check_noise(self, n_draws: int, n_runs: int) -> None:
        """Validate and freeze ``noise_sd`` as (S, R) and ``noise_df`` as (S,)."""
        df = np.asarray(self.noise_df, dtype=float)
        df = np.full(n_draws, float(df)) if df.ndim == 0 else df.reshape(-1)
        if df.shape != (n_draws,) or not np.all(df > 0):
            raise BayesGRPOError(f"noise_df must be one positive number or one per draw ({n_draws}).")
        object.__setattr__(self, "noise_df", frozen_array(df))
        if self.noise_sd is None:
            return
        sd = np.asarray(self.noise_sd, dtype=float)
        if sd.ndim == 1:
            sd = sd[:, None]
        if sd.shape != (n_draws, n_runs) or not np.all(np.isfinite(sd) & (sd >= 0)):
            raise BayesGRPOError(
                f"noise_sd must be finite, >= 0 and of shape ({n_draws}, {n_runs}); got shape {sd.shape}."
            )
        object.__setattr__(self, "noise_sd", frozen_array(sd))

    @property
    def has_noise(self) -> bool:
        """Whether the draws carry the noise of a logged reward (the predictive band is available)."""
        return self.noise_sd is not None

    @classmethod
    def from_model_data(
        cls,
        draws: Mapping[str, np.ndarray],
        data: ModelData,
        curve: str | None = None,
    ) -> CurveDraws:
        """Curve draws from the model's posterior form (:func:`bayesgrpo.model.predict.run_draws`).

        Parameters
        ----------
        draws : mapping of str to ndarray
            ``run_draws(posterior, curve)``: ``r0``, ``r1``, ``asymptote`` in normalised reward
            (``y = (r - lower) / (upper - lower)``), shape parameters in normalised progress, each
            ``(S, R)``; ``sigma`` (normalised reward) and ``nu``, where given, become the noise of
            a logged reward (``noise_sd``, ``noise_df``).
        data : ModelData
            The fit data: reward bounds ``lower``/``upper``, ``progress_scale`` and
            ``step_to_progress`` (``t = step * step_to_progress / progress_scale``), ``horizon_step``
            and ``run_ids``.
        curve : str, optional
            The family; inferred from the shape parameters' names when not given.

        Returns
        -------
        CurveDraws
            Levels in reward units, ``step_scale = progress_scale / step_to_progress``,
            ``reward_scale = upper - lower``, the data's horizons and run ids.
        """
        curve = infer_curve(draws) if curve is None else curve
        family = get_curve(curve)
        lower = np.asarray(data.lower, dtype=float)
        width = np.asarray(data.upper, dtype=float) - lower
        for name in ("r0", *family.shape_params):
            if name not in draws:
                raise BayesGRPOError(
                    f"draws lack {name!r}; pass the output of run_draws(posterior, {curve!r})."
                )
            shape = np.shape(draws[name])
            if len(shape) != 2 or shape[1] != data.n_runs:
                raise BayesGRPOError(
                    f"draws[{name!r}] has shape {shape}; expected (S, {data.n_runs}): "
                    "one column per run of data."
                )
        level = "asymptote" if "asymptote" in draws else "r1"
        if level not in draws:
            raise BayesGRPOError("draws lack both 'asymptote' and 'r1'; pass the output of run_draws.")
        params = {
            "r0": lower + np.asarray(draws["r0"], dtype=float) * width,
            level: lower + np.asarray(draws[level], dtype=float) * width,
        }
        params.update({name: np.asarray(draws[name], dtype=float) for name in family.shape_params})
        logger.debug(
            "curve draws from the model: %d draws of %d runs, family %r",
            params["r0"].shape[0],
            data.n_runs,
            curve,
        )
        noise_sd: np.ndarray | None = None
        noise_df: np.ndarray | float = float("inf")
        if "sigma" in draws:
            noise_sd = np.asarray(draws["sigma"], dtype=float) * width
            df = np.asarray(draws.get("nu", float("inf")), dtype=float)
            noise_df = df.reshape(-1) if df.ndim else float(df)
        return cls(
            curve=curve,
            params=params,
            step_scale=np.asarray(data.progress_scale, dtype=float)
            / np.asarray(data.step_to_progress, dtype=float),
            reward_scale=width,
            horizon_step=np.asarray(data.horizon_step, dtype=float),
            run_ids=tuple(data.run_ids),
            step_offset=float(updates_before_step),
            noise_sd=noise_sd,
            noise_df=noise_df,
        )

    @property
    def n_draws(self) -> int:
        """Number of posterior draws ``S``."""
        return int(self.params["r0"].shape[0])

    @property
    def n_runs(self) -> int:
        """Number of runs ``R``."""
        return int(self.params["r0"].shape[1])

    @property
    def shape(self) -> dict[str, np.ndarray]:
        """The family's shape parameters, each ``(S, R)``."""
        return {name: self.params[name] for name in get_curve(self.curve).shape_params}

    @property
    def total_gain(self) -> np.ndarray:
        """``A - R0`` per draw and run, ``(S, R)``: the gain the run makes in the limit."""
        return np.asarray(self.params["asymptote"] - self.params["r0"])

    def select(self, run_ids: Sequence[str]) -> CurveDraws:
        """The same draws for a subset of the runs, in the order given.

        Raises
        ------
        BayesGRPOError
            When a run id is not among :attr:`run_ids`.
        """
        assert self.run_ids is not None  # set by __post_init__
        unknown = [r for r in run_ids if r not in self.run_ids]
        if unknown:
            raise BayesGRPOError(
                f"runs {unknown[:5]} are not in these curve draws (they hold {list(self.run_ids)[:5]}...)"
            )
        index = [self.run_ids.index(r) for r in run_ids]
        return replace(
            self,
            params={name: value[:, index] for name, value in self.params.items()},
            step_scale=np.asarray(self.step_scale)[index],
            reward_scale=np.asarray(self.reward_scale)[index],
            horizon_step=None if self.horizon_step is None else np.asarray(self.horizon_step)[index],
            run_ids=tuple(run_ids),
            noise_sd=None if self.noise_sd is None else np.asarray(self.noise_sd)[:, index],
            recent_rise=None if self.recent_rise is None else np.asarray(self.recent_rise)[index],
            recent_rise_se=None if self.recent_rise_se is None else np.asarray(self.recent_rise_se)[index],
            long_rise=None if self.long_rise is None else np.asarray(self.long_rise)[index],
            long_rise_se=None if self.long_rise_se is None else np.asarray(self.long_rise_se)[index],
        )

    def to_t(self, steps: np.ndarray) -> np.ndarray:
        """Progress of steps: ``(R,)`` steps give ``(R,)``, ``(R, N)`` give ``(R, N)``."""
        steps = np.asarray(steps, dtype=float)
        step_scale = np.asarray(self.step_scale)
        scale = step_scale if steps.ndim <= 1 else step_scale[:, None]
        return np.asarray(np.maximum(steps - self.step_offset, 0.0) / scale)


# --------------------------------------------------------------------------------------------
# Curve values
# --------------------------------------------------------------------------------------------


def gain_share(cd: CurveDraws, t: np.ndarray) -> np.ndarray:
    """``g`` at progress ``t`` of shape (R,) -> (S, R), or (R, N) -> (S, R, N)."""
    t = np.asarray(t, dtype=float)
    if t.ndim == 1:
        return np.asarray(get_curve(cd.curve).g(t[None, :], **cd.shape))
    return np.asarray(get_curve(cd.curve).g(t[None, :, :], **{k: v[:, :, None] for k, v in cd.shape.items()}))


def gain_share_rate(cd: CurveDraws, t: np.ndarray) -> np.ndarray:
    """``g'`` at progress ``t``: (R,) or (S, R) -> (S, R)."""
    return np.asarray(get_curve(cd.curve).dg_dt(np.asarray(t, dtype=float), **cd.shape))


def reward_at(cd: CurveDraws, steps: Any) -> np.ndarray:
    """Draws of the expected reward at steps.

    Parameters
    ----------
    cd : CurveDraws
    steps : array_like
        Steps, shape ``(N,)`` (the same for every run) or ``(R, N)``.

    Returns
    -------
    ndarray, shape (S, R, N)
    """
    steps = np.asarray(steps, dtype=float)
    if steps.ndim == 1:
        steps = np.broadcast_to(steps, (cd.n_runs, steps.size))
    if steps.ndim != 2 or steps.shape[0] != cd.n_runs:
        raise BayesGRPOError(f"steps must have shape (N,) or ({cd.n_runs}, N); got {steps.shape}.")
    if not np.all(np.isfinite(steps) & (steps >= 0)):
        raise BayesGRPOError("steps must be finite and >= 0.")
    g = gain_share(cd, cd.to_t(steps))
    return np.asarray(cd.params["r0"][:, :, None] + cd.total_gain[:, :, None] * g)


#: The two bands draws answer for: a logged reward (curve plus noise) and the expected curve.
BANDS: tuple[str, ...] = ("predictive", "curve")
#: The band drawn around logged points unless another is asked for.
DEFAULT_BAND = "predictive"


def check_band(band: str) -> str:
    """``band`` when it is one of :data:`BANDS`, else a clear error."""
    if band not in BANDS:
        raise BayesGRPOError(
            f"unknown band {band!r}: 'predictive' (a logged reward, noise included) or 'curve' (the "
            "expected reward)"
        )
    return band


def predictive_at(cd: CurveDraws, steps: Any, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Draws of a logged reward at steps: the curve plus one logged point's noise.

    The noise is each draw's Student-t (``noise_sd``, ``noise_df``).

    Parameters
    ----------
    cd : CurveDraws
        With ``noise_sd`` (a fitted model's or a live update's draws carry it).
    steps : array_like
        As :func:`reward_at`.
    rng : numpy Generator or seed, optional

    Returns
    -------
    ndarray, shape (S, R, N)

    Raises
    ------
    BayesGRPOError
        When the draws carry no noise.
    """
    if cd.noise_sd is None:
        raise BayesGRPOError(
            "these curve draws carry no noise of a logged reward (no predictive band); ask for the "
            "curve band, or make them with the noise (RewardModel.curve_draws, LiveUpdate.curve_draws)"
        )
    curve = reward_at(cd, steps)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    df = np.broadcast_to(np.asarray(cd.noise_df, dtype=float)[:, None, None], curve.shape)
    finite = np.isfinite(df)
    noise = rng.standard_t(np.where(finite, df, 1.0)) if finite.any() else rng.standard_normal(curve.shape)
    if finite.any() and not finite.all():  # Gaussian noise where the degrees of freedom are infinite
        noise = np.where(finite, noise, rng.standard_normal(curve.shape))
    return np.asarray(curve + noise * np.asarray(cd.noise_sd)[:, :, None])


def band_draws(
    cd: CurveDraws, steps: Any, band: str = DEFAULT_BAND, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """Draws at steps of the band asked for: :func:`predictive_at` or :func:`reward_at`, (S, R, N)."""
    return predictive_at(cd, steps, rng) if check_band(band) == "predictive" else reward_at(cd, steps)
