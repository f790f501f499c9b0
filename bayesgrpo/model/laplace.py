"""One run conditioned on a Gaussian prior of its curve parameters: Laplace fit, importance sampling.

The prior (:class:`GaussianRunPrior`) is a Gaussian on the run's unconstrained parameters (logit
start, logit level at the horizon, log shape, log noise), for example a fitted population's
prediction for a new run of a family and size. It is combined with the run's own points by the
model's Student-t likelihood (:func:`condition_run`):

1. the posterior mode by Newton's method and the Hessian there by finite differences
   (:func:`laplace_fit`, :func:`bayesgrpo.model.numerics.newton_minimize`);
2. importance sampling from a defensive mixture: 85% a multivariate t (5 degrees of freedom)
   around the mode with the Laplace covariance, 15% the Gaussian prior itself, so a posterior
   wider or more skewed than the Laplace fit is still covered;
3. while the weights are poor (Pareto k above 0.5), up to three more rounds with the proposal
   moved to the weighted draws' mean and covariance (population Monte Carlo);
4. Pareto-smoothed weights (PSIS, Vehtari et al. 2024, ``model.psis``: ArviZ's, in numpy); the
   Pareto k and the effective sample size are returned;
5. when the weights are unreliable (Pareto k above 0.7) and one of the draws is far more
   probable than the mode found (the optimiser, started at the prior's mean, stopped at a local
   mode: a run cut mid-rise can be read as rising on or as levelling off), the fit starts again
   from that draw and steps 1-4 are repeated from the mode it reaches;
6. when the weights stay unreliable (the run's points disagree with what the population expects
   of it, so no proposal built from the prior and the mode covers the posterior), the draws come
   from MCMC on the same posterior instead: emcee's affine-invariant ensemble (Goodman & Weare
   2010), vectorised over walkers started around the mode (:func:`ensemble_draws`).
   :attr:`RunPosterior.method` says which path gave the draws.

:func:`condition_start` conditions the prior exactly on a measured start instead. Everything is
numpy, vectorised over draws; nothing is compiled. The population fit uses the same Laplace fit to
precondition its sampler (:mod:`bayesgrpo.model.precondition`); the live forecaster
(:mod:`bayesgrpo.questions.live`) orchestrates it for runs in progress.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from bayesgrpo.errors import BayesGRPOError, LiveUpdateWarning
from bayesgrpo.model.curves import asymptote_from_levels, get_curve, reward_curve_by_levels
from bayesgrpo.model.numerics import expit, gammaln, logit, logsumexp, newton_minimize
from bayesgrpo.model.psis import psis_log_weights
from bayesgrpo.model.structure import curve_params

logger = logging.getLogger(__name__)

#: Share of importance draws taken from the Gaussian prior itself (defensive mixture).
PRIOR_SHARE = 0.15
#: Degrees of freedom of the multivariate t around the Laplace mode.
PROPOSAL_DF = 5.0
#: Pareto k above which importance-sampling draws are not trusted (Vehtari et al. 2024).
PARETO_K_LIMIT = 0.7
#: Pareto k at which the proposal is good enough to stop adapting it.
GOOD_PARETO_K = 0.5
#: Importance-sampling rounds at most (the first from the Laplace fit, then adapted).
ADAPT_ROUNDS = 4
#: How much higher (in log posterior) a draw and the mode reached from it must be than the first
#: mode for :func:`condition_run` to start again from them when the importance weights fail.
RESTART_MARGIN = 1.0
#: The fallback's ensemble: walkers, steps discarded while it finds the posterior, steps kept.
#: 300 + 450 steps answer as 400 + 600 did against a 10,000-step ensemble of the same run (12 bundled
#: runs: parameter means 0.17 reference sd off in the median run either way, final-reward quantiles
#: 0.25 against 0.20), in three quarters of the time (1.7 s against 2.2 s median on the machine of
#: 2026-12-02; the live-path issue asks 2 s): ``benchmarks/experiments/README.md: live_fallback_budget``.
ENSEMBLE_WALKERS = 40
ENSEMBLE_BURN = 300
ENSEMBLE_STEPS = 450
#: Effective draws below which even the fallback's answer is flagged as unreliable.
ENSEMBLE_MIN_ESS = 100.0
#: How a run's posterior draws were made (:attr:`RunPosterior.method`).
IMPORTANCE = "importance"
ENSEMBLE = "ensemble_mcmc"
PRIOR_ONLY = "prior"


@dataclass(frozen=True)
class GaussianRunPrior:
    """A new run's parameters before its data: a Gaussian on the model's unconstrained scales
    (or, with a finite ``df``, a multivariate t with ``cov`` as its shape matrix).

    Attributes
    ----------
    curve : str
    names : tuple of str
        Curve parameters (``r0``, ``r1``, shape parameters) then ``log_sigma``.
    mean : ndarray, shape (P,)
    cov : ndarray, shape (P, P)
    nu : float
        Student-t degrees of freedom of the noise (posterior median of the population).
    noise_floor : float
        As in the model: the noise scale is sqrt(exp(2 log_sigma) + floor^2).
    df : float
        Degrees of freedom of the prior itself: ``inf`` (default) is the Gaussian; a finite
        value gives the prior heavier tails, so that a run whose points disagree with what the
        population expects of it is followed by its points more than pulled back to the
        population. The live forecast keeps the Gaussian (a t prior of 3 degrees of freedom did
        not cover the plateau case of ``tests/interfaces/test_plateau_case.py`` either).
    """

    curve: str
    names: tuple[str, ...]
    mean: np.ndarray
    cov: np.ndarray
    nu: float
    noise_floor: float = 0.01
    df: float = np.inf

    @classmethod
    def from_draws(
        cls, draws: Mapping[str, np.ndarray], curve: str, noise_floor: float = 0.01
    ) -> GaussianRunPrior:
        """Moment-match draws of a new run's parameters (``model.predict.new_run_draws``)."""
        names = (*curve_params(curve), "log_sigma")
        matrix = np.column_stack([np.asarray(draws[name], dtype=float) for name in names])
        if not np.isfinite(matrix).all():
            raise BayesGRPOError("population draws of the new run hold non-finite values; is the fit sound?")
        cov = np.cov(matrix, rowvar=False) + 1e-9 * np.eye(len(names))
        return cls(curve, names, matrix.mean(axis=0), cov, float(np.median(draws["nu"])), float(noise_floor))

    @property
    def dim(self) -> int:
        """Number of parameters of the run."""
        return len(self.names)

    @cached_property
    def _chol(self) -> np.ndarray:
        return np.linalg.cholesky(self.cov)

    @cached_property
    def multivariate_t(self) -> MultivariateT:
        """The prior as a :class:`MultivariateT` (``df`` inf: the Gaussian), factored once for
        every draw and density asked of it.
        """
        return MultivariateT(self.mean, self.cov, self.df)

    def log_density(self, theta: np.ndarray) -> np.ndarray:
        """Log density (Gaussian, or multivariate t when ``df`` is finite) of a batch of
        parameter vectors, shape (B,).
        """
        if not np.isinf(self.df):
            return self.multivariate_t.log_density(np.atleast_2d(theta))
        chol = self._chol
        centred = np.linalg.solve(chol, (np.atleast_2d(theta) - self.mean).T)
        return (
            -0.5 * (centred * centred).sum(axis=0)
            - np.log(np.diag(chol)).sum()
            - 0.5 * self.dim * np.log(2 * np.pi)
        )

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws of the prior, shape (n, P)."""
        if np.isinf(self.df):
            return rng.multivariate_normal(self.mean, self.cov, size=n)
        return self.multivariate_t.draws(n, rng)


def log_likelihood(
    theta: np.ndarray, prior: GaussianRunPrior, t: np.ndarray, y: np.ndarray, noise_scale: np.ndarray
) -> np.ndarray:
    """Student-t log likelihood of one run's points for a batch of parameter vectors.

    Parameters
    ----------
    theta : ndarray, shape (B, P)
        Unconstrained parameters in the order of ``prior.names``.
    prior : GaussianRunPrior
    t, y, noise_scale : ndarray, shape (N,)
        Normalised progress, normalised reward, relative noise scale of each (binned) point.

    Returns
    -------
    ndarray, shape (B,)
    """
    theta = np.atleast_2d(theta)
    if len(t) == 0:
        return np.zeros(theta.shape[0])
    family = get_curve(prior.curve)
    r0 = expit(theta[:, 0])[:, None]
    r1 = expit(theta[:, 1])[:, None]
    shape = {name: np.exp(theta[:, 2 + i])[:, None] for i, name in enumerate(family.shape_params)}
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mean = reward_curve_by_levels(prior.curve, t[None, :], r0, r1, **shape)
        # a point's scale is the run's sigma times the point's own (binned) scale: their logs and
        # inverses are taken per draw and per point, not per (draw, point), the costly shape
        sigma = np.sqrt(np.exp(2.0 * theta[:, -1]) + prior.noise_floor**2)
        nu = prior.nu
        z = (y[None, :] - mean) * (1.0 / sigma)[:, None] * (1.0 / noise_scale)[None, :]
        constant = gammaln(0.5 * (nu + 1.0)) - gammaln(0.5 * nu) - 0.5 * np.log(nu * np.pi)
        log_scales = len(t) * np.log(sigma) + np.log(noise_scale).sum()
        z *= z
        z /= nu
        logp = len(t) * constant - log_scales - 0.5 * (nu + 1.0) * np.log1p(z, out=z).sum(axis=1)
    return np.where(np.isfinite(logp), logp, -np.inf)


def log_posterior(
    theta: np.ndarray,
    prior: GaussianRunPrior,
    t: np.ndarray,
    y: np.ndarray,
    noise_scale: np.ndarray,
    likelihood_weight: float = 1.0,
) -> np.ndarray:
    """Gaussian prior plus the Student-t likelihood times ``likelihood_weight``, shape (B,).

    See :func:`log_likelihood`; the weight tempers the likelihood (:func:`condition_run`).
    """
    theta = np.atleast_2d(theta)
    return prior.log_density(theta) + likelihood_weight * log_likelihood(theta, prior, t, y, noise_scale)


def _hessian(fun: Any, x: np.ndarray, step: float = 1e-3) -> np.ndarray:
    """Central finite-difference Hessian of a batched scalar function, in one batched call."""
    p = len(x)
    eye = np.eye(p) * step
    points = [x]
    pairs = []
    for i in range(p):
        for j in range(i, p):
            pairs.append((i, j))
            points += [x + eye[i] + eye[j], x + eye[i] - eye[j], x - eye[i] + eye[j], x - eye[i] - eye[j]]
    values = fun(np.array(points))
    hessian = np.empty((p, p))
    for k, (i, j) in enumerate(pairs):
        a, b, c, d = values[1 + 4 * k : 5 + 4 * k]
        hessian[i, j] = hessian[j, i] = (a - b - c + d) / (4 * step * step)
    return hessian


#: The longest step the Laplace fit's Newton optimiser takes, in the unconstrained parameters.
#: A run's posterior can have more than one mode (a run cut mid-rise read as rising on or as
#: levelling off); short steps keep the search in the basin it starts in, as L-BFGS-B's cautious
#: first steps did. Measured against L-BFGS-B on every live update of the bundled runs
#: (``benchmarks/experiments/README.md: live_newton_mode``): with steps up to 4 the two optimisers
#: reached different modes in 13 of 252 updates (once 12.7 nats apart), with 0.25 in 4 (0.16-1.3
#: nats apart, either way), each answer then moving less than the update's own seed-to-seed noise.
MODE_STEP = 0.25


def laplace_fit(
    prior: GaussianRunPrior,
    t: np.ndarray,
    y: np.ndarray,
    noise_scale: np.ndarray,
    likelihood_weight: float = 1.0,
    start: np.ndarray | None = None,
    optimizer: str = "newton",
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mode and the covariance of the Laplace approximation there (the likelihood
    tempered by ``likelihood_weight``, see :func:`condition_run`), the optimiser started at
    ``start`` (default the prior's mean).

    ``optimizer``: ``"newton"`` (default; :func:`bayesgrpo.model.numerics.newton_minimize`, numpy
    only, what the live path uses) or ``"lbfgsb"`` (SciPy's L-BFGS-B on a central-difference
    gradient, imported here: what the population fit's preconditioning uses, as it was measured).
    """
    if optimizer not in ("newton", "lbfgsb"):
        raise BayesGRPOError(f"optimizer must be 'newton' or 'lbfgsb'; got {optimizer!r}")

    def negative_log_posterior(points: np.ndarray) -> np.ndarray:
        # a step can try a point so far out that exp() of a log-scale parameter underflows
        # (measured: log tau near -745 on a held-out bundled run, tau = 0, which the curve
        # refuses): such a batch is refused like a non-finite value, and the search steps back
        try:
            return -log_posterior(points, prior, t, y, noise_scale, likelihood_weight)
        except BayesGRPOError:
            return np.full(len(points), np.inf)

    x0 = prior.mean if start is None else np.asarray(start, dtype=float)
    if optimizer == "newton":
        mode = newton_minimize(negative_log_posterior, x0, max_step=MODE_STEP).x
    else:
        mode = _lbfgsb_mode(negative_log_posterior, x0)
    hessian = -_hessian(lambda z: log_posterior(z, prior, t, y, noise_scale, likelihood_weight), mode)
    eigenvalues, vectors = np.linalg.eigh(0.5 * (hessian + hessian.T))
    # directions the data leave flat (or a saddle left by the optimiser) keep the prior's scale
    prior_precision_floor = 1.0 / np.linalg.eigvalsh(prior.cov).max()
    eigenvalues = np.maximum(eigenvalues, prior_precision_floor)
    cov = (vectors / eigenvalues) @ vectors.T
    return mode, 0.5 * (cov + cov.T)


