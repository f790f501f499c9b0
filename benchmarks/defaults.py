"""Each default of the live forecast re-decided on the corpus's source folds.

For every option below and each of the source folds 0-4 in turn, the setting with the lowest
median CRPS (over carrying the last value forward, pooled) on the other four folds is chosen and
scored on the held-out fold against the plain setting. The gain reported is over every held-out
fold's (run, cut) pairs at once: the plain setting's ratio of median CRPS to persistence's minus
the chosen one's (above 0: the chosen setting forecast better), pooled and with each source
weighted equally, with a 90% interval from a bootstrap over sources. A gain whose interval holds
zero is no gain: the plain setting stays. The sealed fold is not looked at.

The forecasts are those of ``corpus_live.py --option NAME=VALUE`` (cached in
``benchmarks/_scratch/corpus_live/``): the shipped population, raw rewards, no metadata.

Usage::

    python benchmarks/defaults.py            # writes benchmarks/results/defaults.md
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _corpus import WEIGHTINGS, interval, weighted_median  # noqa: E402
from _markdown import command_line, machine_line, markdown_table, write_result  # noqa: E402
from corpus_live import (  # noqa: E402
    AT_DEFAULT,
    forecast_arguments,
    forecasts,
    stops,
    unseen_runs,
    with_stated_range,
)

from bayesgrpo.evaluate.corpus import source_bootstrap  # noqa: E402

RESULTS = HERE / "results" / "defaults.md"

#: option -> (plain setting, the settings tried, why the plain one is plain); ``"default"``: the
#: option at its current default (``corpus_live.AT_DEFAULT``).
OPTIONS: dict[str, tuple[Any, list[Any], str]] = {
    "likelihood_weight": (1.0, [1.0, 0.5], "the untempered posterior"),
}


def current_default(name: str) -> str:
    """The option's default in ``LiveForecaster`` now, as text."""
    import dataclasses

    from bayesgrpo.questions.live import LiveForecaster

    field = next(f for f in dataclasses.fields(LiveForecaster) if f.name == name)
    if field.default is dataclasses.MISSING:
        return f"{field.default_factory.__name__}()"  # type: ignore[misc]
    return repr(field.default)


def crps_ratio(values: np.ndarray, weights: np.ndarray) -> float:
    """Weighted median CRPS of column 0 over that of the last column (persistence)."""
    return weighted_median(values[:, 0], weights) / weighted_median(values[:, -1], weights)


def gain(values: np.ndarray, weights: np.ndarray) -> float:
    """The plain setting's CRPS ratio (column 1) minus the chosen (or tried) one's (column 0)."""
    baseline = weighted_median(values[:, 2], weights)
    return (weighted_median(values[:, 1], weights) - weighted_median(values[:, 0], weights)) / baseline


def setting_rows(table: Any, args: argparse.Namespace, name: str, value: Any) -> pd.DataFrame:
    """Every (run, cut) CRPS of one setting and of persistence, one row a pair."""
    text = value if value == AT_DEFAULT else json.dumps(value)
    settings = argparse.Namespace(**{**vars(args), "option": [f"{name}={text}"]})
    frame = forecasts(table, settings)
    wide = frame.pivot_table(index=["run_id", "cut"], columns="method", values="crps")
    return wide.rename(columns={"bayesgrpo": "crps", "persistence": "persistence"}).reset_index()


