"""The stop rule a user gets by default, against the one it replaced and the fixed budgets.

``bayesgrpo stop``, ``bayesgrpo watch``, the TRL callback, the verl hook and the fleet decide with
``bayesgrpo.questions.stopping.default_rule()`` unless told otherwise. It was
``PlateauRule(eps=0.01, prob=0.9)``, then ``GuardedBudgetRule(0.5)`` with its early stop at
``P(gain < 1%) >= 0.95``; it is ``GuardedBudgetRule(0.5)`` with its early stop at 0.9 and the rise
guard (no stop while the run's logged reward still rises over its latest tenth,
``benchmarks/experiments/README.md: stop_momentum``), its guard at ``prob=0.3`` since the live update counts a run's
points for half (``LiveForecaster(likelihood_weight=0.5)``). This script reads the rows the
stopping benchmarks committed (no model is fitted or updated here) and puts the default beside the
two it replaced, ``fixed 0.5`` and ``fixed 0.6`` on every set, for runs with and without a stated
reward range:

* the 60 bundled runs, leave one source out (``backtest.py --split loso``), each run's range given;
* the same runs, 5-fold by run (``backtest.py``);
* the live backtest's split (``live_backtest.py``): leave one source out, no range given to any run
  (the metadata's kind of range still splits the rows);
* the simulated runs of known truth (``stopping_simulated.py``), with and without a stated range.

Steps saved and reward given up against the run's end are those benchmarks' own (means over runs,
shares of the range). A difference between two rules is paired over the same runs, with a 90%
bootstrap interval over runs (10,000 resamples): a rule "dominates" another where it saves at
least as many steps and gives up no more, as the benchmarks count it, and the interval says
whether the runs could tell the two apart.

Usage::

    python benchmarks/default_rule.py   # a second; writes results/default_rule.md
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import command_line, machine_line, markdown_table, write_result
from live_backtest import range_kinds
from stopping_simulated import shape_table

RESULTS = HERE / "results"

OLD_DEFAULT = "guarded budget 0.5, no rise guard"
FIRST_DEFAULT = "plateau eps=0.01 p=0.9"
NEW_DEFAULT = "guarded budget 0.5"
BUDGETS = ("fixed 0.5", "fixed 0.6")
RULES = (NEW_DEFAULT, OLD_DEFAULT, FIRST_DEFAULT, *BUDGETS)

#: (set name, the benchmark's rows)
SETS = (
    ("bundled, leave one source out", RESULTS / "loso" / "backtest_stopping_runs.csv"),
    ("bundled, 5-fold by run", RESULTS / "backtest_stopping_runs.csv"),
    ("bundled, live path, no range given", RESULTS / "live_backtest_stopping_runs.csv"),
    ("simulated, known truth", RESULTS / "stopping_simulated_runs.csv"),
)

BOOTSTRAP = 10_000
INTERVAL = 0.9


def bundled_range_kinds() -> dict[str, str]:
    """``stated range`` or ``no stated range`` per bundled run (``live_backtest.range_kinds``), as
    the simulated rows name the two.
    """
    from bayesgrpo.model.datasets import load_bundled

    label = {"stated": "stated range", "unstated": "no stated range"}
    return {run_id: label[kind] for run_id, kind in range_kinds(load_bundled(warn=False)).items()}


def load_rows(path: Path, kinds: dict[str, str], rules: tuple[str, ...] = RULES) -> pd.DataFrame:
    """One row per run and rule of ``rules``: ``run_id``, ``rule``, ``range``, ``saved``, ``vs_end``
    (and ``dip``).

    ``run_id`` is the run's name and its kind of range, so that a simulated run scored with and
    without a stated range counts as two.
    """
    rows = pd.read_csv(path)
    rows = rows[rows["rule"].isin(rules)].copy()
    if "range" not in rows:  # a bundled set: the kind of range from the runs' metadata
        rows["range"] = rows["run_id"].astype(str).map(kinds)
        rows = rows.rename(columns={"reward_vs_end": "vs_end"})
    rows = rows.rename(columns={"steps_saved": "saved"})
    # a simulated run is scored twice, with and without a stated range: one key per scoring
    rows["run_id"] = rows["run_id"].astype(str) + " | " + rows["range"].astype(str)
    keep = ["run_id", "rule", "range", "saved", "vs_end"] + (["dip"] if "dip" in rows else [])
    return rows[keep]


def paired_interval(
    difference: np.ndarray, rng: np.random.Generator, n: int = BOOTSTRAP
) -> tuple[float, float]:
    """A percentile bootstrap interval (``INTERVAL``) of the mean of paired differences over runs."""
    index = rng.integers(0, len(difference), size=(n, len(difference)))
    means = difference[index].mean(axis=1)
    tail = (1.0 - INTERVAL) / 2.0
    lower, upper = np.quantile(means, [tail, 1.0 - tail])
    return float(lower), float(upper)


def summaries(name: str, rows: pd.DataFrame, rules: tuple[str, ...] = RULES) -> pd.DataFrame:
    """Each rule's mean saving and reward given up against the end, per kind of range and over all."""
    out = []
    for kind, part in [("all", rows), *rows.groupby("range")]:
        for rule in rules:
            r = part[part["rule"] == rule]
            out.append(
                {
                    "set": name,
                    "runs": kind if kind == "all" else str(kind),
                    "n": r["run_id"].nunique(),
                    "rule": rule,
                    "steps_saved": r["saved"].mean(),
                    "vs_end": r["vs_end"].mean(),
                    "dip": r["dip"].mean() if "dip" in r else np.nan,
                }
            )
    return pd.DataFrame(out)


