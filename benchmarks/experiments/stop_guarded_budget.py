"""A fixed budget the posterior may overrule: stop at a fraction of the run unless it still rises.

The stop-decision issue asks for a posterior rule that dominates ``fixed 0.5`` and ``fixed 0.6``
against the run's end on the bundled runs without a stated range (leave one source out). The
plateau rules stop noisy runs in dips and rising runs too early; a fixed budget stops every run
at the same share. The rule measured here is the practitioner's compromise: a budget ``f`` (stop
at the first check at or after ``f`` of the run), which the posterior can move

- *later*: at a check past ``f`` the run goes on while P(curve gain < 2% of its range) is below
  ``q`` (the curve is likely still rising), and stops at the first later check where it is not;
- *earlier* (optional): before ``f`` the run stops where P(curve gain < 1%) >= 0.95.

Budgets 0.4 and 0.5 are searched over ``q``; 0.7, 0.8 and 0.9 (``q`` 0.5) ask whether a guarded
budget also dominates the later fixed budgets, which the backtest's frontier leaves undominated.

No new update is run: every check's probabilities are the stopping backtest's own (its
reliability rows, ``loso/backtest_calibration_runs.csv``: the live update at every 5% of each run,
P(gain < eps) for eps 1% and 2%, the population fitted without the run's source, each run's
stated range given, which for the 36 runs that state none is none). Each stop is scored as the
stopping backtest scores it (``reward_given_up`` on the run's smoothed logged reward, in units of
its logged range) with the dip at the stop of ``stopping_simulated.dip_at``. The plain plateau
rules, computed the same way from the same rows, are shown beside the backtest's own rows for
them as a check of the emulation.

``--checks DIR`` reads another run of the backtest's rows (both files) instead, and writes
``results/stop_guarded_budget_<DIR's name>.md``: for example the backtest with its live updates
tempered (``live_tempered.py --backtest 0.5`` -> ``results/live_tempered_backtest_w0.5``).

Usage::

    python benchmarks/experiments/stop_guarded_budget.py   # writes results/stop_guarded_budget.md
    python benchmarks/experiments/stop_guarded_budget.py --checks FOLDER   # that folder's rows
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _markdown import markdown_table  # noqa: E402
from live_backtest import range_kinds  # noqa: E402
from stopping_simulated import dip_at  # noqa: E402

RESULTS = HERE / "results"
CHECKS = BENCHMARKS / "results" / "loso" / "backtest_calibration_runs.csv"
BACKTEST_ROWS = BENCHMARKS / "results" / "loso" / "backtest_stopping_runs.csv"
#: A rule: (its checks, progress, P(gain < 1%), P(gain < 2%)) -> the index of the stop check or None.
Rule = Callable[[np.ndarray, np.ndarray, np.ndarray], int | None]


def plateau(eps_column: int, p: float) -> Rule:
    """The plain plateau rule: the first check whose P(gain < eps) reaches p."""

    def rule(progress: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> int | None:
        hits = np.flatnonzero((p1, p2)[eps_column] >= p)
        return int(hits[0]) if hits.size else None

    return rule


def fixed(f: float) -> Rule:
    """The first check at or after ``f`` of the run."""

    def rule(progress: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> int | None:
        hits = np.flatnonzero(progress >= f - 1e-9)
        return int(hits[0]) if hits.size else None

    return rule


def guarded(f: float, q: float, early: bool) -> Rule:
    """Budget ``f``, extended while P(gain < 2%) < ``q``; with ``early``, stopped before ``f``
    where P(gain < 1%) >= 0.95.
    """

    def rule(progress: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> int | None:
        for i in range(len(progress)):  # a loop over one run's 20 checks
            if progress[i] < f - 1e-9:
                if early and p1[i] >= 0.95:
                    return i
                continue
            if p2[i] >= q:
                return i
        return None

    return rule


#: The budgets the calibration issue's dominance asks about: the stop-decision issue's two (0.5,
#: 0.6) and the later ones the backtest's frontier leaves undominated (0.8, 0.9; 0.8 the seed
#: paper's "about 80% of an epoch").
BUDGETS = (0.5, 0.6, 0.7, 0.8, 0.9)

RULES: dict[str, Rule] = {
    **{f"fixed {f}": fixed(f) for f in BUDGETS},
    "plateau eps=0.01 p=0.8": plateau(0, 0.8),
    "plateau eps=0.02 p=0.9": plateau(1, 0.9),
    "plateau eps=0.02 p=0.95": plateau(1, 0.95),
    **{
        f"budget {f} unless P(gain<2%) < {q}{', early' if early else ''}": guarded(f, q, early)
        for f in (0.4, 0.5)
        for q in (0.3, 0.5, 0.7)
        for early in (False, True)
    },
    **{
        f"budget {f} unless P(gain<2%) < 0.5{', early' if early else ''}": guarded(f, 0.5, early)
        for f in BUDGETS[2:]
        for early in (False, True)
    },
}


def main(argv: list[str] | None = None) -> None:
    """Emulate every rule on the checks, score the stops, write the tables."""
    import argparse

    from bayesgrpo.evaluate.backtest.smoothing import reward_given_up
    from bayesgrpo.evaluate.backtest.stopping import scored_run
    from bayesgrpo.model.datasets import load_bundled

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument(
        "--checks", type=Path, default=None, help="a backtest's output folder to read instead"
    )
    args = parser.parse_args(argv)
    checks_file, rows_file = CHECKS, BACKTEST_ROWS
    output, source = RESULTS / "stop_guarded_budget.md", "`loso/`"
    command = "python benchmarks/experiments/stop_guarded_budget.py"
    if args.checks is not None:
        folder = args.checks.resolve()
        checks_file, rows_file = folder / CHECKS.name, folder / BACKTEST_ROWS.name
        output = RESULTS / f"stop_guarded_budget_{folder.name}.md"
        source = f"`{folder.relative_to(BENCHMARKS.parent)}/`"
        command += f" --checks {folder.relative_to(BENCHMARKS.parent)}"
    table = load_bundled(warn=False)
    kinds = range_kinds(table)
    checks = pd.read_csv(checks_file)
    wide = checks.pivot_table(index=["run_id", "step"], columns="eps", values="probability").reset_index()
    rows = []
    for run_id, run_checks in wide.groupby("run_id"):
        run_checks = run_checks.sort_values("step")
        scored = scored_run(table, str(run_id), 0.05)
        last = float(scored.steps[-1])
        check_steps = run_checks["step"].to_numpy(dtype=float)
        progress = check_steps / last
        p1, p2 = run_checks[0.01].to_numpy(), run_checks[0.02].to_numpy()
        for name, rule in RULES.items():
            index = rule(progress, p1, p2)
            stop_step = last if index is None else float(check_steps[index])
            _, vs_end = reward_given_up(scored.smooth, scored.spread, scored.steps, stop_step)
            dip = dip_at(scored.steps, scored.rewards, stop_step)
            rows.append(
                {
                    "run_id": run_id,
                    "range": kinds[str(run_id)],
                    "rule": name,
                    "stop_step": stop_step,
                    "steps_saved": (last - stop_step) / last,
                    "vs_end": vs_end,
                    "dip": dip,
                }
            )
    frame = pd.DataFrame(rows)
    backtest = pd.read_csv(rows_file)
    summary_rows = []
    for kind in ("unstated", "stated", "all"):
        part = frame if kind == "all" else frame[frame["range"] == kind]
        for name, at in part.groupby("rule", sort=False):
            reference = backtest[(backtest["rule"] == name) & backtest["run_id"].isin(at["run_id"])]
            summary_rows.append(
                {
                    "runs": kind,
                    "rule": name,
                    "n": len(at),
                    "steps_saved": at["steps_saved"].mean(),
                    "vs_end": at["vs_end"].mean(),
                    "dip": at["dip"].mean(),
                    "backtest_saved": reference["steps_saved"].mean() if len(reference) else np.nan,
                    "backtest_vs_end": reference["reward_vs_end"].mean() if len(reference) else np.nan,
                }
            )
    summary = pd.DataFrame(summary_rows)
    verdicts = []
    for kind, at in summary.groupby("runs", sort=False):
        budgets = at[at["rule"].str.startswith("fixed")]
        for row in at.itertuples(index=False):
            if row.rule.startswith("fixed"):
                continue
            dominates = [
                b.rule
                for b in budgets.itertuples(index=False)
                if row.steps_saved >= b.steps_saved - 1e-9 and row.vs_end <= b.vs_end + 1e-9
            ]
            meets = row.steps_saved >= 0.45 and row.vs_end <= 0.01 and abs(row.dip) <= 0.01
            verdicts.append(
                {
                    "runs": kind,
                    "rule": row.rule,
                    "dominates": ", ".join(dominates) or "none",
                    "meets_bar": meets,
                }
            )
    lines = [
        "# A fixed budget the posterior may overrule (bundled runs, leave one source out)",
        "",
        f"Command: `{command}` (reads `backtest_calibration_runs.csv` and `backtest_stopping_runs.csv` "
        f"of {source}, written by the leave-one-source-out backtest)",
        "",
        "Every rule decided on the stopping backtest's own checks (every 5% of a run); steps_saved and "
        "vs_end (the smoothed logged reward at the run's end minus at the stop, in units of its logged "
        "range; negative: the stop kept more) are means over runs; dip: the smoothed reward at the stop "
        "minus its mean over the 10% of the run around it. backtest_saved / backtest_vs_end: the stopping "
        "backtest's own rows for the same rule (plain plateau and fixed rules), a check of the emulation. "
        "`runs`: the runs whose metadata states no reward range (36), one (24), or all.",
        "",
        markdown_table(summary),
        "",
        "## Against the fixed budgets and the issue's bar",
        "",
        "dominates: the fixed budgets this rule saves at least as many steps as at no more reward given "
        "up against the end; meets_bar: >= 45% of steps saved, <= 1% of the range given up against the "
        "end, |dip| <= 1%.",
        "",
        markdown_table(pd.DataFrame(verdicts)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    output.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
