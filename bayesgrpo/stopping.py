"""Stopping questions on posterior draws of reward curves (DESIGN.md section 4).

For a run at step ``s`` with a horizon ``T`` (the step it is planned to end at), from draws of its
curve parameters:

* :func:`remaining_gain` and :func:`prob_gain_below`: draws of ``R(T) - R(s)`` and
  ``P(R(T) - R(s) < eps)``;
* :func:`expected_gain`: the expected remaining gain with an equal-tailed interval;
* :func:`steps_to_fraction`: the step at which 80 / 90 / 95% of the run's *total* gain (the gain
  it makes in the limit, ``A - R0``) is first reached, with intervals, and how likely that step
  lies beyond the horizon;
* :func:`phase`: slow start, rapid improvement or plateau, with posterior probabilities;
* rules (:class:`PlateauRule`, :class:`BudgetRule`, :class:`TargetRule`) that turn these into a
  :class:`Decision` per run: stop or continue, the probability behind it and a one-line reason.

Everything is a pure function of a :class:`CurveDraws` (the curve parameters per posterior draw,
in reward units, plus the map from steps to the curve's progress axis), vectorised over draws and
runs: arrays are ``(S, R)`` (draws x runs) and no function loops over draws. "Reward" here is the
expected curve ``R(t)``, not a noisy logged point.

Phases
------
The phase at progress ``t`` is read from the slope of the curve, ``R'(t) = (A - R0) g'(t)``, through
the *relative rate* ``rho(t) = g'(t) / g'(t_peak)``, where ``t_peak`` is the progress of the curve's
fastest gain (the mode of ``g'``), searched from the point where :data:`PEAK_FROM_GAIN` of the gain
is made (so that families whose rate is infinite at ``t = 0``, Weibull ``k < 1`` and logistic
``B < 1``, still have a finite peak). ``rho`` does not depend on the sign or size of the gain. Then

* ``"slow_start"``: before the peak and ``rho < LOW_RATE``;
* ``"plateau"``: after the peak, ``rho < LOW_RATE`` (a curve falling back from an overshoot has
  ``rho < 0`` and counts as low) and at least :data:`PLATEAU_MIN_GAIN` of the total gain made;
* ``"rapid"``: otherwise (the rate is high, or most of the gain is still ahead).

So ``exp`` and ``power`` (fastest at the start) begin in ``"rapid"`` and never have a slow start;
``exp`` reaches its plateau once ``1 - 0.99 * LOW_RATE`` (80.2%) of its gain is made; Weibull
``k > 1``, logistic ``B > 1`` and the oscillator (zero slope at ``t = 0``) begin in
``"slow_start"``. The probability of a phase is the share of draws in it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from bayesgrpo.curves import CURVES, asymptote_from_levels, get_curve, time_to_fraction
from bayesgrpo.errors import BayesGRPOError

if TYPE_CHECKING:
    from bayesgrpo.model.data import ModelData

__all__ = [
    "DEFAULT_FRACTIONS",
    "LOW_RATE",
    "PEAK_FROM_GAIN",
    "PHASES",
    "PLATEAU_MIN_GAIN",
    "BudgetRule",
    "CurveDraws",
    "Decision",
    "PlateauRule",
    "StoppingRule",
    "TargetRule",
    "decisions_table",
    "expected_gain",
    "fraction_step_draws",
    "phase",
    "phase_draws",
    "prob_gain_below",
    "rate_peak_time",
    "remaining_gain",
    "reward_at",
    "steps_to_fraction",
]

logger = logging.getLogger(__name__)

#: The phases, in the order a rising curve goes through them (codes of :func:`phase_draws`).
PHASES: tuple[str, ...] = ("slow_start", "rapid", "plateau")
#: Relative rate ``g'(t) / g'(t_peak)`` below which a run is in its slow start (before the peak)
#: or on its plateau (after it). For ``exp`` the plateau then starts at 80.2% of the gain.
LOW_RATE = 0.2
#: Share of the total gain a run must have made to be on its plateau: a long-tailed curve whose
#: rate has fallen but which has most of its gain ahead (Weibull ``k < 1``, power with a small
#: exponent) is not called a plateau.
PLATEAU_MIN_GAIN = 0.5
#: The peak rate is searched from the progress at which this share of the gain is made, which
#: keeps it finite where ``g'(0)`` is infinite and changes it by at most 1% where the rate is
#: largest at ``t = 0``.
PEAK_FROM_GAIN = 0.01
#: Fractions of the total gain of :func:`steps_to_fraction` ("t80", "t90", "t95").
DEFAULT_FRACTIONS: tuple[float, ...] = (0.8, 0.9, 0.95)
#: Later steps at which :class:`BudgetRule` weighs continuing (evenly spaced up to the horizon).
BUDGET_GRID = 100
# Half-width of the band around critical damping where the oscillator's peak-rate time uses its
# series (the truncation error there is below 1e-12).
_CRITICAL_BAND = 1e-6


# --------------------------------------------------------------------------------------------
# Input: posterior draws of curve parameters
# --------------------------------------------------------------------------------------------


def _per_run(value: Any, n_runs: int, name: str) -> np.ndarray:
    """``value`` as a float array of shape (R,): a scalar is repeated, an array must have R."""
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        return np.full(n_runs, float(array))
    if array.shape != (n_runs,):
        raise BayesGRPOError(
            f"{name} has shape {array.shape}; give one number or one per run, shape ({n_runs},)."
        )
    return array.copy()


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=float)
    array.setflags(write=False)
    return array


def _infer_curve(names: Iterable[str]) -> str:
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
        The curve family (a key of :data:`bayesgrpo.curves.CURVES`).
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
        object.__setattr__(self, "params", MappingProxyType({k: _frozen(v) for k, v in normalised.items()}))
        for name in ("step_scale", "reward_scale"):
            value = _per_run(getattr(self, name), n_runs, name)
            if not np.all(np.isfinite(value) & (value > 0)):
                raise BayesGRPOError(f"{name} must be finite and > 0 for every run; got {value}.")
            object.__setattr__(self, name, _frozen(value))
        if self.horizon_step is not None:
            horizon = _per_run(self.horizon_step, n_runs, "horizon_step")
            if not np.all(np.isfinite(horizon) & (horizon >= 0)):
                raise BayesGRPOError(f"horizon_step must be finite and >= 0 for every run; got {horizon}.")
            object.__setattr__(self, "horizon_step", _frozen(horizon))
        if self.run_ids is None:
            run_ids = tuple(str(i) for i in range(n_runs))
        else:
            run_ids = tuple(str(r) for r in self.run_ids)
        if len(run_ids) != n_runs:
            raise BayesGRPOError(f"{len(run_ids)} run_ids given for {n_runs} runs.")
        object.__setattr__(self, "run_ids", run_ids)

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
            ``(S, R)``; ``sigma`` and ``nu`` are ignored.
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
        from bayesgrpo.model.data import UPDATES_BEFORE_STEP as updates_before_step

        curve = _infer_curve(draws) if curve is None else curve
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
        logger.debug("curve draws from the model: %d draws of %d runs, family %r",
                     params["r0"].shape[0], data.n_runs, curve)
        return cls(
            curve=curve,
            params=params,
            step_scale=np.asarray(data.progress_scale, dtype=float)
            / np.asarray(data.step_to_progress, dtype=float),
            reward_scale=width,
            horizon_step=np.asarray(data.horizon_step, dtype=float),
            run_ids=tuple(data.run_ids),
            step_offset=float(updates_before_step),
        )

    @property
    def n_draws(self) -> int:
        return int(self.params["r0"].shape[0])

    @property
    def n_runs(self) -> int:
        return int(self.params["r0"].shape[1])

    @property
    def shape(self) -> dict[str, np.ndarray]:
        """The family's shape parameters, each ``(S, R)``."""
        return {name: self.params[name] for name in get_curve(self.curve).shape_params}

    @property
    def total_gain(self) -> np.ndarray:
        """``A - R0`` per draw and run, ``(S, R)``: the gain the run makes in the limit."""
        return self.params["asymptote"] - self.params["r0"]

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
            raise BayesGRPOError(f"runs {unknown[:5]} are not in these curve draws (they hold {list(self.run_ids)[:5]}...)")
        index = [self.run_ids.index(r) for r in run_ids]
        return replace(
            self,
            params={name: value[:, index] for name, value in self.params.items()},
            step_scale=np.asarray(self.step_scale)[index],
            reward_scale=np.asarray(self.reward_scale)[index],
            horizon_step=None if self.horizon_step is None else np.asarray(self.horizon_step)[index],
            run_ids=tuple(run_ids),
        )

    def to_t(self, steps: np.ndarray) -> np.ndarray:
        """Progress of steps: ``(R,)`` steps give ``(R,)``, ``(R, N)`` give ``(R, N)``."""
        steps = np.asarray(steps, dtype=float)
        scale = self.step_scale if steps.ndim <= 1 else self.step_scale[:, None]
        return np.maximum(steps - self.step_offset, 0.0) / scale


