"""Per-run Laplace fits that precondition the population model (pure numpy and scipy).

Each clearly moving run is fitted alone, under a weak prior centred on the population priors'
means, by the same Student-t likelihood as the model (``bayesgrpo.live.laplace_fit``): the mode
``m`` and the Cholesky factor ``L`` of the Laplace covariance. The model then samples that run's
parameters as ``m + L z`` (``model.build``), where its posterior is close to a standard normal.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pymc_extras.prior import Prior

from bayesgrpo.model.data import ModelData
from bayesgrpo.model.priors import curve_params

#: Student-t degrees of freedom of the preconditioning fits (robust to the odd spike).
PRECONDITION_NU = 5.0


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
) -> tuple[np.ndarray, np.ndarray]:
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
    """
    from bayesgrpo.live import GaussianRunPrior, laplace_fit

    names = (*curve_params(curve), "log_sigma")
    centres, scales = zip(*(_weak_prior(priors, name) for name in names))
    prior = GaussianRunPrior(curve, names, np.array(centres), np.diag(np.square(scales)), PRECONDITION_NU, noise_floor)
    means = np.empty((len(index), len(names)))
    chols = np.empty((len(index), len(names), len(names)))
    for row, run in enumerate(index):
        mask = data.mask[run]
        mode, cov = laplace_fit(prior, data.t[run, mask], data.y[run, mask], data.noise_scale[run, mask])
        means[row] = mode
        chols[row] = np.linalg.cholesky(cov)
    return means, chols
