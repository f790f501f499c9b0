"""Where the default fit mixes worst: the parameters with the least ESS, and the strongest correlations.

Fits the 60 bundled runs with ``RewardModel().fit`` at its defaults (seed ``--seed``), then prints

- the 12 parameters with the smallest bulk ESS (and their worst r_hat), and
- the posterior mean and sd of every spread and slope, and
- the 12 strongest posterior correlations between scalar parameters and within each run's block
  of whitened coordinates (sampled scale: spreads on their log, effects and run values as drawn),
- the 10 runs whose chains disagree most: per run, the run parameter with the largest r_hat, its
  bulk ESS and each chain's mean of it (two chains apart on one run: a second mode the sampler
  does not cross, which no step size or mass matrix fixes).

The fit is cached in ``results/posterior_geometry_<seed>.nc`` (ignored by git) so the analysis
can be re-run without refitting.

Usage::

    python benchmarks/experiments/posterior_geometry.py --seed 1
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import arviz as az
import numpy as np

HERE = Path(__file__).resolve().parent
DERIVED = ("asymptote_run", "sigma_run", "nu", "log_sigma_run")


def fitted(seed: int) -> az.InferenceData:
    """The default fit of the bundled runs, from the cache or fitted now."""
    path = HERE / "results" / f"posterior_geometry_{seed}.nc"
    if path.exists():
        return az.from_netcdf(path)
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.model.reward_model import RewardModel

    model = RewardModel().fit(load_bundled(warn=False), random_seed=seed, progressbar=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.idata.to_netcdf(path)
    return model.idata


def columns(posterior: az.InferenceData) -> tuple[np.ndarray, list[str]]:
    """Draws of every sampled scalar (chains stacked) and their names."""
    values, names = [], []
    for name, array in posterior.data_vars.items():
        if name in DERIVED or name.endswith("_run") or name.endswith("_family"):
            continue
        flat = array.to_numpy().reshape(array.shape[0] * array.shape[1], -1)
        if name.endswith("_sd") or name == "nu_minus_one":
            flat, name = np.log(flat), f"log {name}"
        for j in range(flat.shape[1]):
            values.append(flat[:, j])
            names.append(f"{name}[{j}]" if flat.shape[1] > 1 else str(name))
    return np.array(values).T, names


def main() -> None:
    """Fit (or load) and print the worst-mixing parameters and the strongest correlations."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    idata = fitted(args.seed)
    posterior = idata.posterior
    names = [n for n in posterior.data_vars if not n.endswith(("_z", "_centered"))]
    bulk, r_hat = az.ess(posterior[names], method="bulk"), az.rhat(posterior[names])
    worst = sorted((float(bulk[n].min()), float(r_hat[n].max()), n) for n in names)[:12]
    print("| parameter | min bulk ESS | max r_hat |\n|---|---|---|")
    for ess, rhat, name in worst:
        print(f"| {name} | {ess:.0f} | {rhat:.3f} |")
    spreads = [n for n in posterior.data_vars if n.endswith(("_sd", "_slope"))]
    summary = az.summary(idata, var_names=spreads, kind="stats")
    print("\n| spread or slope | mean | sd |\n|---|---|---|")
    for name, row in summary.iterrows():
        print(f"| {name} | {row['mean']:+.3f} | {row['sd']:.3f} |")
    draws, labels = columns(posterior)
    keep = draws.std(axis=0) > 0
    draws, labels = draws[:, keep], [label for label, k in zip(labels, keep, strict=True) if k]
    corr = np.corrcoef(draws.T)
    block = [label.startswith("run_whitened") for label in labels]
    run_of = [
        int(label.split("[")[1].rstrip("]")) // 5 if b else -1 for label, b in zip(labels, block, strict=True)
    ]
    pairs = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            same_run = block[i] and block[j] and run_of[i] == run_of[j]
            if (not block[i] and not block[j]) or same_run:
                pairs.append((-abs(corr[i, j]), labels[i], labels[j], corr[i, j]))
    print("\n| pair | correlation |\n|---|---|")
    run_ids = list(posterior["run"].to_numpy())
    for _, a, b, value in sorted(pairs)[:12]:
        where = (
            f" (run {run_ids[int(a.split('[')[1].rstrip(']')) // 5]})" if a.startswith("run_whitened") else ""
        )
        print(f"| {a} ~ {b}{where} | {value:+.3f} |")
    run_params = [n for n in posterior.data_vars if n.endswith("_run") and n not in ("sigma_run",)]
    run_rhat, run_ess = az.rhat(posterior[run_params]), az.ess(posterior[run_params], method="bulk")
    rows = []
    for i, run_id in enumerate(run_ids):
        rhat_i, name = max((float(run_rhat[n].values[i]), n) for n in run_params)
        chains = posterior[name].isel(run=i).mean("draw").to_numpy()
        rows.append((rhat_i, run_id, name, float(run_ess[name].values[i]), chains))
    print("\n| run | parameter | r_hat | bulk ESS | chain means |\n|---|---|---|---|---|")
    for rhat_i, run_id, name, ess, chains in sorted(rows, reverse=True)[:10]:
        print(f"| {run_id} | {name} | {rhat_i:.3f} | {ess:.0f} | {' / '.join(f'{c:+.3f}' for c in chains)} |")


if __name__ == "__main__":
    main()