def _lbfgsb_mode(negative_log_posterior: Any, x0: np.ndarray) -> np.ndarray:
    """SciPy's L-BFGS-B from ``x0`` on a central-difference gradient (a non-finite value refused)."""
    from scipy import optimize  # the population fit has SciPy loaded already (PyMC); the live path never does

    step = 1e-5
    offsets = np.vstack([np.zeros(len(x0)), step * np.eye(len(x0)), -step * np.eye(len(x0))])

    def value_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        values = negative_log_posterior(x[None, :] + offsets)
        if not np.isfinite(values).all():
            return 1e300, np.zeros(len(x0))
        return float(values[0]), (values[1 : 1 + len(x0)] - values[1 + len(x0) :]) / (2 * step)

    return np.asarray(optimize.minimize(value_and_gradient, x0, jac=True, method="L-BFGS-B").x)


class MultivariateT:
    """A multivariate t with shape matrix ``cov`` (``df`` = inf: a Gaussian): draws and log density.

    In numpy rather than ``scipy.stats`` (whose import costs a fresh process half a second before
    its first live answer); ``tests/model/test_laplace.py`` checks it against scipy's. The shape
    matrix is factored once, from its eigendecomposition (a flat direction keeps a tiny, positive
    floor), for both the draws and the density.
    """

    def __init__(self, location: np.ndarray, cov: np.ndarray, df: float) -> None:
        eigenvalues, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
        eigenvalues = np.maximum(eigenvalues, 1e-12 * max(float(eigenvalues.max()), 1e-300))
        self.location, self.df = np.asarray(location, dtype=float), float(df)
        self._factor = vectors * np.sqrt(eigenvalues)  # factor @ factor.T = cov
        self._whitening = vectors / np.sqrt(eigenvalues)
        self._log_det = float(np.log(eigenvalues).sum())

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws, shape (n, P)."""
        z = rng.standard_normal((n, len(self.location))) @ self._factor.T
        if np.isinf(self.df):
            return self.location + z
        return self.location + z / np.sqrt(rng.chisquare(self.df, n) / self.df)[:, None]

    def log_density(self, theta: np.ndarray) -> np.ndarray:
        """Log density at each row of ``theta``."""
        squared = np.sum(((theta - self.location) @ self._whitening) ** 2, axis=-1)
        dim, df = len(self.location), self.df
        if np.isinf(df):
            return -0.5 * (squared + self._log_det + dim * np.log(2 * np.pi))
        return (
            gammaln(0.5 * (df + dim))
            - gammaln(0.5 * df)
            - 0.5 * dim * np.log(df * np.pi)
            - 0.5 * self._log_det
            - 0.5 * (df + dim) * np.log1p(squared / df)
        )


def _importance_draws(
    prior: GaussianRunPrior,
    t: np.ndarray,
    y: np.ndarray,
    noise_scale: np.ndarray,
    location: np.ndarray,
    cov: np.ndarray,
    n_draws: int,
    rng: np.random.Generator,
    likelihood_weight: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Draws from the defensive mixture proposal and their log importance weights."""
    n_prior = round(PRIOR_SHARE * n_draws)
    around_mode = MultivariateT(location, cov, PROPOSAL_DF)
    from_prior = prior.multivariate_t
    theta = np.vstack([around_mode.draws(n_draws - n_prior, rng), from_prior.draws(n_prior, rng)])
    log_q = np.logaddexp(
        np.log1p(-PRIOR_SHARE) + around_mode.log_density(theta),
        np.log(PRIOR_SHARE) + from_prior.log_density(theta),
    )
    log_w = log_posterior(theta, prior, t, y, noise_scale, likelihood_weight) - log_q
    return theta, np.where(np.isfinite(log_w), log_w, -np.inf)


