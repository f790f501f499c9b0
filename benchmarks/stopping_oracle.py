"""What any stop rule could reach: the oracle's frontier on the stopping benchmarks' runs.

A rule asked every 5% of a run (as the posterior rules of ``benchmarks/backtest.py``,
``stopping_simulated.py`` and ``benchmarks/experiments/README.md: stop_confirmation`` are) stops each run at one of
its checks or runs it to the end. An oracle that knew every run's future would pick, per run, the
check that maximises the mean steps saved at a bound on the mean reward given up against the run's
end. ``bayesgrpo.evaluate.backtest.oracle_stop_bound`` bounds that from above (a Lagrangian bound)
and finds a choice that attains it. No rule, however good its forecasts, saves more at that bound:
where the bound is below a target, the target is out of reach on those runs at these checks.

Measured on the sets the stop-decision issues score:

* the 60 bundled runs, against the smoothed logged reward at the run's end (as the backtests
  measure it), with and without a stated range apart;
* the simulated runs of ``stopping_simulated.py`` (16 a shape, seed 0), on the true curve.

Beside each bound: ``fixed 0.5`` and ``fixed 0.6`` on the same runs, and the oracle's saving at the
mean given up of ``fixed 0.5`` and of ``fixed 0.6`` (how much a perfect rule would beat each budget
by). The oracle
ignores the dip bar (mean dip within 1%): it is an upper bound for the full target too.

Usage::

    python benchmarks/stopping_oracle.py   # seconds; writes results/stopping_oracle.md
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import command_line, machine_line, markdown_table
from backtest import BUDGET_TARGET_GIVEN_UP as GIVEN_UP_TARGET
from backtest import BUDGET_TARGET_SAVED as SAVED_TARGET
from stopping_simulated import runs_table, scored_on_truth, simulate

RESULTS = HERE / "results"
CHECK_EVERY = 0.05


def bundled_sets() -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """The bundled runs' stop candidates and fixed budgets, with and without a stated range."""
    from bayesgrpo.evaluate.backtest import FixedFraction, stop_candidates, stopping_backtest
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.questions.live import stated_reward_range

    table = load_bundled(warn=False)
    candidates = stop_candidates(table, CHECK_EVERY)
    fixed = stopping_backtest(table, None, {f"fixed {f}": FixedFraction(f) for f in (0.5, 0.6)})
    stated = {r["run_id"]: stated_reward_range(r) is not None for r in table.runs.to_dict("records")}
    out = {"bundled runs, all": (candidates, fixed)}
    for flag in (True, False):
        runs = [r for r, s in stated.items() if s == flag]
        label = f"bundled runs, {'stated' if flag else 'no stated'} range"
        out[label] = (candidates[candidates["run_id"].isin(runs)], fixed[fixed["run_id"].isin(runs)])
    return out


def simulated_set() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The simulated runs' stop candidates and fixed budgets, scored on the true curve."""
    from bayesgrpo.evaluate.backtest import stop_candidates

    points, truth, runs = simulate(16, 0)
    stops = stop_candidates(runs_table(points, runs, stated=False), CHECK_EVERY)
    stops = stops.assign(rule="candidate", kind="oracle", stopped=stops["steps_saved"] > 0)
    last = points.groupby("run_id")["step"].max()
    fixed = pd.concat(
        [
            pd.DataFrame(
                {
                    "run_id": last.index,
                    "rule": f"fixed {fraction}",
                    "kind": "fixed_fraction",
                    "stopped": True,
                    "steps_saved": 1.0 - fraction,
                    "stop_step": fraction * last.to_numpy(),
                }
            )  # fmt: skip
            for fraction in (0.5, 0.6)
        ],
        ignore_index=True,
    )
    renamed = {"vs_end": "reward_vs_end"}
    return (
        scored_on_truth(stops, points, truth).rename(columns=renamed),
        scored_on_truth(fixed, points, truth).rename(columns=renamed),
    )


def _point(saved: float, given_up: float, bound: float | None = None) -> str:
    text = f"{saved:.0%} at {given_up:+.1%}"
    return text if bound is None else f"{text} (bound {bound:.0%})"


def bound_rows(label: str, candidates: pd.DataFrame, fixed: pd.DataFrame) -> dict:
    """One set's row: the oracle at the target's bound and at ``fixed 0.5``'s level."""
    from bayesgrpo.evaluate.backtest import oracle_stop_bound

    budgets = fixed.groupby("rule")[["steps_saved", "reward_vs_end"]].mean()
    at_target = oracle_stop_bound(candidates, GIVEN_UP_TARGET)
    at_fixed = oracle_stop_bound(candidates, float(budgets.loc["fixed 0.5", "reward_vs_end"]))
    at_fixed_06 = oracle_stop_bound(candidates, float(budgets.loc["fixed 0.6", "reward_vs_end"]))
    at_zero = oracle_stop_bound(candidates, 0.0)
    return {
        "set": label,
        "runs": candidates["run_id"].nunique(),
        "fixed_0.5": _point(*budgets.loc["fixed 0.5"]),
        "fixed_0.6": _point(*budgets.loc["fixed 0.6"]),
        "oracle_at_1pct": _point(at_target.saved, at_target.given_up, at_target.saved_bound),
        "oracle_at_fixed_0.5": _point(at_fixed.saved, at_fixed.given_up, at_fixed.saved_bound),
        "oracle_at_fixed_0.6": _point(at_fixed_06.saved, at_fixed_06.given_up, at_fixed_06.saved_bound),
        "oracle_at_0": _point(at_zero.saved, at_zero.given_up, at_zero.saved_bound),
        "target_reachable": at_target.saved_bound >= SAVED_TARGET,
    }


def main(argv: list[str] | None = None) -> None:
    """Every set's oracle bounds; write the table."""
    start = time.perf_counter()
    rows = [bound_rows(label, *pair) for label, pair in bundled_sets().items()]
    rows.append(bound_rows("simulated runs (16 a shape, true curve)", *simulated_set()))
    table = pd.DataFrame(rows)
    seconds = time.perf_counter() - start
    lines = [
        "# What any stop rule could reach: the oracle's frontier",
        "",
        f"Command: `{command_line('stopping_oracle.py', argv)}`  ",
        f"Machine: {machine_line()}; {seconds:.0f} s.",
        "",
        "An oracle knows each run's future and stops it at one of the checks a posterior rule is asked at "
        f"(every {CHECK_EVERY:.0%} of the run) or runs it to the end, choosing per run so that the mean "
        "steps saved is largest at a bound on the mean reward given up against the run's end (bundled "
        "runs: the smoothed logged reward, as `backtest.py` scores it; simulated runs: the true curve; "
        "shares of each run's logged range). `X at Y (bound Z)`: a choice found saving X on average at a "
        "mean Y given up; no choice saves more than Z within the bound (`oracle_stop_bound`, Lagrangian). "
        "Bounds: `oracle_at_1pct` the issues' 1%, `oracle_at_fixed_0.5` the mean given up of `fixed 0.5` "
        "on the same runs (`oracle_at_fixed_0.6`: of `fixed 0.6`), `oracle_at_0` nothing given up. "
        "`target_reachable`: the bound at 1% reaches "
        f"{SAVED_TARGET:.0%} saved. The oracle ignores the dip bar, so it bounds the full target too.",
        "",
        markdown_table(table),
        "",
    ]
    (RESULTS / "stopping_oracle.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
