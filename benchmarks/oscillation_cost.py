"""Cost of the oscillation check (PSIS-LOO of the damped oscillator against exp and weibull) per run.

Times ``bayesgrpo.questions.diagnostics.fit_oscillation`` on every bundled run (the first call also pays
the one-off compilation of each family) and says which runs it would flag.

Usage::

    python benchmarks/oscillation_cost.py > benchmarks/results/oscillation_cost.md
"""

from __future__ import annotations

import statistics
import time
import warnings

from _markdown import machine_line

from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.questions import diagnostics


def main() -> None:
    """Time the oscillation detector on the bundled runs."""
    warnings.simplefilter("ignore")
    table = load_bundled(warn=False)
    seconds, flagged, first = [], [], None
    for run_id in table.run_ids:
        frame = table.run(run_id)
        start = time.perf_counter()
        fit = diagnostics.fit_oscillation(frame["step"], frame["reward"])
        elapsed = time.perf_counter() - start
        if first is None:
            first = elapsed
        else:
            seconds.append(elapsed)
        if fit.clear:
            flagged.append(run_id)
    q1, median, q3 = statistics.quantiles(seconds, n=4)
    print("# Oscillation check: cost per run on the bundled runs\n")
    print("Command: `python benchmarks/oscillation_cost.py`  ")
    print(f"Machine: {machine_line()}.\n")
    print(f"- first run (compiles the three families): {first:.1f} s")
    print(
        f"- the other {len(seconds)} runs: median {median:.1f} s (quartiles {q1:.1f}-{q3:.1f} s, mean "
        f"{statistics.mean(seconds):.1f} s)"
    )
    print(f"- runs whose oscillator fit is clearly better: {len(flagged)} {flagged}")


if __name__ == "__main__":
    main()
