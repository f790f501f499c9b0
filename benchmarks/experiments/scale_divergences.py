"""Where NUTS diverges on 1,000 simulated runs: which runs' parameters the divergent draws pull on.

``benchmarks/results/scale.md``: the default fit of 1,000 simulated runs (``scale_jax.py``'s
population) ends with 35-83 divergent kept draws and r_hat 1.02-1.06, where 100 runs end with none.
This fits the same 1,000 runs (seed 1, every iteration kept: ``thin=1``, 1,000 draws after 1,000
warm-up iterations, 2 chains) and asks, for every run and curve parameter, how far the divergent
draws sit from the rest: ``(mean over divergent draws - mean over all) / sd over all``. A run whose
parameter the divergent draws push to one end is where the sampler's step is too large. The runs
with the largest such shift are listed with what the simulation gave them (observed share, noise,
family), and the shift is summarised by observed share and noise.

Usage::

    python benchmarks/experiments/scale_divergences.py      # writes results/scale_divergences.md
    python benchmarks/experiments/scale_divergences.py OUT  # writes OUT instead
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
TABLE = HERE / "results" / "scale_divergences.md"
RUNS, SEED, DRAWS, TUNE = 1000, 1, 1000, 1000
PARAMETERS = ("r0", "r1", "tau", "k", "sigma")


def _coordinate(value: object) -> str:
    """One element's coordinates as a label: ``sim636``, or ``a, b`` for several dimensions."""
    return ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def main() -> None:
    """Fit, locate the divergent draws, and write the table."""
    warnings.simplefilter("ignore")
    from scale_jax import SIMULATE  # the population of scale_jax.py, run as it runs it

    from bayesgrpo.model.predict import run_draws
    from bayesgrpo.model.reward_model import RewardModel

    namespace: dict = {"n_runs": RUNS, "seed": SEED}
    exec(SIMULATE, namespace)  # noqa: S102 (the benchmark's own source, shared with scale_jax.py)
    sim, observed, noise = namespace["sim"], namespace["observed"], namespace["noise"]
    start = time.perf_counter()
    model = RewardModel().fit(
        sim.table, draws=DRAWS, tune=TUNE, thin=1, chains=2, random_seed=SEED, progressbar=False
    )
    wall = time.perf_counter() - start
    idata = model.idata
    diverging = idata.sample_stats["diverging"].stack(sample=("chain", "draw")).to_numpy().astype(bool)
    per_chain = idata.sample_stats["diverging"].sum("draw").to_numpy().tolist()
    draws = run_draws(idata.posterior, model.curve)
    run_ids = list(idata.posterior["run"].to_numpy())
    truth = sim.truth.set_index("run_id")
    setting = pd.DataFrame({"observed": observed, "noise": noise}, index=sim.truth["run_id"].astype(str))
    rows = []
    for name in PARAMETERS:
        values = draws[name]
        shift = (values[diverging].mean(axis=0) - values.mean(axis=0)) / values.std(axis=0)
        for run_id, value in zip(run_ids, shift, strict=True):
            rows.append({"run_id": run_id, "parameter": name, "shift": float(value)})
    shifts = pd.DataFrame(rows)
    worst = shifts.loc[shifts.groupby("run_id")["shift"].apply(lambda s: s.abs().idxmax())]
    worst = worst.join(setting, on="run_id").join(truth[["family"]], on="run_id")
    worst["abs_shift"] = worst["shift"].abs()
    top = worst.sort_values("abs_shift", ascending=False).head(15)
    by_observed = worst.groupby(pd.cut(worst["observed"], [0.19, 0.4, 0.6, 0.8, 1.0]), observed=True)[
        "abs_shift"
    ].agg(["count", "mean", "max"])
    by_noise = worst.groupby("noise")["abs_shift"].agg(["count", "mean", "max"])
    by_parameter = worst.groupby("parameter")["abs_shift"].agg(["count", "mean", "max"])
    # the population-level variables (no run dimension): their shift at the divergent draws
    stacked = idata.posterior.stack(sample=("chain", "draw"))
    population = []
    for name, variable in stacked.data_vars.items():
        if "run" in variable.dims or variable.ndim != 1:
            continue
        values = variable.to_numpy().astype(float)
        if values.std() > 0:
            shift = (values[diverging].mean() - values.mean()) / values.std()
            population.append((str(name), float(shift)))
    population.sort(key=lambda item: -abs(item[1]))
    # the slowest-mixing quantities (every element of every variable but the sampler's own
    # coordinates): what keeps r_hat up and the ESS down
    import arviz as az

    names = [n for n in idata.posterior.data_vars if not n.endswith(("_z", "_centered", "_whitened"))]
    ess = az.ess(idata.posterior[names], method="bulk")
    rhat = az.rhat(idata.posterior[names])
    slow = []
    for name in names:
        e = np.atleast_1d(ess[name].to_numpy()).ravel()
        r = np.atleast_1d(rhat[name].to_numpy()).ravel()
        labels = (
            [name]
            if ess[name].ndim == 0
            else [f"{name}[{_coordinate(v)}]" for v in ess[name].stack(i=ess[name].dims)["i"].to_numpy()]
        )
        slow += [(label, float(a), float(b)) for label, a, b in zip(labels, e, r, strict=True)]
    slow.sort(key=lambda item: item[1])
    step = idata.sample_stats["step_size"].mean("draw").to_numpy().tolist()
    steps = idata.sample_stats["n_steps"].mean("draw").to_numpy().tolist()
    lines = [
        "# Where NUTS diverges on 1,000 simulated runs",
        "",
        f"Command: `python benchmarks/experiments/scale_divergences.py`. {RUNS} runs of `scale_jax.py` "
        f"(seed {SEED}), `RewardModel().fit(draws={DRAWS}, tune={TUNE}, thin=1, chains=2)`: {wall:.0f} s, "
        f"{int(diverging.sum())} divergent draws of {diverging.size} (per chain {per_chain}), max r_hat "
        f"{model.diagnostics.max_r_hat:.3f}, min bulk ESS {model.diagnostics.min_ess_bulk:.0f}.",
        "",
        "Shift: (mean of a run's parameter over the divergent draws - its mean over all draws) / its "
        "posterior sd; per run, the parameter with the largest |shift|. With d divergent draws a "
        "run the divergences do not touch has |shift| of about 1/sqrt(d) by chance.",
        "",
        f"Adapted step size per chain: {', '.join(f'{v:.4f}' for v in step)}; leapfrog steps per "
        f"draw: {', '.join(f'{v:.0f}' for v in steps)}.",
        "",
        "## The slowest-mixing quantities",
        "",
        "| quantity | bulk ESS | r_hat |",
        "|---|---|---|",
        *[f"| {label} | {e:.0f} | {r:.3f} |" for label, e, r in slow[:12]],
        "",
        "## Population-level variables the divergent draws pull on most",
        "",
        "| variable | shift |",
        "|---|---|",
        *[f"| {name} | {shift:+.2f} |" for name, shift in population[:10]],
        "",
        "## The 15 runs the divergent draws pull on most",
        "",
        "| run | parameter | shift | observed share | noise sd | family |",
        "|---|---|---|---|---|---|",
    ]
    for r in top.itertuples():
        lines.append(
            f"| {r.run_id} | {r.parameter} | {r.shift:+.2f} | {r.observed:.2f} | {r.noise:.2f} | {r.family} |"
        )
    for title, frame in (
        ("By observed share", by_observed),
        ("By noise sd", by_noise),
        ("By the parameter pulled on most", by_parameter),
    ):
        lines += ["", f"## {title} (|shift| of each run's most pulled parameter)", ""]
        lines += ["| group | runs | mean | max |", "|---|---|---|---|"]
        for group, r in frame.iterrows():
            lines.append(f"| {group} | {int(r['count'])} | {r['mean']:.2f} | {r['max']:.2f} |")
    lines.append("")
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else TABLE
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
