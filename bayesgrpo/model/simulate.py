"""Simulated runs from known parameters, for recovery tests and scale benchmarks.

The generative story is the model's own (``bayesgrpo.model.build``): family means, a slope on
log model size, run deviations, Student-t noise whose scale falls with samples per step. The
truth of every run is returned beside the runs table so tests can check it is recovered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesgrpo.logs.report import ReadReport
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.model.curves import CurveFamily, get_curve, reward_curve


@dataclass(frozen=True)
class SimulatedRuns:
    """A runs table and the true parameters behind it.

    Attributes
    ----------
    table : RunsTable
    truth : pandas.DataFrame
        One row per run: ``run_id``, ``family``, ``size_b``, the natural-scale curve parameters
        (``r0``, ``r1`` (level at the horizon) and ``asymptote`` in reward units, shape parameters
        in fraction of the horizon),
        ``sigma`` (reward units), and their unconstrained values (``<p>_run``).
    curve : str
    """

    table: RunsTable
    truth: pd.DataFrame
    curve: str


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


def _per_run(value: float | Sequence[float], n_runs: int) -> np.ndarray:
    """A scalar for every run, or a sequence assigned to runs in turn."""
    values = np.atleast_1d(np.asarray(value, dtype=float))
    return values[np.arange(n_runs) % values.size]


def simulate_runs(
    n_runs: int = 12,
    *,
    curve: str = "weibull",
    families: Sequence[str] = ("qwen", "llama", "gemma"),
    sizes_b: Sequence[float] = (0.5, 1.5, 3.0, 7.0, 14.0),
    n_steps: int | Sequence[int] = 200,
    observed_fraction: float | Sequence[float] = 1.0,
    noise: float | Sequence[float] = 0.03,
    family_spread: float = 0.4,
    run_spread: float = 0.25,
    size_slope_asymptote: float = 0.4,
    nu: float = 5.0,
    random_seed: int | None = None,
) -> SimulatedRuns:
    """Simulate reward curves of ``n_runs`` runs with rewards in [0, 1] (known bounds).

    Parameters
    ----------
    n_runs : int
    curve : str
        The curve family to simulate from.
    families : sequence of str
        Runs are assigned to families in turn.
    sizes_b : sequence of float
        Model sizes assigned in turn (billions of parameters).
    n_steps : int or sequence of int
        Planned steps per run (its horizon); logged every step. Sequences (here and below) are
        assigned to runs in turn.
    observed_fraction : float or sequence of float
        The fraction of each run's steps that is returned (partial observation).
    noise : float or sequence of float
        Student-t noise scale per run, in reward units.
    family_spread, run_spread : float
        Spread of family means and of runs around them, on the unconstrained scales.
    size_slope_asymptote : float
        Change of logit asymptote per unit of standardised log size.
    nu : float
        Student-t degrees of freedom of the noise.
    random_seed : int, optional

    Returns
    -------
    SimulatedRuns
    """
    rng = np.random.default_rng(random_seed)
    spec = get_curve(curve)
    steps_per_run = _per_run(n_steps, n_runs).astype(int)
    fractions = _per_run(observed_fraction, n_runs)
    noises = _per_run(noise, n_runs)
    family_of = [families[i % len(families)] for i in range(n_runs)]
    size_of = np.array([sizes_b[i % len(sizes_b)] for i in range(n_runs)], dtype=float)
    log_size = np.log(size_of)
    z_size = (log_size - log_size.mean()) / (log_size.std() if log_size.std() > 0 else 1.0)

    unconstrained = _run_parameters(
        spec, families, family_of, z_size, family_spread, run_spread, size_slope_asymptote, rng
    )
    r0 = 1 / (1 + np.exp(-unconstrained["r0"]))
    asymptote = 1 / (1 + np.exp(-unconstrained["asymptote"]))
    shapes = {name: np.exp(unconstrained[name]) for name in spec.shape_params}
    r1 = reward_curve(curve, 1.0, r0, asymptote, **shapes)

    points = _simulated_points(curve, r0, asymptote, shapes, steps_per_run, fractions, noises, nu, rng)
    runs = coerce_metadata(
        pd.DataFrame(
            {
                "run_id": [f"sim{i:03d}" for i in range(n_runs)],
                "family": family_of,
                "size_b": size_of,
                "algorithm": "GRPO",
                "task": "simulated",
                "total_steps": steps_per_run.astype(float),
                "reward_min": 0.0,
                "reward_max": 1.0,
                "source": "bayesgrpo.model.simulate",
            }
        )
    )
    truth = pd.DataFrame(
        {
            "run_id": runs["run_id"].astype(str),
            "family": family_of,
            "size_b": size_of,
            "r0": r0,
            "asymptote": asymptote,
            "r1": r1,
            **shapes,
            "sigma": noises,
            **{f"{p}_run": v for p, v in unconstrained.items() if p != "asymptote"},
            "r1_run": _logit(r1),
        }
    )
    return SimulatedRuns(
        table=RunsTable(points=points, runs=runs, report=ReadReport()), truth=truth, curve=curve
    )


def _run_parameters(
    spec: CurveFamily,
    families: Sequence[str],
    family_of: list[str],
    z_size: np.ndarray,
    family_spread: float,
    run_spread: float,
    size_slope_asymptote: float,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Each run's parameters on their unconstrained scales: centre + family effect + run effect
    (+ the size slope of the asymptote), time scales kept to a knee inside the run.
    """
    centres = {"r0": -1.5, "asymptote": 0.8}
    centres.update({name: prior.log_centre for name, prior in spec.priors.items()})
    family_effect = {f: {p: rng.normal(0, family_spread) for p in centres} for f in families}
    unconstrained: dict[str, np.ndarray] = {}
    for p, centre in centres.items():
        values = np.array([centre + family_effect[f][p] for f in family_of]) + rng.normal(
            0, run_spread, len(family_of)
        )
        if p == "asymptote":
            values = values + size_slope_asymptote * z_size
        unconstrained[p] = values
    # keep shapes in a range a run can show (a knee inside the run, not far beyond it)
    if "tau" in unconstrained:
        unconstrained["tau"] = np.clip(unconstrained["tau"], np.log(0.05), np.log(1.0))
    if "t_mid" in unconstrained:
        unconstrained["t_mid"] = np.clip(unconstrained["t_mid"], np.log(0.05), np.log(1.0))
    return unconstrained


def _simulated_points(
    curve: str,
    r0: np.ndarray,
    asymptote: np.ndarray,
    shapes: dict[str, np.ndarray],
    steps_per_run: np.ndarray,
    fractions: np.ndarray,
    noises: np.ndarray,
    nu: float,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Every run's logged points: its curve at each observed step plus Student-t noise."""
    rows = []
    for i in range(len(r0)):
        steps = np.arange(0, int(np.ceil(steps_per_run[i] * fractions[i])) + 1)
        t = steps / steps_per_run[i]
        mean = reward_curve(curve, t, r0[i], asymptote[i], **{k: v[i] for k, v in shapes.items()})
        reward = mean + noises[i] * rng.standard_t(nu, size=len(t))
        rows.append(pd.DataFrame({"run_id": f"sim{i:03d}", "step": steps, "reward": reward}))
    points = pd.concat(rows, ignore_index=True)
    points["run_id"] = points["run_id"].astype("string")
    return points