@dataclass(frozen=True)
class RunPosterior:
    """Draws of one run's parameters after its points, with how far they can be trusted.

    Attributes
    ----------
    prior : GaussianRunPrior
    theta : ndarray, shape (S, P)
        Equally weighted draws (resampled) on the unconstrained scales of ``prior.names``.
    mode : ndarray, shape (P,)
    pareto_k : float
        PSIS diagnostic of the importance weights; above 0.7 the draws are unreliable.
    ess : float
        Effective sample size of the importance weights.
    n_points : int
        Points (bins) conditioned on.
    seconds : float
    method : {"importance", "ensemble_mcmc", "prior"}
        The path that gave the draws: importance sampling (``pareto_k`` <= 0.7), the MCMC
        fallback (the importance weights were unreliable: ``pareto_k`` is theirs, ``ess`` the
        chain's), or the prior alone (no points).
    """

    prior: GaussianRunPrior
    theta: np.ndarray
    mode: np.ndarray
    pareto_k: float
    ess: float
    n_points: int
    seconds: float
    method: str = IMPORTANCE

    def natural(self) -> dict[str, np.ndarray]:
        """Draws on natural scales: ``r0``, ``r1``, ``asymptote`` (normalised reward), shape
        parameters, ``sigma``; each shape (S,).
        """
        family = get_curve(self.prior.curve)
        out = {"r0": expit(self.theta[:, 0]), "r1": expit(self.theta[:, 1])}
        for i, name in enumerate(family.shape_params):
            out[name] = np.exp(self.theta[:, 2 + i])
        shape = {name: out[name] for name in family.shape_params}
        out["asymptote"] = asymptote_from_levels(self.prior.curve, out["r0"], out["r1"], **shape)
        out["sigma"] = np.sqrt(np.exp(2.0 * self.theta[:, -1]) + self.prior.noise_floor**2)
        return out


