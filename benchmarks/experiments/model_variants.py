import sys
import time
import warnings

warnings.simplefilter("ignore")
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.sampling import sample_model

variant = sys.argv[1]
t = load_bundled(warn=False)
kw = {}
skw = dict(draws=500, tune=500)
if variant == "mp25":
    kw["max_points"] = 25
if variant == "tune1000":
    skw = dict(draws=500, tune=1000)
if variant == "ta95":
    skw["target_accept"] = 0.95
if variant == "exp":
    kw["curve"] = "exp"
model = RewardModel(**kw).build(t)
t0 = time.time()
idata, d = sample_model(model, chains=2, random_seed=1, progressbar=False, **skw)
ss = idata.sample_stats
print(
    variant,
    round(time.time() - t0, 1),
    "rhat",
    round(d.max_r_hat, 3),
    "ess",
    round(d.min_ess_bulk, 1),
    "ess/s",
    round(d.min_ess_bulk / (time.time() - t0), 3),
    "div",
    d.divergences,
    "depth",
    round(float(ss.depth.mean()), 2),
    "steps",
    round(float(ss.n_steps.mean())),
    flush=True,
)