def decide(name: str, table: Any, runs: pd.DataFrame, args: argparse.Namespace) -> dict[str, Any]:
    """The option's row: chosen per held-out fold on the other four, its gain on the held-out ones."""
    plain, tried, _ = OPTIONS[name]
    by_setting = {json.dumps(v): setting_rows(table, args, name, v) for v in tried}
    keys = list(by_setting)
    merged = by_setting[keys[0]][["run_id", "cut", "persistence"]].copy()
    for key, rows in by_setting.items():
        merged = merged.merge(
            rows[["run_id", "cut", "crps"]].rename(columns={"crps": key}), on=["run_id", "cut"]
        )
    merged = merged.dropna()
    merged["source"] = merged["run_id"].map(runs["source"])
    merged["fold"] = merged["run_id"].map(runs["fold"]).astype(str)
    chosen_per_fold, held = {}, []
    for fold, part in merged.groupby("fold"):
        rest = merged[merged["fold"] != fold]
        weights = np.ones(len(rest))
        score = {k: crps_ratio(rest[[k, "persistence"]].to_numpy(), weights) for k in keys}
        chosen = min(score, key=score.get)
        chosen_per_fold[fold] = json.loads(chosen)
        held.append(part.assign(chosen=part[chosen], plain=part[json.dumps(plain)]))
    held_out = pd.concat(held, ignore_index=True)
    values = held_out[["chosen", "plain", "persistence"]].to_numpy()
    row: dict[str, Any] = {
        "option": name,
        "plain": json.dumps(plain),
        "default now": current_default(name),
        "chosen per held-out fold": ", ".join(
            f"{f}: {json.dumps(v)}" for f, v in sorted(chosen_per_fold.items())
        ),
    }
    estimates = {
        label: source_bootstrap(values, held_out["source"], gain, scheme, args.boot)
        for label, scheme in WEIGHTINGS.items()
    }
    for label, estimate in estimates.items():
        row[f"gain, {label}"] = interval(estimate, 3)
    for key in keys:  # each setting tried against the plain one on every pair of folds 0-4
        if key != json.dumps(plain):
            paired = merged[[key, json.dumps(plain), "persistence"]].to_numpy()
            row[f"gain of {key} over plain, pooled"] = interval(
                source_bootstrap(paired, merged["source"], gain, "pooled", args.boot), 3
            )
    for key in keys:
        ratio = source_bootstrap(
            merged[[key, "persistence"]].to_numpy(), merged["source"], crps_ratio, "pooled", args.boot
        )
        row[f"CRPS / persistence at {key}"] = interval(ratio)
    row["default"] = json.dumps(plain) if any(low <= 0 for _, low, _ in estimates.values()) else "chosen"
    return row


#: The budgets every posterior rule is held against (the stop-decision issue's), and the other
#: fixed budgets a default budget is chosen among.
BUDGETS = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)
#: The most reward a default budget may give up against the run's end, in the mean over the
#: other folds' runs (a share of each run's range).
GIVEN_UP_LIMIT = 0.01


def stop_rules() -> dict[str, Any]:
    """The posterior rules tried as the default, and the fixed budgets."""
    from bayesgrpo.evaluate.backtest import FixedFraction
    from bayesgrpo.questions.stopping import GuardedBudgetRule, PlateauRule

    return {
        "guarded 0.5 (default)": GuardedBudgetRule(0.5),
        "guarded 0.5, no early stop, no rise guard": GuardedBudgetRule(0.5, early_prob=None, rising_eps=None),
        "guarded 0.5, flat stop": GuardedBudgetRule(0.5, flat_eps=0.02),
        "guarded 0.6": GuardedBudgetRule(0.6),
        "plateau 1%, p 0.9": PlateauRule(eps=0.01, prob=0.9, relative=True),
        "plateau 2%, p 0.8": PlateauRule(eps=0.02, prob=0.8, relative=True),
        **{f"fixed {f:g}": FixedFraction(f) for f in BUDGETS},
    }