# --------------------------------------------------------------------------------------------
# Checks of the question's inputs
# --------------------------------------------------------------------------------------------


def _steps(cd: CurveDraws, step_now: Any, horizon_step: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(s, T)`` per run, each (R,), checked: finite, ``0 <= s <= T``."""
    if horizon_step is None:
        if cd.horizon_step is None:
            raise BayesGRPOError("no horizon: pass horizon_step=... (the step the run is planned to end at).")
        horizon_step = cd.horizon_step
    s = _per_run(step_now, cd.n_runs, "step_now")
    T = _per_run(horizon_step, cd.n_runs, "horizon_step")
    for name, value in (("step_now", s), ("horizon_step", T)):
        if not np.all(np.isfinite(value) & (value >= 0)):
            raise BayesGRPOError(f"{name} must be finite and >= 0; got {value}.")
    past = np.flatnonzero(s > T)
    if past.size:
        i = past[0]
        raise BayesGRPOError(
            f"step_now={s[i]:g} is past the horizon {T[i]:g} of run {cd.run_ids[i]!r}; "
            "pass a horizon_step at or after the current step."
        )
    return s, T


def _check_prob(value: float, name: str) -> float:
    value = float(value)
    if not 0.0 < value < 1.0:
        raise BayesGRPOError(f"{name} must lie strictly between 0 and 1; got {value:g}.")
    return value


def _check_eps(eps: float) -> float:
    eps = float(eps)
    if not (math.isfinite(eps) and eps >= 0):
        raise BayesGRPOError(f"eps must be a finite number >= 0 (a gain in reward units); got {eps:g}.")
    return eps


def _check_fractions(fractions: Sequence[float]) -> np.ndarray:
    q = np.atleast_1d(np.asarray(fractions, dtype=float))
    if q.ndim != 1 or q.size == 0 or not np.all((q > 0) & (q < 1)):
        raise BayesGRPOError(f"fractions of the gain must lie strictly between 0 and 1; got {list(q)}.")
    return q


# --------------------------------------------------------------------------------------------
# Curve values
# --------------------------------------------------------------------------------------------


def _g(cd: CurveDraws, t: np.ndarray) -> np.ndarray:
    """``g`` at progress ``t`` of shape (R,) -> (S, R), or (R, N) -> (S, R, N)."""
    t = np.asarray(t, dtype=float)
    if t.ndim == 1:
        return get_curve(cd.curve).g(t[None, :], **cd.shape)
    return get_curve(cd.curve).g(t[None, :, :], **{k: v[:, :, None] for k, v in cd.shape.items()})


def _dg_dt(cd: CurveDraws, t: np.ndarray) -> np.ndarray:
    """``g'`` at progress ``t``: (R,) or (S, R) -> (S, R)."""
    return get_curve(cd.curve).dg_dt(np.asarray(t, dtype=float), **cd.shape)


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
    g = _g(cd, cd.to_t(steps))
    return cd.params["r0"][:, :, None] + cd.total_gain[:, :, None] * g


def remaining_gain(cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> np.ndarray:
    """Draws of the gain still to come, ``R(T) - R(s)``.

    Parameters
    ----------
    cd : CurveDraws
    step_now : float or array of shape (R,)
        The current step ``s`` of each run.
    horizon_step : float or array of shape (R,), optional
        The horizon ``T``; default ``cd.horizon_step``.

    Returns
    -------
    ndarray, shape (S, R)
        In reward units; negative where the curve falls between ``s`` and ``T`` (a falling run,
        or an oscillator coming back from an overshoot).

    Raises
    ------
    BayesGRPOError
        Negative or non-finite steps, ``step_now`` past the horizon, or no horizon.
    """
    s, T = _steps(cd, step_now, horizon_step)
    return cd.total_gain * (_g(cd, cd.to_t(T)) - _g(cd, cd.to_t(s)))


def _eps_per_run(cd: CurveDraws, eps: float, relative: bool) -> np.ndarray:
    eps = _check_eps(eps)
    return eps * cd.reward_scale if relative else np.full(cd.n_runs, eps)


def prob_gain_below(
    cd: CurveDraws,
    step_now: Any,
    horizon_step: Any = None,
    *,
    eps: float,
    relative: bool = False,
) -> np.ndarray:
    """``P(R(T) - R(s) < eps)`` per run: the posterior probability that the run is done improving.

    Parameters
    ----------
    cd, step_now, horizon_step
        As :func:`remaining_gain`.
    eps : float
        Gain that counts as nothing, ``>= 0``, in reward units (or a fraction of each run's
        ``reward_scale`` when ``relative``).
    relative : bool

    Returns
    -------
    ndarray, shape (R,)
    """
    gain = remaining_gain(cd, step_now, horizon_step)
    return (gain < _eps_per_run(cd, eps, relative)[None, :]).mean(axis=0)


def _interval_bounds(draws: np.ndarray, interval: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and equal-tailed ``interval`` over the first axis."""
    interval = _check_prob(interval, "interval")
    tail = (1.0 - interval) / 2.0
    lower, upper = np.quantile(draws, [tail, 1.0 - tail], axis=0)
    return draws.mean(axis=0), lower, upper


def expected_gain(
    cd: CurveDraws, step_now: Any, horizon_step: Any = None, *, interval: float = 0.9
) -> pd.DataFrame:
    """Expected remaining gain ``E[R(T) - R(s)]`` per run, with an equal-tailed interval.

    Returns
    -------
    DataFrame
        One row per run: ``run_id, step, horizon_step, mean, lower, upper`` (``lower``/``upper``
        the ``(1 - interval)/2`` and ``(1 + interval)/2`` quantiles), gains in reward units.
    """
    s, T = _steps(cd, step_now, horizon_step)
    mean, lower, upper = _interval_bounds(remaining_gain(cd, s, T), interval)
    return pd.DataFrame(
        {"run_id": list(cd.run_ids), "step": s, "horizon_step": T,
         "mean": mean, "lower": lower, "upper": upper}
    )


# --------------------------------------------------------------------------------------------
# Steps to a fraction of the total gain
# --------------------------------------------------------------------------------------------


def fraction_step_draws(cd: CurveDraws, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> np.ndarray:
    """Draws of the first step at which each fraction of the total gain ``A - R0`` is reached.

    ``g(t_q) = q`` (:func:`bayesgrpo.curves.time_to_fraction`): the first crossing, which for an
    oscillator that overshoots is on its first rise. The same for a falling curve (the fraction
    of its loss).

    Returns
    -------
    ndarray, shape (S, R, F)
        Steps, ``F = len(fractions)``; ``inf`` for a draw whose step overflows float64 (a
        curve that all but never gets there).
    """
    q = _check_fractions(fractions)
    shape = {name: value[:, :, None] for name, value in cd.shape.items()}
    with np.errstate(over="ignore"):  # a draw that never gets there within float range: inf
        t_q = time_to_fraction(cd.curve, q[None, None, :], **shape)
        return np.asarray(t_q) * cd.step_scale[None, :, None] + cd.step_offset


def steps_to_fraction(
    cd: CurveDraws,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    *,
    interval: float = 0.9,
    horizon_step: Any = None,
) -> pd.DataFrame:
    """Step at which 80 / 90 / 95% (``fractions``) of each run's total gain is first reached.

    Parameters
    ----------
    cd : CurveDraws
    fractions : sequence of float
        Fractions of the total gain ``A - R0``, each strictly between 0 and 1.
    interval : float
        Probability mass of the equal-tailed interval.
    horizon_step : float or array of shape (R,), optional
        Horizon to compare with; default ``cd.horizon_step`` (none: NaN in the last column).

    Returns
    -------
    DataFrame
        One row per run and fraction: ``run_id, fraction, median, lower, upper, horizon_step,
        prob_beyond_horizon`` (the posterior probability that the step lies after the horizon).
    """
    q = _check_fractions(fractions)
    steps = fraction_step_draws(cd, q)
    interval = _check_prob(interval, "interval")
    tail = (1.0 - interval) / 2.0
    lower, median, upper = np.quantile(steps, [tail, 0.5, 1.0 - tail], axis=0)
    if horizon_step is None:
        horizon_step = cd.horizon_step
    if horizon_step is None:
        horizon = np.full(cd.n_runs, np.nan)
        beyond = np.full((cd.n_runs, q.size), np.nan)
    else:
        horizon = _per_run(horizon_step, cd.n_runs, "horizon_step")
        beyond = (steps > horizon[None, :, None]).mean(axis=0)
    n_q = q.size
    return pd.DataFrame({
        "run_id": np.repeat(np.array(cd.run_ids, dtype=object), n_q),
        "fraction": np.tile(q, cd.n_runs),
        "median": median.ravel(),
        "lower": lower.ravel(),
        "upper": upper.ravel(),
        "horizon_step": np.repeat(horizon, n_q),
        "prob_beyond_horizon": beyond.ravel(),
    })


# --------------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------------


def _argmax_on(fun: Any, upper: np.ndarray, n_grid: int = 65, iterations: int = 40) -> np.ndarray:
    """Elementwise argmax of ``fun`` over ``[0, upper]``: a grid, then golden-section search
    between the grid neighbours of the best grid point (vectorised over all elements)."""
    upper = np.asarray(upper, dtype=float)
    grid = np.linspace(0.0, 1.0, n_grid).reshape((n_grid,) + (1,) * upper.ndim) * upper
    best = np.argmax(fun(grid), axis=0)
    spacing = upper / (n_grid - 1)
    lo = np.maximum(np.take_along_axis(grid, best[None], axis=0)[0] - spacing, 0.0)
    hi = np.minimum(lo + 2.0 * spacing, upper)
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(iterations):
        a = hi - ratio * (hi - lo)
        b = lo + ratio * (hi - lo)
        left = fun(a) >= fun(b)
        hi = np.where(left, b, hi)
        lo = np.where(left, lo, a)
    return 0.5 * (lo + hi)


def _rate_mode(curve: str, shape: Mapping[str, np.ndarray]) -> np.ndarray:
    """Progress at which ``g'`` is largest over ``t >= 0`` (0 where it is largest at ``t = 0``)."""
    if curve in ("exp", "power"):
        return np.zeros_like(next(iter(shape.values())))
    if curve in ("weibull", "two_timescale"):
        tau, k = shape["tau"], shape["k"]
        # mode of the Weibull density: tau ((k - 1)/k)^(1/k) for k > 1
        weibull_mode = np.where(k > 1, tau * (np.maximum(k - 1.0, 0.0) / k) ** (1.0 / k), 0.0)
        if curve == "weibull":
            return weibull_mode
        # adding the slow term's decreasing rate moves the mode earlier, into [0, weibull_mode]
        return _argmax_on(lambda t: get_curve(curve).dg_dt(t, **shape), weibull_mode)
    if curve == "logistic":
        t_mid, B = shape["t_mid"], shape["B"]
        # d/dt log g' = 0  <=>  (t/t_mid)^B = (B - 1)/(B + 1), for B > 1
        return np.where(B > 1, t_mid * (np.maximum(B - 1.0, 0.0) / (B + 1.0)) ** (1.0 / B), 0.0)
    if curve == "oscillator":
        tau, zeta = shape["tau"], shape["zeta"]
        omega = 2.0 * zeta / tau
        # g' ~ exp(-zeta omega t) sin(omega_d t): peak at acos(zeta) / (omega sqrt(1 - zeta^2)),
        # continued as acosh(zeta) / (omega sqrt(zeta^2 - 1)) above critical damping, 1/omega at it.
        d = 1.0 - zeta**2
        under = np.arccos(np.clip(zeta, -1.0, 1.0)) / np.sqrt(np.maximum(d, _CRITICAL_BAND))
        over = np.arccosh(np.maximum(zeta, 1.0)) / np.sqrt(np.maximum(-d, _CRITICAL_BAND))
        near = 1.0 + (1.0 - zeta) / 3.0
        factor = np.where(d > _CRITICAL_BAND, under, np.where(d < -_CRITICAL_BAND, over, near))
        return factor / omega
    raise BayesGRPOError(
        f"phase: no peak rate defined for curve family {curve!r}; add it to stopping._rate_mode."
    )


def rate_peak_time(curve: str, **shape: np.ndarray) -> np.ndarray:
    """Progress ``t_peak`` of a curve's fastest gain, as used by the phases.

    The mode of ``g'`` (closed form for every family), but no earlier than the progress at which
    :data:`PEAK_FROM_GAIN` of the gain is made. ``g'`` is unimodal in every family (the
    oscillator's later peaks are lower than its first), so ``g'(t_peak)`` is the largest rate
    over ``t >= t_{PEAK_FROM_GAIN}``.

    Parameters
    ----------
    curve : str
    **shape : ndarray
        The family's shape parameters (broadcast together).

    Returns
    -------
    ndarray
    """
    family = get_curve(curve)
    values = dict(zip(family.shape_params, np.broadcast_arrays(
        *(np.asarray(shape[name], dtype=float) for name in family.shape_params))))
    peak = np.array(_rate_mode(curve, values), dtype=float)
    # g rises up to the mode of g', so the mode is early exactly where g(mode) < PEAK_FROM_GAIN;
    # solving g(t) = PEAK_FROM_GAIN only there saves the oscillator's bisection elsewhere
    early = family.g(peak, **values) < PEAK_FROM_GAIN
    if np.any(early):
        subset = {name: value[early] for name, value in values.items()}
        peak[early] = time_to_fraction(curve, PEAK_FROM_GAIN, **subset)
    return peak


def _phase_parts(cd: CurveDraws, step_now: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per draw and run: phase codes (indices of :data:`PHASES`), ``g(s)`` and ``rho(s)``."""
    s = _per_run(step_now, cd.n_runs, "step_now")
    if not np.all(np.isfinite(s) & (s >= 0)):
        raise BayesGRPOError(f"step_now must be finite and >= 0; got {s}.")
    t = np.broadcast_to(cd.to_t(s)[None, :], (cd.n_draws, cd.n_runs))
    t_peak = rate_peak_time(cd.curve, **cd.shape)
    with np.errstate(divide="ignore", invalid="ignore"):  # a degenerate draw (0/0) counts as rapid
        rho = _dg_dt(cd, t) / _dg_dt(cd, t_peak)
    share = _g(cd, cd.to_t(s))
    low = rho < LOW_RATE
    before = t < t_peak
    codes = np.full(t.shape, PHASES.index("rapid"), dtype=np.int8)
    codes[low & before] = PHASES.index("slow_start")
    codes[low & ~before & (share >= PLATEAU_MIN_GAIN)] = PHASES.index("plateau")
    return codes, share, rho


def phase_draws(cd: CurveDraws, step_now: Any) -> np.ndarray:
    """Phase of each draw of each run at ``step_now``: codes into :data:`PHASES`, shape (S, R).

    See the module docstring for the definition and :data:`LOW_RATE`, :data:`PLATEAU_MIN_GAIN`,
    :data:`PEAK_FROM_GAIN` for its thresholds.
    """
    return _phase_parts(cd, step_now)[0]


def phase(cd: CurveDraws, step_now: Any) -> pd.DataFrame:
    """Current phase of each run (slow start, rapid improvement, plateau) with its probability.

    Parameters
    ----------
    cd : CurveDraws
    step_now : float or array of shape (R,)

    Returns
    -------
    DataFrame
        One row per run: ``run_id, step``, the probability of each phase (columns named as
        :data:`PHASES`), ``phase`` (the most probable), ``probability`` (its probability) and
        ``gain_share`` (posterior mean of the share of the total gain made, ``g(s)``).
    """
    codes, share, _ = _phase_parts(cd, step_now)
    probs = np.stack([(codes == i).mean(axis=0) for i in range(len(PHASES))], axis=1)  # (R, 3)
    best = probs.argmax(axis=1)
    frame = pd.DataFrame({"run_id": list(cd.run_ids), "step": _per_run(step_now, cd.n_runs, "step_now")})
    for i, name in enumerate(PHASES):
        frame[name] = probs[:, i]
    frame["phase"] = [PHASES[i] for i in best]
    frame["probability"] = probs[np.arange(cd.n_runs), best]
    frame["gain_share"] = share.mean(axis=0)
    return frame


# --------------------------------------------------------------------------------------------
# Decisions and rules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What a stopping rule says about one run.

    Attributes
    ----------
    run_id : str or None
    rule : str
        The rule and its settings, e.g. ``"PlateauRule(eps=0.01, prob=0.9)"``.
    decision : {"stop", "continue"}
    probability : float
        The posterior probability the rule compared with its threshold, as named in ``reason``
        (for :class:`PlateauRule` ``P(gain < eps)`` whatever the decision).
    reason : str
        One line of plain words with the numbers.
    step, horizon_step : float
    expected_gain, gain_lower, gain_upper : float
        Expected remaining gain to the horizon and its interval (reward units).
    details : mapping of str to float
        Further numbers of the rule (e.g. the best later step of :class:`BudgetRule`).
    """

    run_id: str | None
    rule: str
    decision: str
    probability: float
    reason: str
    step: float
    horizon_step: float
    expected_gain: float
    gain_lower: float
    gain_upper: float
    details: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)

    @property
    def stop(self) -> bool:
        return self.decision == "stop"


class StoppingRule(Protocol):
    """Anything with ``decide(cd, step_now, horizon_step=None) -> list[Decision]``."""

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]: ...


def _fmt_step(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:g}"


def _gain_numbers(cd: CurveDraws, s: np.ndarray, T: np.ndarray, interval: float):
    gain = remaining_gain(cd, s, T)
    return gain, *_interval_bounds(gain, interval)


def _decisions(rule: str, cd: CurveDraws, s: np.ndarray, T: np.ndarray, stop: np.ndarray,
               probability: np.ndarray, reasons: Sequence[str], gain_stats: Sequence[np.ndarray],
               details: Mapping[str, np.ndarray] | None = None) -> list[Decision]:
    mean, lower, upper = gain_stats
    details = details or {}
    return [
        Decision(
            run_id=cd.run_ids[i],
            rule=rule,
            decision="stop" if stop[i] else "continue",
            probability=float(probability[i]),
            reason=reasons[i],
            step=float(s[i]),
            horizon_step=float(T[i]),
            expected_gain=float(mean[i]),
            gain_lower=float(lower[i]),
            gain_upper=float(upper[i]),
            details={name: float(value[i]) for name, value in details.items()},
        )
        for i in range(cd.n_runs)
    ]


@dataclass(frozen=True)
class PlateauRule:
    """Stop when the run is on its plateau: ``P(R(T) - R(s) < eps) >= prob``.

    Parameters
    ----------
    eps : float
        Gain that counts as nothing, ``>= 0``, in reward units (a fraction of each run's
        ``reward_scale`` when ``relative``).
    prob : float
        Required posterior probability, in (0, 1).
    relative : bool
    interval : float
        Interval of the expected gain reported with the decision.
    """

    eps: float
    prob: float = 0.9
    relative: bool = False
    interval: float = 0.9

    def __post_init__(self) -> None:
        _check_eps(self.eps)
        _check_prob(self.prob, "prob")
        _check_prob(self.interval, "interval")

    def __str__(self) -> str:
        unit = " of the reward range" if self.relative else ""
        return f"PlateauRule(eps={self.eps:g}{unit}, prob={self.prob:g})"

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = _steps(cd, step_now, horizon_step)
        gain, *stats = _gain_numbers(cd, s, T, self.interval)
        eps = _eps_per_run(cd, self.eps, self.relative)
        p = (gain < eps[None, :]).mean(axis=0)
        done = T == s  # no gain is left to make, even when eps = 0
        p = np.where(done, 1.0, p)
        stop = p >= self.prob
        reasons = []
        for i in range(cd.n_runs):
            left = T[i] - s[i]
            if left == 0:
                reasons.append(f"no steps remain before the horizon (step {_fmt_step(T[i])}): stop")
                continue
            head = f"P(gain over the remaining {_fmt_step(left)} steps < {eps[i]:.3g}) = {p[i]:.2f}"
            if stop[i]:
                reasons.append(f"{head} >= {self.prob:.2f}: the run is on its plateau")
            else:
                reasons.append(
                    f"{head} < {self.prob:.2f}: expected gain {stats[0][i]:+.3g} "
                    f"({stats[1][i]:+.3g} to {stats[2][i]:+.3g}), keep training"
                )
        return _decisions(str(self), cd, s, T, stop, p, reasons, stats)


@dataclass(frozen=True)
class BudgetRule:
    """Stop when no later step is worth its cost in expectation.

    Continuing from ``s`` to a later step ``u`` is worth
    ``value_per_unit_reward * (R(u) - R(s)) - cost_per_step * (u - s)``. The rule weighs
    ``n_grid`` evenly spaced later steps up to the horizon (``n_grid=1``: the horizon alone, i.e.
    "is the expected value of the remaining gain below the cost of the remaining steps") and
    stops when none has a positive expected net value. It keeps going when an intermediate step
    pays even if running to the horizon does not.

    Parameters
    ----------
    cost_per_step : float
        Cost of one more step (>= 0), in any currency.
    value_per_unit_reward : float
        Value of one unit of reward (> 0), in the same currency.
    n_grid : int
        Number of later steps weighed.
    interval : float
        Interval of the expected gain reported with the decision.

    Notes
    -----
    The decision rests on expected values; ``probability`` is the posterior probability that
    continuing to the best later step pays (net value > 0).
    """

    cost_per_step: float
    value_per_unit_reward: float
    n_grid: int = BUDGET_GRID
    interval: float = 0.9

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cost_per_step) and self.cost_per_step >= 0):
            raise BayesGRPOError(f"cost_per_step must be finite and >= 0; got {self.cost_per_step:g}.")
        if not (math.isfinite(self.value_per_unit_reward) and self.value_per_unit_reward > 0):
            raise BayesGRPOError(
                f"value_per_unit_reward must be finite and > 0; got {self.value_per_unit_reward:g}."
            )
        if int(self.n_grid) != self.n_grid or self.n_grid < 1:
            raise BayesGRPOError(f"n_grid must be a positive integer; got {self.n_grid!r}.")
        _check_prob(self.interval, "interval")

    def __str__(self) -> str:
        return (
            f"BudgetRule(cost_per_step={self.cost_per_step:g}, "
            f"value_per_unit_reward={self.value_per_unit_reward:g})"
        )

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = _steps(cd, step_now, horizon_step)
        _, *stats = _gain_numbers(cd, s, T, self.interval)
        gain = cd.total_gain
        g_now = _g(cd, cd.to_t(s))
        best_value = np.full(cd.n_runs, -np.inf)
        best_step = s.copy()
        best_prob = np.zeros(cd.n_runs)
        # a loop over the later steps weighed (memory (S, R) per step), never over draws
        for j in range(1, int(self.n_grid) + 1):
            u = s + (T - s) * (j / self.n_grid)
            value_of_gain = self.value_per_unit_reward * gain * (_g(cd, cd.to_t(u)) - g_now)
            net = value_of_gain - self.cost_per_step * (u - s)
            value = net.mean(axis=0)
            better = value > best_value
            best_value = np.where(better, value, best_value)
            best_step = np.where(better, u, best_step)
            best_prob = np.where(better, (net > 0).mean(axis=0), best_prob)
        stop = best_value <= 0
        reasons = []
        for i in range(cd.n_runs):
            left = T[i] - s[i]
            if left == 0:
                reasons.append(f"no steps remain before the horizon (step {_fmt_step(T[i])}): stop")
            elif stop[i]:
                reasons.append(
                    f"no later step pays: the best, step {_fmt_step(best_step[i])}, has expected net value "
                    f"{best_value[i]:+.3g} (value of the gain minus the cost of "
                    f"{_fmt_step(best_step[i] - s[i])} steps)"
                )
            else:
                reasons.append(
                    f"continuing to step {_fmt_step(best_step[i])} has expected net value "
                    f"{best_value[i]:+.3g} "
                    f"(P(net value > 0) = {best_prob[i]:.2f}): keep training"
                )
        details = {"best_step": best_step, "expected_net_value": best_value}
        return _decisions(str(self), cd, s, T, stop, best_prob, reasons, stats, details)