def comparisons(
    name: str, rows: pd.DataFrame, rng: np.random.Generator, rules: tuple[str, ...] = RULES
) -> pd.DataFrame:
    """The first of ``rules`` (the new default) against each other, paired over runs, per kind of
    range and over all.
    """
    focus, *others = rules
    out = []
    for kind, part in [("all", rows), *rows.groupby("range")]:
        wide = part.pivot_table(index="run_id", columns="rule", values=["saved", "vs_end"])
        for other in others:
            saved = (wide[("saved", focus)] - wide[("saved", other)]).to_numpy()
            vs_end = (wide[("vs_end", focus)] - wide[("vs_end", other)]).to_numpy()
            saved_lo, saved_hi = paired_interval(saved, rng)
            end_lo, end_hi = paired_interval(vs_end, rng)
            dominates = saved.mean() >= -1e-12 and vs_end.mean() <= 1e-12
            out.append(
                {
                    "set": name,
                    "runs": kind if kind == "all" else str(kind),
                    "against": other,
                    "more_saved": saved.mean(),
                    "more_saved_90": f"{saved_lo:+.3f} .. {saved_hi:+.3f}",
                    "more_given_up": vs_end.mean(),
                    "more_given_up_90": f"{end_lo:+.3f} .. {end_hi:+.3f}",
                    "dominates": "yes" if dominates else "no",
                    "told_apart": _told_apart(saved_lo, saved_hi, end_lo, end_hi),
                }
            )
    return pd.DataFrame(out)


#: How many of the most influential runs :func:`influence` leaves out, one at a time more.
MOST_INFLUENTIAL = 3


def influence(name: str, rows: pd.DataFrame, rules: tuple[str, ...] = RULES) -> pd.DataFrame:
    """How much of the new default's gap to each fixed budget a few runs make, per kind of range.

    For the first of ``rules`` against each of :data:`BUDGETS`, paired over runs: the mean of the
    per-run difference in reward given up against the end with all runs, then with the 1, 2, ...
    :data:`MOST_INFLUENTIAL` runs left out whose difference is largest (where the budget kept the
    most reward over the default), and the mean difference in steps saved over the same runs.
    """
    focus = rules[0]
    out = []
    for kind, part in [("all", rows), *rows.groupby("range")]:
        wide = part.pivot_table(index="run_id", columns="rule", values=["saved", "vs_end"])
        for budget in BUDGETS:
            vs_end = (wide[("vs_end", focus)] - wide[("vs_end", budget)]).sort_values(ascending=False)
            saved = wide[("saved", focus)] - wide[("saved", budget)]
            for left_out in range(MOST_INFLUENTIAL + 1):
                kept = vs_end.index[left_out:]
                out.append(
                    {
                        "set": name,
                        "runs": kind if kind == "all" else str(kind),
                        "against": budget,
                        "left_out": left_out,
                        "n": len(kept),
                        "more_saved": float(saved[kept].mean()),
                        "more_given_up": float(vs_end[kept].mean()),
                        # the run's name, without the kind of range load_rows keys it with
                        "last_left_out": str(vs_end.index[left_out - 1]).split(" | ")[0] if left_out else "",
                        "its_difference": float(vs_end.iloc[left_out - 1]) if left_out else np.nan,
                    }
                )
    return pd.DataFrame(out)