@functools.cache
def _blas_controller() -> ThreadpoolController:
    """The loaded thread pools, inspected once per process (a fresh inspection costs milliseconds)."""
    return ThreadpoolController()


def single_threaded_blas() -> Any:
    """A context in which BLAS runs on one thread.

    A live update is hundreds of tiny linear-algebra calls: BLAS threads only wait on each other,
    and inside a training process they compete with the framework's threads.
    """
    return _blas_controller().limit(limits=1, user_api="blas")


def check_likelihood_weight(weight: object) -> float:
    """``weight`` as a float, when it is a tempering weight of the likelihood: in (0, 1].

    Raises
    ------
    BayesGRPOError
        For anything else (not a number, NaN, 0 or below, above 1).
    """
    try:
        value = float(weight)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = float("nan")
    if not 0.0 < value <= 1.0:
        raise BayesGRPOError(f"likelihood_weight must be in (0, 1]; got {weight!r}")
    return value


def condition_run(
    prior: GaussianRunPrior,
    t: np.ndarray,
    y: np.ndarray,
    noise_scale: np.ndarray | None = None,
    *,
    n_draws: int = 2000,
    random_seed: int | None = None,
    pareto_k_limit: float = PARETO_K_LIMIT,
    likelihood_weight: float = 1.0,
    mcmc_fallback: bool = True,
) -> RunPosterior:
    """Condition a run's Gaussian population prior on its (normalised) points.

    Parameters
    ----------
    prior : GaussianRunPrior
    t, y : array-like, shape (N,)
        Normalised progress and reward of the run's points (N may be 0: the prior's draws).
    noise_scale : array-like, shape (N,), optional
        Relative noise of each point (1/sqrt(points in a bin)); default 1.
    n_draws : int
        Importance draws (and resampled draws returned).
    random_seed : int, optional
    pareto_k_limit : float
        Above this Pareto k the importance draws are replaced by the MCMC fallback
        (:func:`ensemble_draws`; default 0.7, Vehtari et al. 2024).
    likelihood_weight : float
        The log likelihood's weight, in (0, 1]: 1 counts every point as an independent
        observation of the curve; below 1 tempers it (a power likelihood: Miller and Dunson
        2019, Grunwald 2012), for points that wander about any curve of the family together and
        so say less about its parameters than their number (:class:`bayesgrpo.questions.live.
        LiveForecaster` sets it).
    mcmc_fallback : bool
        Run the MCMC fallback when the importance weights are unreliable (default). False returns
        the importance draws with their ``pareto_k`` for the caller to judge, without the
        fallback's second or two: the Optuna pruner, which acts on no unreliable answer, passes it.

    Returns
    -------
    RunPosterior
        ``method`` names the path that gave the draws.

    Notes
    -----
    The work is a few hundred tiny (5 x 5) linear-algebra calls: BLAS is held to one thread
    while it runs: with its default threads, on a busy 2-core machine, each optimiser iteration
    waited on thread hand-offs (``benchmarks/live_update.py`` measures the query as a whole).
    """
    with single_threaded_blas():
        return _condition_run(
            prior,
            t,
            y,
            noise_scale,
            n_draws=n_draws,
            random_seed=random_seed,
            pareto_k_limit=pareto_k_limit,
            likelihood_weight=likelihood_weight,
            mcmc_fallback=mcmc_fallback,
        )


