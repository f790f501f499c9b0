"""The backtest harness through the fleet's engine: its per-run work serially, then on Ray.

The forecast backtest (every run cut at 10/25/50%, forecast by bayesgrpo and the four baselines,
Domhan's ensemble included) and the stopping backtest (every rule of ``benchmarks/backtest.py``
on every run, the Bayesian ones online) on the 60 bundled runs, with the 5-fold populations of
``benchmarks/backtest.py`` (fitted once and cached in ``--cache``). Each is run as before (serial,
in this process) and through the Ray engine with ``--workers`` workers; measured: wall time,
speed-up, and whether every row equals the serial one (it must: every draw is seeded by its run).

Usage::

    python benchmarks/fleet_backtest.py                 # about 30 minutes on 2 cores
    python benchmarks/fleet_backtest.py --quick         # 8 runs, small settings (a smoke run)

Resumable: each part's table and time are kept in ``benchmarks/_scratch/fleet_backtest/``
(``--fresh`` reruns them). Writes ``benchmarks/results/fleet_backtest.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import command_line, machine_line, markdown_table
from backtest import ALL_METHODS, pick_runs, populations_for, stopping_rules

SCRATCH = HERE / "_scratch" / "fleet_backtest"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=HERE / "_scratch" / "backtest_pops")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "fleet_backtest.md")
    return parser.parse_args(argv)


def timed(name: str, folder: Path, fresh: bool, run: object) -> tuple[pd.DataFrame, float]:
    """``run()``'s table and wall time, from ``folder`` when an earlier run left them."""
    table_path, time_path = folder / f"{name}.parquet", folder / f"{name}.json"
    if not fresh and table_path.exists() and time_path.exists():
        return pd.read_parquet(table_path), json.loads(time_path.read_text())["seconds"]
    start = time.perf_counter()
    table = run()  # type: ignore[operator]
    seconds = time.perf_counter() - start
    table.to_parquet(table_path)
    time_path.write_text(json.dumps({"seconds": seconds}))
    logging.info("%s: %.0f s", name, seconds)
    return table, seconds


def main(argv: list[str] | None = None) -> None:
    """Run both backtests serially and on Ray; write the comparison."""
    import backtest

    from bayesgrpo.evaluate.backtest import forecast_backtest, stopping_backtest
    from bayesgrpo.model.datasets import load_bundled

    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    backtest_args = backtest.parse_args(["--cache", str(args.cache), *(["--quick"] if args.quick else [])])
    table = load_bundled(warn=False)
    if backtest_args.runs is not None:
        table = table.select(pick_runs(table, backtest_args.runs, backtest_args.seed))
    populations, _ = populations_for(table, backtest_args)
    folder = SCRATCH / ("quick" if args.quick else "full")
    folder.mkdir(parents=True, exist_ok=True)
    forecast_options = {
        "cuts": backtest_args.cuts,
        "methods": list(ALL_METHODS),
        "baseline_options": {"domhan_ensemble": {"n_steps": backtest_args.domhan_steps}},
        "n_draws": backtest_args.forecast_draws,
        "random_seed": backtest_args.seed,
    }
    stopping_options = {
        "check_every_fraction": backtest_args.check_every,
        "smoothing_fraction": backtest_args.smoothing,
        "n_draws": backtest_args.forecast_draws,
        "random_seed": backtest_args.seed,
    }
    rules = stopping_rules()
    rows = []
    for part, run in (
        ("forecast", lambda **kw: forecast_backtest(table, populations, **forecast_options, **kw)),
        ("stopping", lambda **kw: stopping_backtest(table, populations, rules, **stopping_options, **kw)),
    ):
        serial, serial_seconds = timed(f"{part}_serial", folder, args.fresh, run)
        on_ray, ray_seconds = timed(
            f"{part}_ray{args.workers}", folder, args.fresh, lambda run=run: run(workers=args.workers)
        )
        drop = [c for c in ("seconds",) if c in serial.columns]
        try:
            pd.testing.assert_frame_equal(serial.drop(columns=drop), on_ray.drop(columns=drop))
            equal = True
        except AssertionError:
            equal = False
        for engine, seconds in (
            ("serial (before)", serial_seconds),
            (f"Ray, {args.workers} workers", ray_seconds),
        ):
            rows.append(
                {
                    "backtest": part,
                    "engine": engine,
                    "rows": len(serial),
                    "seconds": seconds,
                    "speed_up": serial_seconds / seconds,
                    "rows_equal_serial": equal,
                }
            )
    command, machine = command_line("fleet_backtest.py", argv), machine_line()
    lines = [
        "# The backtest harness through the fleet's engine",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}.  ",
        f"Runs: {len(table.run_ids)} bundled runs; populations: {backtest_args.folds}-fold, "
        f"{backtest_args.draws} draws + {backtest_args.draws} tuning steps a chain (cached in "
        f"`{args.cache.name}`, not timed); forecasts: cuts {backtest_args.cuts}, "
        f"methods {list(ALL_METHODS)}, "
        f"Domhan {backtest_args.domhan_steps} emcee steps, {backtest_args.forecast_draws} draws; stopping: "
        f"{len(rules)} rules, checks every {backtest_args.check_every:g} of a run.",
        "",
        "`forecast_backtest` and `stopping_backtest` map their per-run work on the fleet's engine "
        "(`bayesgrpo.evaluate.backtest.engine`): serial in this process before, on a local Ray after "
        "(each fold's population put in the object store once, one live forecaster per population per "
        "worker process). Ray's start is in the time.",
        "",
        markdown_table(pd.DataFrame(rows)),
        "",
    ]
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
