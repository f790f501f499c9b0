"""Issue 25: a plateau rule asked to say "stop" at 2 or 3 checks in a row, to keep it out of dips.

A noisy run's prefix that ends in a dip looks flat, and a plateau rule asked there stops at the
low point. :class:`bayesgrpo.questions.stopping.Confirmed` keeps a ``stop`` only at its k-th
consecutive check (checks every 5% of a run). Beside it, a rule on the expected gain per remaining
step (:class:`bayesgrpo.questions.stopping.GainRateRule`: stop when the expected remaining gain is
below ``rate`` x the share of the run left, ``rate`` a share of the reward range). Measured, for
k = 1 (the rule as shipped), 2 and 3:

* on the 60 bundled runs, each conditioned on a 5-fold population that never saw it (the fits of
  ``benchmarks/backtest.py``, cached in ``benchmarks/_scratch/backtest_pops``), runs with and
  without a stated reward range apart: steps saved, reward given up against the run's end (the
  smoothed logged reward, as ``backtest.py`` measures it) and the dip at the stop;
* on the simulated runs of ``benchmarks/stopping_simulated.py`` (known truth, 16 a shape), with
  and without a stated range, on the shipped population: the same measures on the true curve.

The dip at a stop: the smoothed logged reward there (centred mean over 5% of the points) minus
the mean logged reward over the 10% of the run around it, as a share of the run's logged range.

Usage::

    python benchmarks/experiments/stop_confirmation.py            # about 10 minutes on 2 cores

Writes ``benchmarks/experiments/results/stop_confirmation.md``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _markdown import command_line, machine_line, markdown_table
from stopping_simulated import dip_at

RESULTS = HERE / "results"
CHECKS = (1, 2, 3)
PLATEAUS = [(eps, prob) for eps in (0.01, 0.02, 0.03) for prob in (0.8, 0.9)]
#: GainRateRule's rates: the expected gain, as a share of the range per whole run, worth the steps.
GAIN_RATES = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2)


def rules() -> dict:
    """Plateau rules at each k, and the fixed budgets they must beat."""
    from bayesgrpo.evaluate.backtest import FixedFraction
    from bayesgrpo.questions.stopping import Confirmed, GainRateRule, PlateauRule

    out: dict = {f"fixed {f}": FixedFraction(f) for f in (0.5, 0.6)}
    for eps, prob in PLATEAUS:
        for k in CHECKS:
            out[f"plateau eps={eps} p={prob} k={k}"] = Confirmed(PlateauRule(eps, prob, relative=True), k)
    for rate in GAIN_RATES:
        for k in CHECKS:
            out[f"gain rate r={rate} k={k}"] = Confirmed(GainRateRule(rate, relative=True), k)
    return out


def summary(frame: pd.DataFrame, given_up: str) -> pd.DataFrame:
    """Per rule: saved, given up against the end, dip, the share stopped."""
    table = (
        frame.groupby("rule", sort=False)
        .agg(
            steps_saved=("steps_saved", "mean"),
            vs_end=(given_up, "mean"),
            dip=("dip", "mean"),
            stopped=("stopped", "mean"),
        )
        .reset_index()
    )
    fixed = table[table["rule"].str.startswith("fixed")].set_index("rule")
    table["beats_fixed_0.5"] = (table["steps_saved"] >= fixed.loc["fixed 0.5", "steps_saved"]) & (
        table["vs_end"] <= fixed.loc["fixed 0.5", "vs_end"]
    )
    table["meets_target"] = (
        (table["steps_saved"] >= 0.45) & (table["vs_end"] <= 0.01) & (table["dip"].abs() <= 0.01)
    )
    return table


def bundled_part(split: str, workers: int | None) -> tuple[dict[str, pd.DataFrame], float]:
    """The rules on the bundled runs (5-fold or leave-one-source-out populations), with and
    without a stated range.
    """
    import backtest

    from bayesgrpo.evaluate.backtest import run_points, stopping_backtest
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.questions.live import stated_reward_range

    table = load_bundled(warn=False)
    args = backtest.parse_args(["--cache", str(HERE.parent / "_scratch" / "backtest_pops"), "--split", split])
    populations, _ = backtest.populations_for(table, args)
    start = time.perf_counter()
    stops = stopping_backtest(table, populations, rules(), 0.05, n_draws=1000, random_seed=0, workers=workers)
    seconds = time.perf_counter() - start
    dips = []
    for row in stops.itertuples(index=False):
        points = run_points(table, row.run_id)
        dips.append(dip_at(points["step"].to_numpy(float), points["reward"].to_numpy(float), row.stop_step))
    stops["dip"] = dips
    stated = {r["run_id"]: stated_reward_range(r) is not None for r in table.runs.to_dict("records")}
    stops["stated"] = stops["run_id"].map(stated)
    return {
        f"bundled runs, {'stated' if s else 'no stated'} range ({part['run_id'].nunique()} runs)": summary(
            part, "reward_vs_end"
        )
        for s, part in stops.groupby("stated")
    }, seconds


def simulated_part(workers: int | None) -> tuple[dict[str, pd.DataFrame], float]:
    """The rules on the simulated runs of known truth, with and without a stated range."""
    from stopping_simulated import runs_table, scored_on_truth, simulate

    from bayesgrpo.evaluate.backtest import stopping_backtest
    from bayesgrpo.model.datasets import bundled_population

    points, truth, runs = simulate(16, 0)
    population = bundled_population()
    out = {}
    start = time.perf_counter()
    for stated in (True, False):
        table = runs_table(points, runs, stated)
        stops = stopping_backtest(
            table, dict.fromkeys(table.run_ids, population), rules(), 0.05, random_seed=0, workers=workers
        )
        scored = scored_on_truth(stops, points, truth)
        out[f"simulated runs, {'stated' if stated else 'no stated'} range ({len(runs)} runs, true curve)"] = (
            summary(scored, "vs_end")
        )
    return out, time.perf_counter() - start


def main() -> None:
    """Both parts; write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--split",
        choices=["kfold", "loso"],
        default="kfold",
        help="the bundled runs' populations: 5-fold by run (default) or leave one source out "
        "(benchmarks/_loso.py's cache); loso writes stop_confirmation_loso.md",
    )
    parser.add_argument("--skip-simulated", action="store_true")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (0: serial, in this process)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    workers = args.workers or None
    bundled, bundled_seconds = bundled_part(args.split, workers)
    simulated, simulated_seconds = ({}, 0.0) if args.skip_simulated else simulated_part(workers)
    lines = [
        "# A plateau stop confirmed at k checks in a row (issue 25)",
        "",
        f"Command: `{command_line('experiments/stop_confirmation.py', None)}`  ",
        f"Machine: {machine_line()}; bundled part {bundled_seconds:.0f} s, simulated part "
        f"{simulated_seconds:.0f} s ("
        + (f"Ray, {workers} workers" if workers else "serial")
        + "). Bundled runs' populations: "
        + ("5-fold by run." if args.split == "kfold" else "leave one source out."),
        "",
        "`Confirmed(PlateauRule(eps, p, relative=True), k)`: a stop only at the k-th consecutive check "
        "saying so (checks every 5% of a run); k = 1 is the rule as shipped. `vs_end`: reward given up "
        "against the run's end (bundled: smoothed logged reward; simulated: the true curve), `dip`: the "
        "smoothed reward at the stop minus its mean over the 10% of the run around it; shares of the "
        "run's logged range. `meets_target`: >= 45% saved at <= 1% given up with |dip| <= 1%.",
        "",
    ]
    for title, table in {**bundled, **simulated}.items():
        lines += [f"## {title}", "", markdown_table(table), ""]
    name = "stop_confirmation.md" if args.split == "kfold" else "stop_confirmation_loso.md"
    (RESULTS / name).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
