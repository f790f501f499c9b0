"""How much a whitened run's points say about the slow term, and how it couples to the rest.

The numbers behind the conditioned whitening (``bayesgrpo.model.build._Whitening``): on the
1,000 simulated runs of ``scale_jax.py`` (seed 1), each whitened run's Laplace fit
(``model.precondition.run_laplace``, the one the model builds from) gives the posterior sd of the
slow term's shapes (``odds``, ``ratio``), set against the empirical prior they were fitted under,
and their correlation with the run's other parameters. A run whose shapes' sd is that of the
prior says nothing about them (non-centred suits it); a large correlation means a move of the
shape moves the other parameters with it.

Usage::

    python benchmarks/experiments/whitening_coupling.py   # writes results/whitening_coupling.md
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
TABLE = HERE / "results" / "whitening_coupling.md"
RUNS, SEED = 1000, 1


def main() -> None:
    """Fit each run's Laplace approximation and write the table."""
    warnings.simplefilter("ignore")
    from scale_jax import SIMULATE  # the population of scale_jax.py, run as it runs it

    from bayesgrpo.model.build import centering
    from bayesgrpo.model.precondition import run_laplace
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.model.structure import curve_params

    namespace: dict = {"n_runs": RUNS, "seed": SEED}
    exec(SIMULATE, namespace)  # noqa: S102 (the benchmark's own source, shared with scale_jax.py)
    sim = namespace["sim"]
    model = RewardModel()
    model.build(sim.table)
    candidates = np.flatnonzero(centering(model.data, model.centered_min_snr)["levels"])
    mean, chol, informed = run_laplace(model.data, model.curve, model.priors, candidates)
    cov = (chol @ np.swapaxes(chol, -1, -2))[informed]
    sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
    corr = cov / sd[:, :, None] / sd[:, None, :]
    names = (*curve_params(model.curve), "log_sigma")
    lines = [
        "# The slow term in the whitened runs' Laplace fits",
        "",
        f"Command: `python benchmarks/experiments/whitening_coupling.py`. {RUNS} simulated runs of "
        f"`scale_jax.py` (seed {SEED}); {int(informed.sum())} of them whitened (their levels pinned "
        "by their points). Quantiles over those runs.",
        "",
        "## Laplace posterior sd of each parameter",
        "",
        "| parameter | 10% | 50% | 90% |",
        "|---|---|---|---|",
    ]
    for j, name in enumerate(names):
        q = np.quantile(sd[:, j], [0.1, 0.5, 0.9])
        lines.append(f"| {name} | {q[0]:.3f} | {q[1]:.3f} | {q[2]:.3f} |")
    lines += [
        "",
        "The empirical prior the runs were fitted under has sd at least 0.30 for every parameter "
        "(`precondition.MIN_EMPIRICAL_SD`): a shape whose posterior sd sits there is not pinned.",
        "",
        "## |correlation| of the slow term's shapes with the other parameters",
        "",
        "| shape | with | 50% | 90% | max |",
        "|---|---|---|---|---|",
    ]
    for shape in ("odds", "ratio"):
        i = names.index(shape)
        for j, other in enumerate(names):
            if other in ("odds", "ratio"):
                continue
            a = np.abs(corr[:, i, j])
            q = np.quantile(a, [0.5, 0.9])
            lines.append(f"| {shape} | {other} | {q[0]:.2f} | {q[1]:.2f} | {a.max():.2f} |")
    lines.append("")
    TABLE.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
