"""Per-run Laplace fits that precondition the population model (numpy and SciPy's L-BFGS-B).

Each run is fitted alone, first under a weak prior centred on the population priors' means,
then (with 8 runs or more) under the spread the first fits show across runs, by the same
Student-t likelihood as the model (``bayesgrpo.model.laplace.laplace_fit``): the mode
``m`` and the Cholesky factor ``L`` of the Laplace covariance. The model then samples that run's
parameters as ``m + L z`` (``model.build``), where its posterior is close to a standard normal.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pymc_extras.prior import Prior

from bayesgrpo.model.data import ModelData
from bayesgrpo.model.laplace import GaussianRunPrior, laplace_fit
from bayesgrpo.model.structure import curve_params

#: Student-t degrees of freedom of the preconditioning fits (robust to the odd spike).
PRECONDITION_NU = 5.0
#: Runs needed before their own spread is trusted for the second (empirical-Bayes) pass.
MIN_RUNS_EMPIRICAL = 8
#: Smallest between-run spread of the second pass, on the unconstrained scales.
MIN_EMPIRICAL_SD = 0.3
#: A run is "informed" when its data shrink the sd of both its levels (start, level at the
#: horizon) to at most this share of the prior's: only those are whitened. A run its data barely pin down
#: (observed for 15% of its
#: horizon, say) is held by the population, where non-centring suits it; whitened by its own
#: wide Laplace fit it gave divergences and r_hat 1.1 in the recovery tests.
MAX_SHRINK_RATIO = 0.7


def _weak_prior(priors: Mapping[str, Prior], name: str) -> tuple[float, float]:
    """Centre and scale of a weak prior on one run parameter, from the population priors."""
    key = "sigma_mu" if name == "log_sigma" else f"{name}_mu"
    parameters = priors[key].parameters if key in priors else {}
    centre = float(parameters.get("mu", 0.0)) if np.ndim(parameters.get("mu", 0.0)) == 0 else 0.0
    scale = float(parameters.get("sigma", 1.0)) if np.ndim(parameters.get("sigma", 1.0)) == 0 else 1.0
    return centre, float(np.sqrt(scale**2 + 1.0))


def run_laplace(
    data: ModelData,
    curve: str,
    priors: Mapping[str, Prior],
    index: np.ndarray,
    *,
    noise_floor: float = 0.01,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Laplace fits of the runs ``index`` of ``data``, each on its own points.

    Parameters
    ----------
    data : ModelData
    curve : str
    priors : mapping of str to Prior
        The model's priors; their means centre the weak per-run prior.
    index : ndarray of int
        Runs to fit.
    noise_floor : float

    Returns
    -------
    mean : ndarray, shape (len(index), P)
        Modes, parameters in the order ``curve_params(curve) + ("log_sigma",)``.
    chol : ndarray, shape (len(index), P, P)
        Lower Cholesky factors of the Laplace covariances.
    informed : ndarray of bool, shape (len(index),)
        Whether the run's data pin its levels down (``MAX_SHRINK_RATIO``).
    """
    names = (*curve_params(curve), "log_sigma")
    centres, scales = zip(*(_weak_prior(priors, name) for name in names), strict=True)
    weak = GaussianRunPrior(
        curve, names, np.array(centres), np.diag(np.square(scales)), PRECONDITION_NU, noise_floor
    )

    def fit_all(prior: GaussianRunPrior) -> tuple[np.ndarray, np.ndarray]:
        means = np.empty((len(index), len(names)))
        covs = np.empty((len(index), len(names), len(names)))
        for row, run in enumerate(index):
            mask = data.mask[run]
            # L-BFGS-B, as the population fit's samplers were tuned and measured with (the
            # live path's Newton optimiser reaches other local modes on a few runs)
            means[row], covs[row] = laplace_fit(
                prior, data.t[run, mask], data.y[run, mask], data.noise_scale[run, mask], optimizer="lbfgsb"
            )
        return means, covs

    means, covs = fit_all(weak)
    prior_sd = np.array(scales)
    if len(index) >= MIN_RUNS_EMPIRICAL:
        # second pass under the spread the runs themselves show (empirical Bayes): a run its
        # data barely pin down is then whitened where the population will hold it, not across
        # the whole weak prior
        centre = np.median(means, axis=0)
        spread = 1.4826 * np.median(np.abs(means - centre), axis=0)
        spread = np.clip(spread, MIN_EMPIRICAL_SD, np.array(scales))
        empirical = GaussianRunPrior(curve, names, centre, np.diag(spread**2), PRECONDITION_NU, noise_floor)
        means, covs = fit_all(empirical)
        prior_sd = spread
    posterior_sd = np.sqrt(np.diagonal(covs, axis1=1, axis2=2))
    # the levels (start, level at the horizon) decide: a run observed to near its horizon pins
    # them down even when noise leaves its rate loose, and such runs sample well whitened
    informed = (posterior_sd[:, :2] / prior_sd[:2]).max(axis=1) <= MAX_SHRINK_RATIO
    return means, np.linalg.cholesky(covs), informed
