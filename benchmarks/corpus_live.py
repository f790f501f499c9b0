"""The live forecast as a user calls it, on corpus runs from sources the shipped population never saw.

Every built corpus run (``python benchmarks/corpus/build.py``) whose source is not one of the
bundled runs' sources is given to the live path exactly as a new user's log reaches it: raw
rewards, no metadata (no stated range, family or planned steps; the horizon is the run's last
logged step), the shipped population as its prior, every default. Each run is cut at 10/25/50% of
its steps and its later points forecast; carrying the last value forward (persistence) is scored
on the same pairs. Reported per cut, for the source folds 0-4 and for the sealed fold apart, pooled
over runs (no source above 10% of the weight) and with each source weighted equally, each with a
90% interval from a bootstrap over sources:

- the ratio of median CRPS (the live path's over persistence's), below 1 where the live path wins;
- the share of later points inside the live 90% and 50% bands;
- the ratio of mean final-reward errors.

A second table says on which kind of run it loses: the same ratio and band, each source weighted
equally, over every unseen run (folds 0-4 and sealed together: a description of the same forecasts,
nothing chosen on it) by the run's shape (``bayesgrpo.evaluate.corpus.shapes``).

Resumable: each run's rows are cached in ``benchmarks/_scratch/corpus_live/`` under a hash of the
settings and of the package's code.

Usage::

    python benchmarks/corpus/build.py        # the corpus (from the git mirrors)
    python benchmarks/corpus_live.py         # ~2 s a run on 2 cores
    python benchmarks/corpus_live.py --option likelihood_weight=0.5 --forecasts-only \
        --out benchmarks/_scratch/tempered.md  # an option tried: folds 0-4 only, never the sealed fold
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _corpus import BUILT, SEALED, cached_rows, code_hash, fold_group, forecast_summary, stop_summary  # noqa: E402
from _markdown import command_line, machine_line, markdown_table, write_result  # noqa: E402

from bayesgrpo.evaluate.corpus import load_built, read_manifest  # noqa: E402
from bayesgrpo.logs.table import RunsTable, coerce_metadata  # noqa: E402

logger = logging.getLogger("corpus_live")
SCRATCH = HERE / "_scratch" / "corpus_live"
RESULTS = HERE / "results" / "corpus_live.md"
METHODS = ["bayesgrpo", "persistence"]


def as_a_user_gives_it(table: RunsTable) -> RunsTable:
    """Raw rewards and nothing else: every metadata value but the run id is dropped."""
    runs = coerce_metadata(table.runs[["run_id"]].copy())
    return RunsTable(points=table.points[["run_id", "step", "reward"]].copy(), runs=runs, report=table.report)


def with_stated_range(table: RunsTable, runs: pd.DataFrame) -> RunsTable:
    """The runs whose source states a reward range, given that range and nothing else."""
    stated = runs.loc[table.run_ids, ["reward_min", "reward_max"]].dropna()
    meta = runs.loc[stated.index, ["reward_min", "reward_max"]].rename_axis("run_id").reset_index()
    chosen = table.select(stated.index.tolist())
    return RunsTable(points=chosen.points, runs=coerce_metadata(meta), report=chosen.report)


#: ``--option NAME=default``: the option at its default (the forecasts are the default's, cached once).
AT_DEFAULT = "default"


def live_options(pairs: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs as LiveForecaster keyword options (VALUE read as JSON, else a string;
    :data:`AT_DEFAULT` leaves the option out).
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if value == AT_DEFAULT:
            continue
        try:
            options[name] = json.loads(value)
        except json.JSONDecodeError:
            options[name] = value
    return options


def shipped_population(args: argparse.Namespace) -> Any:
    """The shipped population, or its live forecaster with ``--option`` settings where any are given."""
    from bayesgrpo.evaluate.backtest.cuts import run_seed
    from bayesgrpo.model.datasets import bundled_population
    from bayesgrpo.questions.live import LiveForecaster

    population = bundled_population()
    options = live_options(args.option)
    if not options:
        return population
    # seeded as the backtest seeds the first population it meets, so runs pair across options
    return LiveForecaster(
        population, n_draws=args.draws, random_seed=run_seed(args.seed, "live", 0), **options
    )


def forecasts(table: RunsTable, args: argparse.Namespace) -> pd.DataFrame:
    """Every run's forecast rows, from the cache where it holds them."""
    from bayesgrpo.evaluate.backtest import forecast_backtest

    population = shipped_population(args)
    settings = {"cuts": args.cuts, "draws": args.draws, "seed": args.seed, "methods": METHODS}
    settings |= {"options": live_options(args.option)} if live_options(args.option) else {}
    return cached_rows(
        SCRATCH / "forecast",
        table.run_ids,
        dict.fromkeys(table.run_ids, "shipped"),  # the shipped population is in the code hash
        settings,
        lambda ids: forecast_backtest(
            table.select(ids),
            dict.fromkeys(ids, population),
            cuts=args.cuts,
            methods=METHODS,
            n_draws=args.draws,
            random_seed=args.seed,
        ),
    )


#: The stop rules compared: the default every interface decides with, and the fixed budgets the
#: stop-decision issue asks it to dominate.
STOP_RULES = ("default rule", "fixed 0.5", "fixed 0.6")


