import sys
import time
import warnings

warnings.simplefilter("ignore")
import bayesgrpo.model.build as b
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.sampling import sample_model

variant = sys.argv[1]
if variant == "nofamily":
    b.MIN_GROUP_LEVELS = 100
t = load_bundled(warn=False)
ids = [r for r in t.run_ids if not r.startswith("verl")]
sub = t.select(ids)
kw = {}
if variant == "exp":
    kw["curve"] = "exp"
if variant == "mp20":
    kw["max_points"] = 20
m = RewardModel(**kw)
model = m.build(sub)
t0 = time.time()
idata, d = sample_model(model, draws=300, tune=300, chains=2, random_seed=1, progressbar=False)
ss = idata.sample_stats
print(
    variant,
    round(time.time() - t0, 1),
    "rhat",
    round(d.max_r_hat, 3),
    "ess",
    round(d.min_ess_bulk, 1),
    "div",
    d.divergences,
    "depth",
    float(ss.depth.mean()),
    "steps",
    float(ss.n_steps.mean()),
    flush=True,
)