def source_means(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per rule: steps saved and reward given up against the end, each source weighted equally."""
    frame = frame.assign(source=frame["run_id"].map(runs["source"]))
    per_source = frame.groupby(["rule", "source"])[["steps_saved", "reward_vs_end", "dip"]].mean()
    return per_source.groupby("rule").mean()


def choose_stop_default(means: pd.DataFrame) -> str:
    """A posterior rule that dominates ``fixed 0.5`` and ``fixed 0.6`` on these means (the most
    steps saved among them); where none does, the fixed budget that saves the most steps at no
    more than :data:`GIVEN_UP_LIMIT` given up.
    """
    budgets = [f"fixed {f:g}" for f in (0.5, 0.6)]
    posterior = [r for r in means.index if not r.startswith("fixed")]
    dominating = [
        r
        for r in posterior
        if all(
            means.loc[r, "steps_saved"] >= means.loc[b, "steps_saved"]
            and means.loc[r, "reward_vs_end"] <= means.loc[b, "reward_vs_end"]
            for b in budgets
        )
    ]
    if dominating:
        return max(dominating, key=lambda r: means.loc[r, "steps_saved"])
    within = [f"fixed {f:g}" for f in BUDGETS if means.loc[f"fixed {f:g}", "reward_vs_end"] <= GIVEN_UP_LIMIT]
    return min(within, key=lambda r: float(r.split()[1])) if within else "fixed 0.7"


def stop_rows(
    frame: pd.DataFrame, runs: pd.DataFrame, args: argparse.Namespace, label: str
) -> list[dict[str, Any]]:
    """Per held-out fold the rule chosen on the other four; what the chosen rules did on the held-out
    folds against the budgets, each source weighted equally, with intervals over sources.
    """
    frame = frame.assign(fold=frame["run_id"].map(runs["fold"]).astype(str))
    chosen, held = {}, []
    for fold, part in frame.groupby("fold"):
        rule = choose_stop_default(source_means(frame[frame["fold"] != fold], runs))
        chosen[fold] = rule
        held.append(part[part["rule"] == rule].assign(rule="chosen"))
    scored = pd.concat([frame, *held], ignore_index=True)
    wide = scored.pivot_table(index="run_id", columns="rule", values=["steps_saved", "reward_vs_end", "dip"])
    sources = wide.index.map(runs["source"])
    rows = []
    for rule in ["chosen", *stop_rules()]:
        row: dict[str, Any] = {"runs": label, "rule": rule}
        if rule == "chosen":
            row["rule"] = "chosen per held-out fold: " + ", ".join(
                f"{f}: {r}" for f, r in sorted(chosen.items())
            )
        for column, metric, digits in (
            ("steps saved", "steps_saved", 2),
            ("given up vs the end", "reward_vs_end", 3),
            ("dip at the stop", "dip", 3),
        ):
            row[column] = interval(
                source_bootstrap(wide[(metric, rule)].to_numpy(), sources, None, "equal", args.boot), digits
            )
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    """Re-decide each option of :data:`OPTIONS` on the corpus's source folds."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    forecast_arguments(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-stops", action="store_true", help="the live options alone")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    start = time.perf_counter()
    runs, unseen, table = unseen_runs(args.built, with_sealed=False)
    held = table.run_ids
    common = argparse.Namespace(
        cuts=args.cuts, draws=args.draws, seed=args.seed, boot=args.boot, check_every=0.05, option=[]
    )
    rows: list[dict[str, Any]] = [decide(name, table, runs.set_index("run_id"), common) for name in OPTIONS]
    lines = [
        "# Defaults of the live forecast, re-decided on the corpus's source folds",
        "",
        f"`{command_line('defaults.py', argv)}` ({time.perf_counter() - start:.0f} s; {machine_line()})",
        "",
        f"{len(held)} corpus runs of folds 0-4 from {runs.loc[unseen, 'source'].nunique()} sources "
        "no bundled run comes from, cut at "
        f"{' / '.join(f'{c:.0%}' for c in args.cuts)} of their steps; raw rewards, no metadata, the shipped "
        "population. Per held-out fold the setting with the lowest pooled median CRPS over "
        "persistence's on the other four folds is chosen; the gain is the plain setting's ratio minus "
        "the chosen one's over every held-out pair (above 0: the chosen one forecast better), 90% "
        "intervals from a bootstrap over sources. A gain whose interval holds 0 keeps the plain "
        "setting. The sealed fold is not looked at.",
        "",
        markdown_table(pd.DataFrame(rows)),
        "",
    ]
    if not args.no_stops:
        by_run = runs.set_index("run_id")
        stated = with_stated_range(table, by_run)
        rows = stop_rows(stops(table, common, rules=stop_rules()), by_run, common, "no range given")
        rows += stop_rows(
            stops(stated, common, stated=True, rules=stop_rules()), by_run, common, "stated range given"
        )
        lines += [
            "## The default stop rule",
            "",
            f"The same runs, each posterior rule and fixed budget run online (checked every 5% of a run; "
            f"the horizon is the run's last logged step), once as raw rewards and once, for the "
            f"{len(stated.run_ids)} runs whose source states a reward range, given that range. Per "
            "held-out fold, chosen on the other four: the posterior rule that dominates `fixed 0.5` "
            "and `fixed 0.6` on the means (more steps saved, no more reward given up against the "
            "run's end), the one saving most where several do; where none does, the fixed budget "
            f"saving the most steps at no more than {GIVEN_UP_LIMIT:.0%} of the range given up. Steps "
            "saved: a share of the run; given up: the smoothed reward at the end minus at the stop, a "
            "share of the run's range; each source weighted equally, 90% intervals from a bootstrap "
            "over sources.",
            "",
            markdown_table(pd.DataFrame(rows)),
            "",
        ]
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
