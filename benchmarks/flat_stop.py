"""The opt-in flat stop against the default rule and the fixed budgets, on every stopping set.

``GuardedBudgetRule(0.5, flat_eps=0.02)`` (``bayesgrpo stop --flat-stop 0.02``) is the default rule
plus one more way to stop: from 20% of the run on, where the run's logged reward rose less than 2%
of the range over its latest fifth at the rise's one-sided 95% upper bound (unless the rise guard
holds the run). The stopping benchmarks run it as ``guarded budget 0.5, flat stop 0.02`` beside
their other rules; this script reads the rows they committed (nothing is fitted or updated here)
and puts it beside the default, ``fixed 0.5`` and ``fixed 0.6``, paired over the same runs with
the intervals of ``default_rule.py``, for runs with and without a stated range, and by shape on the
simulated runs (where a flat or falling run should stop early and a late riser should not).

Usage::

    python benchmarks/flat_stop.py   # a second; writes results/flat_stop.md
"""

from __future__ import annotations

import time

import pandas as pd
from _markdown import command_line, machine_line, markdown_table, write_result
from default_rule import BUDGETS, INTERVAL, NEW_DEFAULT, RESULTS, SETS, rule_tables
from stopping_simulated import shape_table

FLAT_STOP = "guarded budget 0.5, flat stop 0.02"
RULES = (FLAT_STOP, NEW_DEFAULT, *BUDGETS)


def main(argv: list[str] | None = None) -> int:
    """Read every set's rows, compare the flat stop with the others, write ``results/flat_stop.md``."""
    start = time.perf_counter()
    table, pairs, _ = rule_tables(RULES)
    simulated = pd.read_csv(RESULTS / "stopping_simulated_runs.csv")
    lines = [
        "# The opt-in flat stop against the default rule and the fixed budgets",
        "",
        f"Command: `{command_line('flat_stop.py', argv)}`  ",
        f"Machine: {machine_line()}; {time.perf_counter() - start:.1f} s (the benchmarks' committed rows "
        "read, nothing refitted).",
        "",
        f"`{FLAT_STOP}`: `GuardedBudgetRule(0.5, flat_eps=0.02)` (`bayesgrpo stop --flat-stop 0.02`), the "
        f"default `{NEW_DEFAULT}` plus a stop from 20% of the run on where the logged reward rose less than "
        "2% of the range over the run's latest fifth at the rise's one-sided 95% upper bound (not while the "
        "rise guard holds the run). Rows: "
        + ", ".join(f"`{p.relative_to(RESULTS.parent)}`" for _, p in SETS)
        + ". `steps_saved` and `vs_end` (reward given up against the run's own end, a share of the range; "
        "negative: the stop kept more) are means over runs as those benchmarks score them; `dip` (simulated "
        "runs only) the smoothed reward at the stop minus its mean over the 10% of the run around it. The "
        "bundled sets split by the range the run's metadata states (the live path's set gives no run its "
        "range; the other two give each run its own).",
        "",
        "## Each rule",
        "",
        markdown_table(table),
        "",
        "## The flat stop against each other rule, paired over the same runs",
        "",
        "`more_saved` and `more_given_up`: the flat stop's mean minus the other rule's, with a "
        f"{INTERVAL:.0%} bootstrap interval over runs. `dominates`: as many steps saved and no more given "
        "up, on the means. `told_apart`: the differences whose interval excludes zero.",
        "",
        markdown_table(pairs),
        "",
        "## On the simulated runs, by shape",
        "",
        "`stop_fraction`: the share of the run at the stop (1 where the rule never stopped). A flat or "
        "falling run should stop early; a late riser is flat until its rise.",
        "",
        markdown_table(shape_table(simulated, RULES)),
        "",
    ]
    write_result(RESULTS / "flat_stop.md", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
