"""Sampler geometry of the population model on the bundled runs (issue 3 experiments).

One nutpie fit (2 chains, 300+300 draws) storing the unconstrained draws and mass matrix:
prints wall time, mean tree depth, leapfrog steps per draw, step size, max r_hat and min ESS,
and pickles the InferenceData to /tmp/geom_<curve><TAG>.pkl for correlation analysis.

    python benchmarks/experiments/geometry.py weibull
    NKW='{"use_grad_based_mass_matrix": false}' TAG=nograd python benchmarks/experiments/geometry.py weibull
"""

import sys
import time
import warnings

warnings.simplefilter("ignore")
import nutpie

from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel

t = load_bundled(warn=False)
curve = sys.argv[1] if len(sys.argv) > 1 else "weibull"
model = RewardModel(curve=curve).build(t)
c = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
t0 = time.time()
import json
import os

kw = json.loads(os.environ.get("NKW", "{}"))
tune = int(os.environ.get("TUNE", "300"))
idata = nutpie.sample(
    c,
    draws=300,
    tune=tune,
    chains=2,
    cores=2,
    seed=1,
    progress_bar=False,
    store_unconstrained=True,
    store_mass_matrix=True,
    target_accept=0.9,
    **kw,
)
print("wall", time.time() - t0)
ss = idata.sample_stats
print("depth", float(ss.depth.mean()), "steps", float(ss.n_steps.mean()), "step", float(ss.step_size.mean()))
import arviz as az

sm = az.summary(idata, var_names=["~_z", "~_centered"], filter_vars="like")
print("max rhat", sm.r_hat.max(), "min ess", sm.ess_bulk.min())
import pickle

pickle.dump(idata, open(f"/tmp/geom_{curve}{os.environ.get('TAG', '')}.pkl", "wb"))
