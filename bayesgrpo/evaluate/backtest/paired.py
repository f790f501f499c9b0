"""Two stop rules on the same runs: their mean difference, with a bootstrap over sources.

A stopping backtest scores every rule on the same runs, so two rules are best compared run for
run: the difference of their steps saved and of their reward given up, averaged over runs. Runs of
one source (one notebook, one verl recipe) are near copies of each other, so the interval of that
mean resamples whole sources, not runs (a cluster bootstrap): with 24 sources for 60 runs, an
interval over runs would claim far more certainty than the data hold.

:func:`paired_rule_differences` gives, for each pair, the mean differences, their intervals and the
share of bootstrap resamples in which the rule dominates the other (saves at least as many steps
and gives up no more reward): how sure a "dominates" or "is dominated" read off the means is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.backtest.cuts import BacktestError

#: Resamples of the sources drawn by default.
N_RESAMPLES = 2000

PAIRED_COLUMNS = (
    "rule",
    "against",
    "runs",
    "sources",
    "saved_diff",
    "saved_low",
    "saved_high",
    "given_up_diff",
    "given_up_low",
    "given_up_high",
    "share_dominating",
)


def _per_run(stops: pd.DataFrame, rule: str, column: str) -> pd.Series:
    rows = stops[stops["rule"] == rule]
    if rows.empty:
        present = sorted(set(stops["rule"]))
        raise BacktestError(f"no stopping rows for rule {rule!r}; rules present: {present}")
    duplicated = rows["run_id"].duplicated()
    if duplicated.any():
        raise BacktestError(
            f"rule {rule!r} has {int(duplicated.sum())} runs scored more than once "
            f"(first: {rows.loc[duplicated, 'run_id'].iloc[0]!r}); one row per run and rule is expected"
        )
    return rows.set_index("run_id")[column].astype(float)


def paired_rule_differences(
    stops: pd.DataFrame,
    sources: Mapping[str, str],
    rules: Sequence[str],
    against: Sequence[str],
    *,
    given_up_column: str = "reward_vs_end",
    level: float = 0.9,
    n_resamples: int = N_RESAMPLES,
    random_seed: int = 0,
) -> pd.DataFrame:
    """Each rule of ``rules`` minus each of ``against``, run for run, with source-bootstrap intervals.

    Parameters
    ----------
    stops : DataFrame
        A stopping backtest's rows (:func:`bayesgrpo.evaluate.backtest.stopping_backtest`): one a
        run and rule, with ``run_id``, ``rule``, ``steps_saved`` and ``given_up_column``.
    sources : mapping run_id -> source
        Each run's source (:func:`bayesgrpo.evaluate.backtest.source_group`): the unit resampled.
    rules, against : sequence of str
        The rules compared, and those they are compared with (by their ``rule`` names).
    given_up_column : str
        The reward given up: ``"reward_vs_end"`` (against the run's end, the default) or
        ``"reward_given_up"`` (against its best smoothed point).
    level : float
        Probability of the intervals, in (0, 1).
    n_resamples : int
        Resamples of the sources.
    random_seed : int

    Returns
    -------
    DataFrame
        One row a pair (:data:`PAIRED_COLUMNS`): ``saved_diff`` and ``given_up_diff`` the mean over
        the runs both rules scored of the rule's value minus the other's (shares of the run and of
        the reward range; a negative ``given_up_diff`` is less given up), their ``_low`` / ``_high``
        the central ``level`` interval over the resamples, and ``share_dominating`` the share of
        resamples in which the rule saved at least as many steps and gave up no more.

    Raises
    ------
    BacktestError
        When a rule has no rows or a run twice, a run has no source, or the rules share no runs.
    """
    if not 0.0 < level < 1.0:
        raise BacktestError(f"level must be in (0, 1); got {level}")
    if n_resamples < 1:
        raise BacktestError(f"n_resamples must be >= 1; got {n_resamples}")
    rng = np.random.default_rng(random_seed)
    tails = [(1.0 - level) / 2.0 * 100.0, (1.0 + level) / 2.0 * 100.0]
    rows = []
    for rule in rules:
        for other in against:
            saved = _per_run(stops, rule, "steps_saved") - _per_run(stops, other, "steps_saved")
            given_up = _per_run(stops, rule, given_up_column) - _per_run(stops, other, given_up_column)
            both = saved.dropna().index.intersection(given_up.dropna().index)
            if both.empty:
                raise BacktestError(f"rules {rule!r} and {other!r} share no scored runs")
            missing = [r for r in both if r not in sources]
            if missing:
                raise BacktestError(f"no source given for runs {missing[:5]} ({len(missing)} in all)")
            source_of = pd.Series([sources[r] for r in both], index=both)
            names = sorted(set(source_of))
            # per source: the sums of the differences and the count of runs; a resample weighs each
            # source by how often it was drawn, and its mean is sum(weights x sums) / sum(weights x counts)
            sums = pd.DataFrame({"saved": saved[both], "given_up": given_up[both]}).groupby(source_of).sum()
            counts = source_of.value_counts().reindex(names).to_numpy(dtype=float)
            sums = sums.reindex(names)
            weights = rng.multinomial(len(names), np.full(len(names), 1.0 / len(names)), size=n_resamples)
            runs_drawn = weights @ counts
            saved_boot = weights @ sums["saved"].to_numpy() / runs_drawn
            given_up_boot = weights @ sums["given_up"].to_numpy() / runs_drawn
            saved_low, saved_high = np.percentile(saved_boot, tails)
            given_up_low, given_up_high = np.percentile(given_up_boot, tails)
            rows.append(
                {
                    "rule": rule,
                    "against": other,
                    "runs": len(both),
                    "sources": len(names),
                    "saved_diff": float(saved[both].mean()),
                    "saved_low": float(saved_low),
                    "saved_high": float(saved_high),
                    "given_up_diff": float(given_up[both].mean()),
                    "given_up_low": float(given_up_low),
                    "given_up_high": float(given_up_high),
                    # a tolerance of float noise: a rule equal to the other run for run dominates it
                    "share_dominating": float(np.mean((saved_boot >= -1e-12) & (given_up_boot <= 1e-12))),
                }
            )
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))
