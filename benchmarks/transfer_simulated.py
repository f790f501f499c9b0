"""Transfer to a family the population never saw, on simulated runs of known truth.

``transfer_eval.py`` leaves each model family of the bundled runs out in turn, but its zero-shot
rows rest on 24 runs (those that state a reward range) of two families: one run moves the share
of final rewards inside their 90% intervals by four points, and the runs of one family share one
draw of the family's effect. Here the same evaluation (``family_out_populations`` and
``transfer_scores``, the same methods, windows and scores) runs on populations simulated from the
model's own generative story (``bayesgrpo.model.simulate``: family effects drawn with spread
``--family-spread``, run effects, Student-t noise, every run on a stated 0..1 range), several
replicates, so that the coverage of a new family's runs is measured over many families. The
uncertainty of each share is a bootstrap over held-out families (runs of one family are not
independent).

Writes to ``benchmarks/results/`` (``--output-dir``): ``transfer_simulated.md`` and
``transfer_simulated_runs.csv`` (one row per replicate, run, window, method).

Usage::

    python benchmarks/transfer_simulated.py                      # 3 replicates of 6 families x 8 runs
    python benchmarks/transfer_simulated.py --seeds 1 --families 3 --runs-per-family 3 --draws 100
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesgrpo.model.curves import DEFAULT_CURVE
from bayesgrpo.model.sampling import DEFAULT_THIN

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import command_line, machine_line, markdown_table
from transfer_eval import cached_populations, fit_table  # the real-run evaluation's own pieces

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel

RESULTS = HERE / "results"
CACHE = HERE / "_scratch" / "transfer_simulated"
SPLIT = "leave_one_family_out"
#: The issue's window for the share of final rewards inside their 90% intervals.
TARGET = (0.85, 0.95)
BOOTSTRAP = 2000

logger = logging.getLogger("transfer_simulated")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[1, 2, 3], help="one simulated population each"
    )
    parser.add_argument("--families", type=int, default=6)
    parser.add_argument("--runs-per-family", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200, help="planned (and logged) steps per run")
    parser.add_argument(
        "--family-spread", type=float, default=0.4, help="sd of family effects (simulate_runs)"
    )
    parser.add_argument("--draws", type=int, default=500, help="kept draws (and warm-up) per chain")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--forecast-draws", type=int, default=1000)
    parser.add_argument(
        "--cache", type=Path, default=CACHE, help="folder to save / reuse the population fits"
    )
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument(
        "--name", default="transfer_simulated", help="stem of the result files (<name>.md, <name>_runs.csv)"
    )
    parser.add_argument("--quiet", action="store_true")
    return parser.parse_args(argv)


def simulated_table(seed: int, args: argparse.Namespace) -> RunsTable:
    """One simulated population: ``families x runs_per_family`` runs, sizes and noise in turn."""
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.simulate import simulate_runs

    sim = simulate_runs(
        args.families * args.runs_per_family,
        curve=DEFAULT_CURVE,
        families=tuple(f"fam{seed}_{i}" for i in range(args.families)),
        sizes_b=(0.5, 1.5, 3.0, 7.0, 14.0),
        n_steps=args.steps,
        noise=(0.03, 0.05, 0.08),
        family_spread=args.family_spread,
        random_seed=seed,
    )
    runs = sim.table.runs.copy()
    runs["run_id"] = runs["run_id"].astype(str).map(lambda r: f"s{seed}_{r}").astype("string")
    points = sim.table.points.copy()
    points["run_id"] = points["run_id"].astype(str).map(lambda r: f"s{seed}_{r}").astype("string")
    return RunsTable(points=points, runs=runs, report=sim.table.report)


def family_spreads(model: RewardModel) -> dict[str, float]:
    """Each between-family spread a population learnt: its posterior mean and 95% quantile."""
    posterior = model.idata.posterior
    out = {}
    for name in sorted(v for v in posterior.data_vars if str(v).endswith("_family_sd")):
        values = posterior[name].to_numpy().ravel()
        out[f"{name} mean"] = float(values.mean())
        out[f"{name} q95"] = float(np.quantile(values, 0.95))
    return out


def family_bootstrap(own: pd.DataFrame, rng: np.random.Generator) -> tuple[float, float]:
    """5% and 95% quantiles of the share of final rewards covered, resampling held-out families."""
    per_family = own.groupby("family")["final_cover90"].agg(["sum", "count"])
    hits, counts = per_family["sum"].to_numpy(), per_family["count"].to_numpy()
    picks = rng.integers(0, len(per_family), size=(BOOTSTRAP, len(per_family)))
    shares = hits[picks].sum(axis=1) / counts[picks].sum(axis=1)
    return float(np.quantile(shares, 0.05)), float(np.quantile(shares, 0.95))


def main(argv: list[str] | None = None) -> None:
    """Simulate, fit one population per held-out family, score transfer and write the results."""
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(name)s: %(message)s"
    )
    logging.getLogger("bayesgrpo.model").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")

    from bayesgrpo.evaluate.transfer_eval import family_out_populations, transfer_scores

    fit_kwargs = {"draws": args.draws, "tune": args.draws, "chains": args.chains, "thin": DEFAULT_THIN}
    frames, fit_frames, seconds = [], [], {"fits": 0.0, "scores": 0.0}
    for seed in args.seeds:
        table = simulated_table(seed, args)
        key = {
            "split": SPLIT,
            "seed": seed,
            "families": args.families,
            "runs_per_family": args.runs_per_family,
            "steps": args.steps,
            "family_spread": args.family_spread,
            **fit_kwargs,
        }
        populations = cached_populations(
            args.cache / f"f{args.families}x{args.runs_per_family}_seed{seed}",
            key,
            lambda table=table, seed=seed: family_out_populations(table, fit_kwargs, seed),
        )
        # one row per distinct population, in fit_table's order, with the spreads it learnt
        models = {id(m): m for m in populations.values()}.values()
        fits = fit_table(SPLIT, populations, table).assign(replicate=seed)
        fit_frames.append(pd.concat([fits, pd.DataFrame([family_spreads(m) for m in models])], axis=1))
        seconds["fits"] += float(fits["seconds"].sum())
        start = time.perf_counter()
        scores = transfer_scores(
            table, populations, split=SPLIT, n_draws=args.forecast_draws, random_seed=seed
        )
        seconds["scores"] += time.perf_counter() - start
        family = table.runs.set_index("run_id")["family"].astype(str)
        frames.append(scores.assign(replicate=seed, family=scores["run_id"].map(family)))
        logger.info("replicate %d scored", seed)

    frame = pd.concat(frames, ignore_index=True)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.output_dir / f"{args.name}_runs.csv", index=False)
    write_report(frame, pd.concat(fit_frames, ignore_index=True), seconds, args, argv)


def write_report(
    frame: pd.DataFrame, fits: pd.DataFrame, seconds: dict, args: argparse.Namespace, argv: list[str] | None
) -> None:
    """The markdown report: final-reward coverage per method, pooled and per replicate."""
    own = frame[(frame["window"] == "whole_curve") | (frame["window"] == frame["method"])]
    own = own[~own["method"].str.startswith("run_alone")]
    rng = np.random.default_rng(0)
    rows, lines = [], []
    for method, group in own.groupby("method", sort=False):
        low, high = family_bootstrap(group, rng)
        share = float(group["final_cover90"].mean())
        per_replicate = group.groupby("replicate")["final_cover90"].mean()
        rows.append(
            {
                "method": method,
                "runs": group["run_id"].nunique(),
                "families": group["family"].nunique(),
                "final_cover90": share,
                "bootstrap_5": low,
                "bootstrap_95": high,
                "per_replicate": " / ".join(f"{v:.2f}" for v in per_replicate),
                "families_all_covered": float((group.groupby("family")["final_cover90"].mean() == 1).mean()),
                "cover90_points": float(group["cover90"].mean()),
                "cover50_points": float(group["cover50"].mean()),
            }
        )
        inside = TARGET[0] <= share <= TARGET[1]
        lines.append(
            f"- {method}: {100 * share:.1f}% of {group['run_id'].nunique()} runs' final rewards inside their "
            f"90% interval ({100 * low:.0f}-{100 * high:.0f}% over resampled families), "
            f"{'inside' if inside else 'outside'} {100 * TARGET[0]:.0f}-{100 * TARGET[1]:.0f}%."
        )
    table = pd.DataFrame(rows)
    n_runs = args.families * args.runs_per_family
    text = [
        "# Transfer to a family it never saw: simulated runs of known truth",
        "",
        f"Command: `{command_line('transfer_simulated.py', argv)}`  ",
        f"Machine: {machine_line()}. Population fits {seconds['fits']:.0f} s (their own times, "
        "cached or not), "
        f"predictions and scores {seconds['scores']:.0f} s.  ",
        f"Settings: {len(args.seeds)} replicates (seeds {', '.join(map(str, args.seeds))}), each "
        f"{n_runs} simulated runs of the default curve ({args.families} families x "
        f"{args.runs_per_family} runs, sizes 0.5-14B and noise sd 0.03 / 0.05 / 0.08 in turn, "
        f"{args.steps} steps, stated range 0..1, family effects of sd {args.family_spread} on every "
        f"parameter's unconstrained scale, `bayesgrpo.model.simulate`). Leave one family out: each "
        f"family's runs predicted by a population fitted on the other {args.families - 1} families "
        f"({args.chains} chains x {args.draws} draws, thin {DEFAULT_THIN}, {args.draws} warm-up, as "
        "`transfer_eval.py` fits); the methods, windows and scores are `transfer_eval.py`'s "
        f"(`bayesgrpo.evaluate.transfer_eval`). Raw rows: `{args.name}_runs.csv`.",
        "",
        "## The final reward inside its 90% interval",
        "",
        "The final reward is the mean of a run's last 5% of logged points, its interval the 5% and 95% "
        "quantiles of the predictive draws of that mean. `bootstrap_5`/`_95`: the share's 90% range "
        "over families resampled with replacement. `families_all_covered`: the share of held-out "
        "families with every run inside. `cover90_points`/`cover50_points`: the mean share of a "
        "run's later logged points inside the 90% / 50% band, for comparison.",
        "",
        *lines,
        "",
        markdown_table(table),
        "",
        "## Population fits",
        "",
        markdown_table(
            fits.groupby("replicate")
            .agg(
                fits=("runs_fitted", "size"),
                runs_fitted=("runs_fitted", "median"),
                seconds_median=("seconds", "median"),
                divergences=("divergences", "sum"),
                max_r_hat=("max_r_hat", "max"),
                min_ess_bulk=("min_ess_bulk", "min"),
            )
            .reset_index()
        ),
        "",
        "## The between-family spreads the populations learnt",
        "",
        f"Each `*_family_sd` (the spread of family effects on one parameter's unconstrained scale; "
        f"the simulation draws every raw parameter's family effect with sd {args.family_spread}, and "
        "the model's `r1`, the level at the horizon, is a function of several of them): its posterior "
        "mean and 95% quantile, the median over each replicate's populations. A new family's effect "
        "is drawn from this spread, its uncertainty included.",
        "",
        markdown_table(
            fits.filter(regex="^replicate$|_family_sd").groupby("replicate").median().reset_index()
        ),
        "",
    ]
    (args.output_dir / f"{args.name}.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