def _told_apart(saved_lo: float, saved_hi: float, end_lo: float, end_hi: float) -> str:
    """What the intervals say: which of the two differences the runs can tell from none."""
    said = []
    if saved_lo > 0:
        said.append("saves more")
    elif saved_hi < 0:
        said.append("saves less")
    if end_hi < 0:
        said.append("gives up less")
    elif end_lo > 0:
        said.append("gives up more")
    return ", ".join(said) if said else "neither"


def rule_tables(rules: tuple[str, ...] = RULES) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every set's :func:`summaries`, :func:`comparisons` of ``rules`` (the first against the
    others) and :func:`influence` of the bundled sets, each as one table.
    """
    kinds = bundled_range_kinds()
    rng = np.random.default_rng(0)
    tables, paired, influential = [], [], []
    for name, path in SETS:
        rows = load_rows(path, kinds, rules)
        missing = sorted(set(rules) - set(rows["rule"]))
        if missing:
            raise SystemExit(f"{path} has no rows of {missing}: rerun the benchmark that writes it")
        tables.append(summaries(name, rows, rules))
        paired.append(comparisons(name, rows, rng, rules))
        if name.startswith("bundled"):
            influential.append(influence(name, rows, rules))
    return (
        pd.concat(tables, ignore_index=True),
        pd.concat(paired, ignore_index=True),
        pd.concat(influential, ignore_index=True),
    )


def main(argv: list[str] | None = None) -> int:
    """Read every set's rows, compare the rules, write ``results/default_rule.md``."""
    start = time.perf_counter()
    table, pairs, influential = rule_tables()
    lines = [
        "# The default stop rule against the ones it replaced and the fixed budgets",
        "",
        f"Command: `{command_line('default_rule.py', argv)}`  ",
        f"Machine: {machine_line()}; {time.perf_counter() - start:.1f} s (the benchmarks' committed rows "
        "read, nothing refitted).",
        "",
        f"The default of every interface: `{NEW_DEFAULT}` (`GuardedBudgetRule(0.5)`: guard `prob=0.3`, "
        "early stops at `early_prob=0.9`, held while the run's logged reward rose by more than 1% of the "
        "range over its latest tenth, `rising_eps=0.01`; on the live update's tempered likelihood, "
        f"`likelihood_weight=0.5`); before it `{OLD_DEFAULT}` (`GuardedBudgetRule(0.5, early_prob=0.95, "
        f"rising_eps=None)`) and, first, `{FIRST_DEFAULT}` (`PlateauRule(eps=0.01, prob=0.9)`). Rows: "
        + ", ".join(f"`{p.relative_to(HERE)}`" for _, p in SETS)
        + ". `steps_saved` and `vs_end` (reward given up against the run's own end, a share of the "
        "range; negative: the stop kept more) are means over runs as those benchmarks score them; `dip` "
        "(simulated runs only) the smoothed reward at the stop minus its mean over the 10% of the run "
        "around it.",
        "",
        "## Each rule",
        "",
        markdown_table(table),
        "",
        "## The new default against each other rule, paired over the same runs",
        "",
        "`more_saved` and `more_given_up`: the new default's mean minus the other rule's, with a "
        f"{INTERVAL:.0%} bootstrap interval over runs ({BOOTSTRAP:,} resamples). `dominates`: as many "
        "steps saved and no more given up, on the means. `told_apart`: the differences whose interval "
        "excludes zero.",
        "",
        markdown_table(pairs),
        "",
        "## What a few runs make of the gap to a fixed budget",
        "",
        "The bundled sets are 24-60 short, noisy runs, and a mean over them can turn on one or two. "
        "`more_given_up` (the new default's mean reward given up against the end minus the budget's) "
        f"with all runs (`left_out` 0), then with the 1 to {MOST_INFLUENTIAL} runs left out where the "
        "budget kept the most over the default (`last_left_out`, the run left out last, and "
        "`its_difference`, its own difference); `more_saved` over the same runs.",
        "",
        markdown_table(influential),
        "",
        "## On the simulated runs, by shape",
        "",
        "On a flat or falling run the right answer is to stop early: `stop_fraction` (the share of the run "
        "at the stop, 1 where the rule never stopped) says how early each rule stops there, and where it "
        "waits for a rise.",
        "",
        markdown_table(shape_table(pd.read_csv(RESULTS / "stopping_simulated_runs.csv"), RULES)),
        "",
    ]
    write_result(RESULTS / "default_rule.md", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