def stops(
    table: RunsTable, args: argparse.Namespace, stated: bool = False, rules: dict[str, Any] | None = None
) -> pd.DataFrame:
    """The stop rules run online on every run (cached under a hash of the settings and code;
    ``stated``: the runs carry their stated reward range). ``rules``: name -> rule, default
    :data:`STOP_RULES`'s.
    """
    from bayesgrpo.evaluate.backtest import FixedFraction, stopping_backtest
    from bayesgrpo.questions.stopping import default_rule

    key = {"check": args.check_every, "draws": args.draws, "seed": args.seed, "code": code_hash()}
    options = live_options(args.option)
    key |= {"runs": sorted(table.run_ids)} | ({"options": options} if options else {})
    key |= {"stated": True} if stated else {}
    key |= {"rules": sorted(rules)} if rules is not None else {}
    path = SCRATCH / f"stops_{hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]}.csv"
    if path.exists():
        return pd.read_csv(path)
    population = shipped_population(args)
    if rules is None:
        rules = {
            "default rule": default_rule(),
            "fixed 0.5": FixedFraction(0.5),
            "fixed 0.6": FixedFraction(0.6),
        }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = stopping_backtest(
            table,
            dict.fromkeys(table.run_ids, population),
            rules,
            check_every_fraction=args.check_every,
            n_draws=args.draws,
            random_seed=args.seed,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return frame


def forecast_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the corpus's live forecasts (``--built``, ``--cuts``, ``--draws``, ``--seed``,
    ``--boot``), shared with ``defaults.py``.
    """
    parser.add_argument("--built", type=Path, default=BUILT)
    parser.add_argument("--cuts", type=float, nargs="+", default=[0.1, 0.25, 0.5])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--boot", type=int, default=2000)


def unseen_runs(built: Path, with_sealed: bool) -> tuple[pd.DataFrame, pd.Series, RunsTable]:
    """The built corpus's runs, which of them come from a source no bundled run comes from
    (the sealed fold's only ``with_sealed``), and those runs as a user gives them.
    """
    corpus = load_built(built)
    manifest = read_manifest(HERE / "corpus" / "manifest.csv")
    bundled_sources = set(manifest.loc[manifest["bundled_file"] != "", "source"])
    runs = corpus.runs
    unseen = ~runs["source"].isin(bundled_sources)
    if not with_sealed:
        unseen &= runs["fold"].astype(str) != SEALED
    held = runs.loc[unseen, "run_id"].astype(str).tolist()
    return runs, unseen, as_a_user_gives_it(corpus.select(held))


def shape_of(table: RunsTable) -> dict[str, str]:
    """Each run's shape (rising, flat, peak then fall, collapse) from its whole curve."""
    from bayesgrpo.evaluate.corpus.shapes import curve_shape

    return {
        run_id: curve_shape(points["reward"].to_numpy()) for run_id, points in table.points.groupby("run_id")
    }


def main(argv: list[str] | None = None) -> None:
    """Score the live path on the corpus's runs from sources the shipped population never saw."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    forecast_arguments(parser)
    parser.add_argument("--check-every", type=float, default=0.05, help="stop rules: check every share")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a LiveForecaster option (JSON value)",
    )
    parser.add_argument("--forecasts-only", action="store_true", help="skip the stop rules")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    start = time.perf_counter()
    # a setting tried is chosen on the source folds: the sealed fold is not looked at
    runs, unseen, table = unseen_runs(args.built, with_sealed=not args.option)
    held = table.run_ids
    frame = forecasts(table, args)
    by_run = runs.set_index("run_id")
    by_run["group"] = fold_group(by_run["fold"])
    result = forecast_summary(frame, by_run, METHODS, args.boot).drop(columns="method")
    table_sources = runs.loc[runs["run_id"].isin(held), "source"].nunique()
    kinds = by_run.loc[by_run.index.isin(held)].copy()
    kinds["group"] = kinds.index.map(shape_of(table))
    by_kind = forecast_summary(frame, kinds, METHODS, args.boot)
    by_kind = by_kind[by_kind["weights"] == "each source equal"].rename(columns={"group": "shape"})
    lines = [
        "# The live forecast as a user calls it, on corpus runs of unseen sources",
        "",
        f"`{command_line('corpus_live.py', argv)}` ({time.perf_counter() - start:.0f} s; {machine_line()})",
        "",
        f"{len(held)} corpus runs from {table_sources} sources that no bundled run comes from; "
        "each given as raw rewards with no metadata (horizon: its last "
        "logged step), the shipped population as prior, every default. Ratios below 1: the live "
        "path beats carrying the last value forward. Intervals: 90%, bootstrap over sources.",
        "",
        markdown_table(result),
        "",
        "## On which kind of run it loses",
        "",
        "Every run above (folds 0-4 and sealed together), by the shape of its whole curve (the corpus "
        "card's: a running median over a tenth of the run), each source weighted equally:",
        "",
        markdown_table(
            by_kind[["shape", "cut", "n runs", "n sources", "median CRPS / persistence", "90% band holds"]]
        ),
        "",
    ]
    if args.option:
        lines[4:4] = [f"LiveForecaster options: {', '.join(args.option)} (the rest at their defaults).", ""]
    if not args.forecasts_only:
        stated = with_stated_range(table, by_run)
        lines += [
            "## Stop decisions",
            "",
            "The default stop rule and the fixed budgets run online on the same runs (checked every "
            f"{args.check_every:.0%} of a run; the horizon is the run's last logged step). Steps saved: a "
            "share of the run; given up: the smoothed reward at the end minus at the stop, a share of "
            "the run's range (negative: the stop was better than the end). Each source weighted "
            "equally; 90% intervals from a bootstrap over sources.",
            "",
            markdown_table(stop_summary(stops(table, args), by_run, STOP_RULES, args.boot)),
            "",
            f"The same, for the {len(stated.run_ids)} of these runs whose source states a reward range, "
            "given that range:",
            "",
            markdown_table(stop_summary(stops(stated, args, stated=True), by_run, STOP_RULES, args.boot)),
            "",
        ]
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
