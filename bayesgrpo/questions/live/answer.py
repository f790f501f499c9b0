"""A live update's answer: draws of one run's curve and of a logged reward, and where it stands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.model.draws import DEFAULT_BAND, band_draws, check_band
from bayesgrpo.model.laplace import RunPosterior
from bayesgrpo.model.predict import quantile_columns
from bayesgrpo.questions.live.departure import Departure
from bayesgrpo.questions.stopping import CurveDraws

if TYPE_CHECKING:
    from bayesgrpo.model.data import ModelData

__all__ = ["LiveUpdate"]


@dataclass(frozen=True)
class LiveUpdate:
    """One run's state after a live update: draws of its curve, its noise, and where it stands.

    Attributes
    ----------
    run_id : str
    step : float
        The run's last logged step.
    horizon_step : float
    posterior : RunPosterior
        The run's parameter draws; ``posterior.method`` names the path that made them
        (``"importance"``, or ``"ensemble_mcmc"`` where the importance weights were unreliable).
    curve_draws : CurveDraws
        Draws of the run's expected reward curve (what the stop rules decide on), with the noise
        of one logged reward (``noise_sd``, ``noise_df``: the predictive band).
    data : ModelData, optional
        The run as the update saw it (normalised with the bounds it used), for checking the update
        against a refit of the same points.
    noise_seed : int
        Seeds the noise of the predictive draws, so that one update gives the same band every time.
    departure : Departure, optional
        Whether the run's latest logged points still lie inside this update's predictive band
        (:func:`~bayesgrpo.questions.live.departure.recent_departure`; ``LiveForecaster.update``
        fills it and warns with a ``ForecastDepartureWarning`` when they do not).
    logged_span : (float, float), optional
        The lowest and highest reward the run has logged so far.

    Examples
    --------
    >>> update.quantiles([update.horizon_step])  # doctest: +SKIP
       step        band    q05    q50    q95
    0  500.0  predictive  0.412  0.561  0.702
    >>> update.quantiles([500], band="curve")  # doctest: +SKIP
    """

    run_id: str
    step: float
    horizon_step: float
    posterior: RunPosterior
    curve_draws: CurveDraws
    data: ModelData | None = None
    noise_seed: int = 0
    departure: Departure | None = None
    logged_span: tuple[float, float] | None = None

    @property
    def method(self) -> str:
        """The path that gave the draws (:attr:`RunPosterior.method`)."""
        return self.posterior.method

    def band_note(self, band: str = DEFAULT_BAND) -> str:
        """One line saying what a band of this update is."""
        if check_band(band) == "curve":
            return "curve band: the run's expected reward (its noise left out)"
        return "predictive band: a logged reward (the curve plus one logged point's Student-t noise)"

    @property
    def departed(self) -> bool:
        """Whether the run's latest logged points have left this update's band (:attr:`departure`)."""
        return self.departure is not None and self.departure.departed

    @property
    def reward_range(self) -> tuple[float, float, str]:
        """The reward range a relative ``eps`` is a share of: ``(lower, upper, how)``.

        ``how`` is ``"stated"`` (the run's ``reward_min``/``reward_max``) or ``"estimated"`` (the
        run's logged range so far, widened by the population's margin each side, and to ``reach``
        where the update was given one).
        """
        scale = float(np.asarray(self.curve_draws.reward_scale, dtype=float).reshape(-1)[0])
        if self.data is None:
            return float("nan"), float("nan"), "unknown"
        lower = float(self.data.lower[0])
        how = "stated" if self.data.bounds_source[0] == "metadata" else "estimated"
        return lower, lower + scale, how

    def range_note(self) -> str:
        """One line saying what range a relative eps is taken against, and where it came from."""
        lower, upper, how = self.reward_range
        if how == "stated":
            return f"eps is a share of the reward range {lower:.3g} .. {upper:.3g} stated for the run"
        if how == "estimated":
            note = (
                f"eps is a share of the reward range {lower:.3g} .. {upper:.3g}, estimated from the run's "
                "logged points (no reward_min/reward_max given: its logged range so far, widened by the "
                "population's margin)"
            )
            if self.logged_span is not None and 0.0 <= self.logged_span[0] <= self.logged_span[1] <= 1.0:
                note += (
                    "; every reward logged so far lies in 0 .. 1: if it is a score on 0 .. 1 (an accuracy, "
                    "a pass rate), state that range (--reward-range 0 1, or reward_min/reward_max in the "
                    "run's metadata): a range estimated from a short prefix is where the live forecast "
                    "errs most"
                )
            return note
        return "the reward range eps is a share of is not known to this update"

    def reward_draws(
        self, steps: Any, *, band: str = DEFAULT_BAND, random_seed: int | None = None
    ) -> np.ndarray:
        """Draws of the run's reward at ``steps``, reward units, shape (S, N).

        Parameters
        ----------
        steps : array_like, shape (N,)
        band : {"predictive", "curve"}
            ``"predictive"``: a logged reward (the curve plus one logged point's noise);
            ``"curve"``: the expected reward.
        random_seed : int, optional
            Of the noise (default :attr:`noise_seed`: the same draws on every call).

        A run on a stated range has its draws held inside that range, widened to what the run has
        logged where its points leave it: a score is never forecast above 1.
        """
        steps = np.atleast_1d(np.asarray(steps, dtype=float))
        seed = self.noise_seed if random_seed is None else random_seed
        draws = np.asarray(band_draws(self.curve_draws, steps, band, seed)[:, 0, :])
        bounds = self.known_bounds
        return draws if bounds is None else np.clip(draws, *bounds)

    @property
    def known_bounds(self) -> tuple[float, float] | None:
        """The range a logged reward of this run cannot leave: its stated range, widened to the
        rewards it logged outside it; None when estimated.
        """
        lower, upper, how = self.reward_range
        if how != "stated":
            return None
        if self.logged_span is not None:
            lower, upper = min(lower, self.logged_span[0]), max(upper, self.logged_span[1])
        return lower, upper

    def quantiles(
        self,
        steps: Any,
        quantiles: tuple[float, ...] = (0.05, 0.5, 0.95),
        *,
        band: str = DEFAULT_BAND,
    ) -> pd.DataFrame:
        """Quantiles of the run's reward at ``steps``, one row a step.

        Parameters
        ----------
        steps : array_like, shape (N,)
        quantiles : tuple of float
            Default: the median and the 90% central interval.
        band : {"predictive", "curve"}
            See :meth:`reward_draws`.

        Returns
        -------
        pandas.DataFrame
            ``step``, ``band``, ``mean`` and one column per quantile (``q05``, ``q50``, ``q95``).
        """
        steps = np.atleast_1d(np.asarray(steps, dtype=float))
        draws = self.reward_draws(steps, band=band)
        table = pd.DataFrame({"step": steps, "band": check_band(band), "mean": draws.mean(axis=0)})
        values = np.quantile(draws, quantiles, axis=0)
        for name, row in zip(quantile_columns(quantiles), values, strict=True):
            table[name] = row
        return table

    def final_interval(self, mass: float = 0.9, *, band: str = DEFAULT_BAND) -> tuple[float, float, float]:
        """The reward at the horizon: (lower, median, upper) of the central ``mass`` interval."""
        tail = (1.0 - mass) / 2.0
        draws = self.reward_draws([self.horizon_step], band=band)[:, 0]
        lower, median, upper = np.quantile(draws, [tail, 0.5, 1.0 - tail])
        return float(lower), float(median), float(upper)