def _condition_run(
    prior: GaussianRunPrior,
    t: np.ndarray,
    y: np.ndarray,
    noise_scale: np.ndarray | None,
    *,
    n_draws: int,
    random_seed: int | None,
    pareto_k_limit: float = PARETO_K_LIMIT,
    likelihood_weight: float = 1.0,
    mcmc_fallback: bool = True,
) -> RunPosterior:
    """:func:`condition_run` without the BLAS thread limit."""
    start = time.perf_counter()
    likelihood_weight = check_likelihood_weight(likelihood_weight)
    t = np.asarray(t, dtype=float).reshape(-1)
    y = np.asarray(y, dtype=float).reshape(-1)
    noise_scale = np.ones_like(t) if noise_scale is None else np.asarray(noise_scale, dtype=float).reshape(-1)
    if not (len(t) == len(y) == len(noise_scale)):
        raise BayesGRPOError(f"t, y and noise_scale differ in length: {len(t)}, {len(y)}, {len(noise_scale)}")
    finite = np.isfinite(t) & np.isfinite(y) & np.isfinite(noise_scale)
    if not finite.all():
        raise BayesGRPOError(
            f"{int((~finite).sum())} of {len(t)} points are not finite; read logs with load_runs, which "
            "reports them"
        )
    rng = np.random.default_rng(random_seed)
    if len(t) == 0:
        theta = prior.draws(n_draws, rng)
        return RunPosterior(
            prior, theta, prior.mean.copy(), 0.0, float(n_draws), 0, time.perf_counter() - start, PRIOR_ONLY
        )

    mode, cov = laplace_fit(prior, t, y, noise_scale, likelihood_weight)
    data = (t, y, noise_scale)
    theta, weights, pareto_k = _adapted_importance(
        prior, data, (mode, cov), n_draws=n_draws, rng=rng, likelihood_weight=likelihood_weight
    )
    if pareto_k > pareto_k_limit:
        # the optimiser, started at the prior's mean, can stop at a local mode of a posterior
        # with two (a rise still to come, or one already over); a draw far more probable than
        # that mode is where the weights failed: start again from the most probable draw
        restart = _restarted_mode(prior, data, theta, mode, likelihood_weight)
        if restart is not None:
            mode, cov = restart
            theta, weights, pareto_k = _adapted_importance(
                prior, data, (mode, cov), n_draws=n_draws, rng=rng, likelihood_weight=likelihood_weight
            )
    ess = float(1.0 / np.sum(weights**2))
    if pareto_k > pareto_k_limit and mcmc_fallback:
        # the importance weights cannot be trusted: MCMC on the same posterior instead
        theta_mcmc, chain_ess = ensemble_draws(
            prior, t, y, noise_scale, mode, cov, n_draws, rng, likelihood_weight
        )
        logger.info(
            "live update: importance weights unreliable (Pareto k %.2f > %.2f); %d draws from the "
            "ensemble MCMC fallback (ESS %.0f)",
            pareto_k,
            pareto_k_limit,
            n_draws,
            chain_ess,
        )
        if chain_ess < ENSEMBLE_MIN_ESS:
            warnings.warn(
                f"live update: importance weights unreliable (Pareto k {pareto_k:.2f}) and the MCMC "
                f"fallback mixed poorly (ESS {chain_ess:.0f}); the run's data disagree with what the "
                "population expects of it (refit the population with this run for a trustworthy answer)",
                LiveUpdateWarning,
                stacklevel=3,
            )
        return RunPosterior(
            prior, theta_mcmc, mode, pareto_k, chain_ess, len(t), time.perf_counter() - start, ENSEMBLE
        )
    # systematic resampling to equally weighted draws
    positions = (rng.random() + np.arange(n_draws)) / n_draws
    index = np.minimum(np.searchsorted(np.cumsum(weights), positions), n_draws - 1)
    return RunPosterior(
        prior, theta[index], mode, pareto_k, ess, len(t), time.perf_counter() - start, IMPORTANCE
    )