def _max_reward(cd: CurveDraws, s: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Draws of ``max R(t)`` over ``[s, T]``, (S, R), exact for every family.

    Monotone families reach it at an end. An underdamped oscillator has its extrema at
    ``n pi / omega_d`` with amplitudes that shrink, so the first maximum and the first minimum of
    ``g`` after ``s`` are the largest of their kind: with the two ends they hold the maximum.
    """
    t_s, t_T = cd.to_t(s), cd.to_t(T)
    size = (cd.n_draws, cd.n_runs)
    candidates = [np.broadcast_to(t_s, size), np.broadcast_to(t_T, size)]
    if cd.curve == "oscillator":
        tau, zeta = cd.params["tau"], cd.params["zeta"]
        under = zeta < 1.0
        half_period = np.pi / ((2.0 * zeta / tau) * np.sqrt(np.where(under, 1.0 - zeta**2, 1.0)))
        first = np.maximum(np.ceil(t_s[None, :] / half_period), 1.0)
        for offset in (0.0, 1.0):
            t = np.clip((first + offset) * half_period, t_s[None, :], t_T[None, :])
            candidates.append(np.where(under, t, t_s[None, :]))
    r0, gain = cd.params["r0"], cd.total_gain
    best = np.full((cd.n_draws, cd.n_runs), -np.inf)
    for t in candidates:
        g = get_curve(cd.curve).g(t, **cd.shape)
        best = np.maximum(best, r0 + gain * g)
    return best


@dataclass(frozen=True)
class TargetRule:
    """Stop when a target reward is reached, or out of reach before the horizon.

    * reached: ``P(R(s) >= target) >= prob``;
    * out of reach: ``P(max over [s, T] of R >= target) < 1 - prob``;
    * otherwise continue.

    Rewards are to be maximised; ``R`` is the expected curve, not a noisy logged point.

    Parameters
    ----------
    target : float
        Target reward, in reward units.
    prob : float
        Required posterior probability, in (0, 1).
    interval : float
        Interval of the expected gain reported with the decision.
    """

    target: float
    prob: float = 0.9
    interval: float = 0.9

    def __post_init__(self) -> None:
        if not math.isfinite(self.target):
            raise BayesGRPOError(f"target must be a finite reward; got {self.target!r}.")
        _check_prob(self.prob, "prob")
        _check_prob(self.interval, "interval")

    def __str__(self) -> str:
        return f"TargetRule(target={self.target:g}, prob={self.prob:g})"

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = _steps(cd, step_now, horizon_step)
        _, *stats = _gain_numbers(cd, s, T, self.interval)
        now = cd.params["r0"] + cd.total_gain * _g(cd, cd.to_t(s))
        p_now = (now >= self.target).mean(axis=0)
        p_reach = (_max_reward(cd, s, T) >= self.target).mean(axis=0)
        reached = p_now >= self.prob
        out_of_reach = ~reached & (p_reach < 1.0 - self.prob)
        done = T == s
        stop = reached | out_of_reach | done
        probability = np.where(reached, p_now, p_reach)
        reasons = []
        for i in range(cd.n_runs):
            by = f"P(reward reaches {self.target:g} by step {_fmt_step(T[i])}) = {p_reach[i]:.2f}"
            if done[i] and not reached[i]:
                reasons.append(
                    f"no steps remain before the horizon (step {_fmt_step(T[i])}) and "
                    f"P(reward >= {self.target:g} now) = {p_now[i]:.2f} < {self.prob:.2f}: stop"
                )
            elif reached[i]:
                reasons.append(
                    f"P(reward >= {self.target:g} now) = {p_now[i]:.2f} >= {self.prob:.2f}: target reached"
                )
            elif out_of_reach[i]:
                reasons.append(f"{by} < {1.0 - self.prob:.2f}: target out of reach")
            else:
                reasons.append(f"{by}: target still possible, keep training")
        details = {"prob_reached_now": p_now, "prob_reach_by_horizon": p_reach}
        return _decisions(str(self), cd, s, T, stop, probability, reasons, stats, details)


def decisions_table(decisions: Iterable[Decision]) -> pd.DataFrame:
    """Decisions as a table: one row each, the fields of :class:`Decision` and its details.

    Parameters
    ----------
    decisions : iterable of Decision
        E.g. ``rule.decide(cd, step)`` or the concatenation of several rules' decisions.

    Returns
    -------
    DataFrame
        Columns ``run_id, rule, decision, probability, reason, step, horizon_step,
        expected_gain, gain_lower, gain_upper``, then one column per detail (NaN where a rule
        has none).
    """
    names = [f.name for f in fields(Decision) if f.name != "details"]
    rows = [{**{name: getattr(d, name) for name in names}, **d.details} for d in decisions]
    return pd.DataFrame(rows, columns=None if rows else names)
