"""Where the backtests' per-run work runs: in this process, or on Ray through the fleet's engine.

Each backtest maps one work function over its runs (``bayesgrpo.interfaces.fleet.engine``): the
populations are given to the engine once, each run names the one it is conditioned on, and each
distinct population gets one live forecaster (on Ray: one per worker process), seeded by
:func:`population_specs` as :func:`bayesgrpo.evaluate.backtest.forecast.live_forecasters` seeds
it, so the rows are the same whichever engine ran them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bayesgrpo.evaluate.backtest.cuts import BacktestError, run_seed
from bayesgrpo.interfaces.fleet import Engine, Population, open_engine
from bayesgrpo.questions.live import LiveForecaster


def population_specs(
    populations: Mapping[str, Any],
    run_ids: Sequence[str],
    n_draws: int,
    random_seed: int,
) -> tuple[list[Population | LiveForecaster], dict[str, int]]:
    """Each distinct population met in ``run_ids`` once, and each run's index into them.

    A fitted model becomes a :class:`Population` whose forecaster draws ``n_draws`` and is seeded
    ``run_seed(random_seed, "live", k)`` for the k-th distinct population; a ready
    :class:`LiveForecaster` is kept as it is.
    """
    missing = [r for r in run_ids if r not in populations]
    if missing:
        raise BacktestError(
            f"no population for runs {missing[:5]} ({len(missing)} in all); fit them with kfold_populations"
        )
    specs: list[Population | LiveForecaster] = []
    seen: dict[int, int] = {}
    index: dict[str, int] = {}
    for run_id in run_ids:
        population = populations[run_id]
        key = id(population)
        if key not in seen:
            seen[key] = len(specs)
            seed = run_seed(random_seed, "live", len(specs))
            if isinstance(population, LiveForecaster):
                specs.append(population)
            else:
                specs.append(Population(population, int(n_draws), seed))
        index[run_id] = seen[key]
    return specs, index


def backtest_engine(
    populations: Mapping[str, Any] | None,
    run_ids: Sequence[str],
    n_draws: int,
    random_seed: int,
    *,
    workers: int | None = None,
    address: str | None = None,
) -> tuple[Engine, dict[str, int]]:
    """The engine of a backtest's per-run work and each run's population index.

    Parameters
    ----------
    populations : mapping run_id -> RewardModel (or LiveForecaster, serial only), or None
        None: no run needs a population (baselines only); the index is then empty.
    run_ids : sequence of str
    n_draws, random_seed : int
        Of each population's live forecaster (:func:`population_specs`).
    workers, address : optional
        Ray worker processes or a cluster's address; serial without either.
    """
    specs, index = (
        ([], {}) if populations is None else population_specs(populations, run_ids, n_draws, random_seed)
    )
    return open_engine(specs, workers=workers, address=address), index