def _adapted_importance(
    prior: GaussianRunPrior,
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
    laplace: tuple[np.ndarray, np.ndarray],
    *,
    n_draws: int,
    rng: np.random.Generator,
    likelihood_weight: float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Importance draws around ``mode``, the proposal adapted up to :data:`ADAPT_ROUNDS` times.

    ``data`` is the run's ``(t, y, noise_scale)``, ``laplace`` the ``(mode, cov)`` of
    :func:`laplace_fit`.

    Returns
    -------
    theta : ndarray, shape (n_draws, P)
    weights : ndarray, shape (n_draws,)
        Normalised, Pareto-smoothed importance weights.
    pareto_k : float
    """
    t, y, noise_scale = data
    location, cov = laplace
    for _ in range(ADAPT_ROUNDS):
        theta, log_w = _importance_draws(
            prior, t, y, noise_scale, location, cov, n_draws, rng, likelihood_weight
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            smoothed, pareto_k = psis_log_weights(log_w - log_w.max())
        weights = np.exp(smoothed - logsumexp(smoothed))
        if pareto_k <= GOOD_PARETO_K:
            break
        # adapt the proposal to the weighted draws (population Monte Carlo): a curved or skewed
        # posterior is covered by its moments where the Laplace fit at the mode misses it
        location = weights @ theta
        centred = theta - location
        cov = (centred * weights[:, None]).T @ centred + 1e-9 * np.eye(prior.dim)
    return theta, weights, float(pareto_k)


def _restarted_mode(
    prior: GaussianRunPrior,
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
    theta: np.ndarray,
    mode: np.ndarray,
    likelihood_weight: float,
) -> tuple[np.ndarray, np.ndarray] | None:
    """A better mode than ``mode``, found from the most probable of ``theta``; None if none is.

    Returns the Laplace fit on ``data`` (the run's ``(t, y, noise_scale)``) started at the draw
    of ``theta`` with the highest log posterior when that draw, and the mode reached from it,
    beat ``mode``'s log posterior by more than :data:`RESTART_MARGIN`.
    """
    t, y, noise_scale = data
    with np.errstate(all="ignore"):
        values = log_posterior(theta, prior, t, y, noise_scale, likelihood_weight)
        at_mode = float(log_posterior(mode, prior, t, y, noise_scale, likelihood_weight)[0])
    values = np.where(np.isfinite(values), values, -np.inf)
    best = int(np.argmax(values))
    if not values[best] > at_mode + RESTART_MARGIN:
        return None
    new_mode, new_cov = laplace_fit(prior, t, y, noise_scale, likelihood_weight, start=theta[best])
    with np.errstate(all="ignore"):
        at_new = float(log_posterior(new_mode, prior, t, y, noise_scale, likelihood_weight)[0])
    return (new_mode, new_cov) if at_new > at_mode + RESTART_MARGIN else None


def ensemble_draws(
    prior: GaussianRunPrior,
    t: np.ndarray,
    y: np.ndarray,
    noise_scale: np.ndarray,
    mode: np.ndarray,
    cov: np.ndarray,
    n_draws: int,
    rng: np.random.Generator,
    likelihood_weight: float = 1.0,
) -> tuple[np.ndarray, float]:
    """Draws of one run's posterior by emcee's affine-invariant ensemble, vectorised over walkers.

    The fallback of :func:`condition_run` when importance sampling fails. The walkers start
    around the posterior mode with the Laplace covariance; the ensemble's affine invariance
    makes it insensitive to the correlations and scales that make the importance weights fail.
    :data:`ENSEMBLE_BURN` steps are discarded, :data:`ENSEMBLE_STEPS` kept and thinned to
    ``n_draws``.

    Returns
    -------
    theta : ndarray, shape (n_draws, P)
    ess : float
        Kept draws divided by the longest integrated autocorrelation time of the parameters
        (emcee's estimate; on short chains a lower bound on the time, so an upper bound here).
    """
    import emcee  # with scipy.stats under it: half a second a live answer only pays here

    walkers = max(ENSEMBLE_WALKERS, 2 * prior.dim + 2)
    start = rng.multivariate_normal(mode, 0.25 * cov, size=walkers, method="eigh")

    def log_probability(theta: np.ndarray) -> np.ndarray:
        return log_posterior(theta, prior, t, y, noise_scale, likelihood_weight)

    sampler = emcee.EnsembleSampler(walkers, prior.dim, log_probability, vectorize=True)
    sampler.random_state = np.random.RandomState(int(rng.integers(0, 2**32 - 1))).get_state()
    sampler.run_mcmc(start, ENSEMBLE_BURN + ENSEMBLE_STEPS, progress=False)
    chain = sampler.get_chain(discard=ENSEMBLE_BURN, flat=True)
    # quiet: emcee logs "chain too short" for a short chain; the ESS returned says it instead
    emcee_logger = logging.getLogger("emcee.autocorr")
    level = emcee_logger.level
    emcee_logger.setLevel(logging.ERROR)
    try:
        tau = float(np.nanmax(sampler.get_autocorr_time(discard=ENSEMBLE_BURN, quiet=True)))
    finally:
        emcee_logger.setLevel(level)
    ess = float(len(chain) / max(tau, 1.0)) if np.isfinite(tau) else 0.0
    index = np.linspace(0, len(chain) - 1, n_draws).round().astype(int)
    return chain[index], ess


def condition_start(
    prior: GaussianRunPrior,
    start: float,
    start_sd: float,
    *,
    n_draws: int = 2000,
    random_seed: int | None = None,
) -> RunPosterior:
    """Draws of a run's parameters given only a measured start ``y(0) = start +- start_sd``.

    Exact, not Laplace: the logit start ``r0`` given the measurement (a Gaussian prior times
    ``Normal(start | expit(r0), start_sd)``) is one-dimensional, so it is drawn from its density
    on a fine grid; the other parameters are then drawn from the prior's conditional on ``r0``
    (Gaussian, or a multivariate t's when ``prior.df`` is finite), so they move by their
    population correlation with the start (``<p>_r0_slope``): a run that starts high is expected
    to end high.

    Parameters
    ----------
    prior : GaussianRunPrior
    start : float
        The normalised reward at ``t = 0``.
    start_sd : float
        Its measurement error, normalised reward units (> 0).
    n_draws : int
    random_seed : int, optional

    Returns
    -------
    RunPosterior
        ``n_points`` is 0 (no logged point was used), ``pareto_k`` 0 (no importance weights).
    """
    start_time = time.perf_counter()
    if not (np.isfinite(start) and np.isfinite(start_sd) and start_sd > 0):
        raise BayesGRPOError(
            f"a measured start needs a finite value and a positive error; got {start} +- {start_sd}"
        )
    if prior.names[0] != "r0":
        raise BayesGRPOError(f"the prior's first parameter is {prior.names[0]!r}, not the start r0")
    rng = np.random.default_rng(random_seed)
    mean0, sd0 = float(prior.mean[0]), float(np.sqrt(prior.cov[0, 0]))
    # the grid spans the prior and the measurement's own logit neighbourhood
    margin = min(max(start_sd, 1e-4), 0.25)
    seen = float(logit(np.clip(start, margin, 1.0 - margin)))
    low = min(mean0 - 8.0 * sd0, seen - 4.0)
    high = max(mean0 + 8.0 * sd0, seen + 4.0)
    grid = np.linspace(low, high, 8001)
    squared0 = ((grid - mean0) / sd0) ** 2
    if np.isinf(prior.df):
        log_prior0 = -0.5 * squared0
    else:  # the start's marginal of a multivariate t: a t of the same degrees of freedom
        log_prior0 = -0.5 * (prior.df + 1.0) * np.log1p(squared0 / prior.df)
    log_density = log_prior0 - 0.5 * ((start - expit(grid)) / start_sd) ** 2
    weights = np.exp(log_density - log_density.max())
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    step = grid[1] - grid[0]
    r0 = np.interp(rng.random(n_draws), cdf, grid) + step * (rng.random(n_draws) - 0.5)
    # the rest given r0: the Gaussian conditional
    slope = prior.cov[1:, 0] / prior.cov[0, 0]
    rest_cov = prior.cov[1:, 1:] - np.outer(slope, prior.cov[0, 1:])
    rest_cov = 0.5 * (rest_cov + rest_cov.T) + 1e-12 * np.eye(prior.dim - 1)
    spread = rng.standard_normal((n_draws, prior.dim - 1)) @ np.linalg.cholesky(rest_cov).T
    if not np.isinf(prior.df):
        # the conditional of a multivariate t: a t of df + 1 degrees of freedom whose shape
        # grows with how far the start lies from the prior's (Ding 2016, "On the conditional
        # distribution of the multivariate t distribution")
        df = float(prior.df)
        widen = (df + ((r0 - mean0) / sd0) ** 2) / (df + 1.0)
        spread *= np.sqrt(widen / (rng.chisquare(df + 1.0, n_draws) / (df + 1.0)))[:, None]
    rest = prior.mean[1:] + (r0 - mean0)[:, None] * slope + spread
    theta = np.column_stack([r0, rest])
    mode = prior.mean.copy()
    mode[0] = grid[np.argmax(log_density)]
    mode[1:] += (mode[0] - mean0) * slope
    return RunPosterior(
        prior, theta, mode, 0.0, float(n_draws), 0, time.perf_counter() - start_time, PRIOR_ONLY
    )
