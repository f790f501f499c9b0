"""Live single-run updates: a run in progress conditioned on a fitted population, no refit.

Split by job:

- :mod:`~bayesgrpo.questions.live.forecaster`: :class:`LiveForecaster`, the update itself (the
  population's prior for the run, conditioned on its points);
- :mod:`~bayesgrpo.questions.live.answer`: :class:`LiveUpdate`, what an update answers (draws of
  the curve and of a logged reward, quantiles, the final interval, the range a relative eps is a
  share of);
- :mod:`~bayesgrpo.questions.live.range`: the reward range a run is normalised by;
- :mod:`~bayesgrpo.questions.live.departure`: whether the run's latest points still lie inside
  its update's band.

Two bands
    A :class:`LiveUpdate` answers for two quantities, and every output that shows a band says
    which: the **curve** (``band="curve"``), the run's expected reward, whose band is the
    uncertainty about where the curve goes; and the **predictive** band (``band="predictive"``,
    the default wherever a band is drawn around logged points), a logged reward: the curve plus
    the run's own noise of one logged point (the posterior's Student-t). The stopping rules
    decide on the curve (a stop is about the gain still to come, not about one noisy point).
"""

from __future__ import annotations

from bayesgrpo.model.draws import BANDS, DEFAULT_BAND, check_band
from bayesgrpo.model.laplace import (
    PARETO_K_LIMIT,
    GaussianRunPrior,
    LiveUpdateWarning,
    RunPosterior,
    condition_run,
    condition_start,
    laplace_fit,
    single_threaded_blas,
)
from bayesgrpo.questions.live.answer import LiveUpdate
from bayesgrpo.questions.live.departure import Departure, recent_departure
from bayesgrpo.questions.live.forecaster import (
    DEFAULT_LIKELIHOOD_WEIGHT,
    LiveForecaster,
    live_forecaster,
    resolve_population,
    run_curve_draws,
)
from bayesgrpo.questions.live.range import (
    RANGE_SOURCE_PHRASES,
    metadata_number,
    reach_bounds,
    stated_reward_range,
)

__all__ = [
    "BANDS",
    "DEFAULT_BAND",
    "DEFAULT_LIKELIHOOD_WEIGHT",
    "RANGE_SOURCE_PHRASES",
    "Departure",
    "LiveForecaster",
    "LiveUpdate",
    "check_band",
    "live_forecaster",
    "metadata_number",
    "reach_bounds",
    "recent_departure",
    "resolve_population",
    "run_curve_draws",
    "stated_reward_range",
    # the one-run conditioning it orchestrates (bayesgrpo.model.laplace), importable from here as
    # before the layout moved it
    "PARETO_K_LIMIT",
    "GaussianRunPrior",
    "LiveUpdateWarning",
    "RunPosterior",
    "condition_run",
    "condition_start",
    "laplace_fit",
    "single_threaded_blas",
]
