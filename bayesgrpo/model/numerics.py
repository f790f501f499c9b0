"""The few special functions and the small optimiser the live path needs, in numpy alone.

A live answer in a fresh process waits for every module it imports, and SciPy's ``optimize`` and
``special`` (with the array-API layer under them) were most of the live path's import time
(``benchmarks/live_first_answer.py``). What the live update asks of them is small: the logistic
function and its inverse, ``log Gamma`` of a few scalars, ``log-sum-exp``, a binomial tail, and the
mode of a smooth posterior in five or six dimensions. Each is written here against its SciPy
counterpart, which ``tests/model/test_numerics.py`` checks it against.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def expit(x: np.ndarray | float) -> np.ndarray:
    """The logistic function ``1 / (1 + exp(-x))``, without overflow for large ``|x|``.

    As ``scipy.special.expit`` computes it: ``1 / (1 + exp(-x))`` for ``x >= 0`` and
    ``exp(x) / (1 + exp(x))`` below.
    """
    x = np.asarray(x, dtype=float)
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def logit(p: np.ndarray | float) -> np.ndarray:
    """``log(p / (1 - p))``, the inverse of :func:`expit` (``-inf`` at 0, ``inf`` at 1)."""
    p = np.asarray(p, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(p) - np.log1p(-p)


def gammaln(x: float) -> float:
    """``log |Gamma(x)|`` of one number (the Student-t's normalising constants)."""
    return math.lgamma(float(x))


def logsumexp(a: np.ndarray) -> float:
    """``log(sum(exp(a)))`` over every element, computed about the largest (``-inf`` if all are)."""
    a = np.asarray(a, dtype=float)
    top = float(np.max(a)) if a.size else -np.inf
    if not np.isfinite(top):
        return top if top > 0 else -np.inf
    return top + float(np.log(np.sum(np.exp(a - top))))


def binomial_tail(count: int, n: int, share: float) -> float:
    """``P(X >= count)`` for ``X ~ Binomial(n, share)`` (``scipy.special.bdtrc(count - 1, n, share)``).

    Summed over the tail's log probabilities, so a small tail keeps its digits.
    """
    if count <= 0:
        return 1.0
    if count > n:
        return 0.0
    if share <= 0.0:
        return 0.0
    if share >= 1.0:
        return 1.0
    k = np.arange(count, n + 1, dtype=float)
    log_choose = math.lgamma(n + 1.0) - np.array([math.lgamma(v + 1.0) + math.lgamma(n - v + 1.0) for v in k])
    log_pmf = log_choose + k * math.log(share) + (n - k) * math.log1p(-share)
    return float(min(1.0, math.exp(logsumexp(log_pmf))))


@dataclass(frozen=True)
class Minimum:
    """Where :func:`newton_minimize` stopped.

    Attributes
    ----------
    x : ndarray, shape (P,)
        The minimiser found.
    value : float
        The function there.
    gradient : ndarray, shape (P,)
        Its central-difference gradient there.
    iterations : int
        Newton steps taken.
    converged : bool
        The gradient met the tolerance (False: the step limit was reached, or no step along the
        Newton direction lowered the value any more).
    """

    x: np.ndarray
    value: float
    gradient: np.ndarray
    iterations: int
    converged: bool


#: How often :func:`newton_minimize` halves a step that does not lower the value before it gives up:
#: the shortest step tried is ``0.5 ** 33`` of Newton's (the last above 1e-10 of it).
LINE_SEARCH_HALVINGS = 33


def newton_minimize(
    batched: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    *,
    gradient_step: float = 1e-5,
    hessian_step: float = 1e-3,
    gtol: float = 1e-5,
    max_iterations: int = 100,
    max_step: float = 4.0,
) -> Minimum:
    """Minimise a smooth function of a few variables by Newton's method with a line search.

    The gradient and the Hessian come from central differences, all points of one iteration in
    one call of ``batched`` (rows of points in, values out: a function vectorised over points,
    as the live path's log posterior is). Where the Hessian is not positive definite (away from
    the mode) its eigenvalues are taken in absolute value and floored, so every step goes
    downhill; a step is cut to ``max_step`` in length and halved until it lowers the value
    (Armijo's condition; the longest such step of up to :data:`LINE_SEARCH_HALVINGS` halvings is
    taken). Every length is tried in one call, with the next iteration's differences about the
    full step, so an iteration whose full step is taken (near the mode, nearly all) costs one call
    of ``batched``. A point where ``batched`` is not finite counts as infinitely high.

    Parameters
    ----------
    batched : callable
        ``f(points) -> values``, points of shape (B, P), values of shape (B,).
    x0 : ndarray, shape (P,)
        Where to start (a finite value there).
    gradient_step, hessian_step : float
        The central differences' steps.
    gtol : float
        Stop when every component of the gradient is below this in absolute value.
    max_iterations : int
    max_step : float
        The longest step, in the variables' units.

    Returns
    -------
    Minimum
    """
    x = np.asarray(x0, dtype=float).copy()
    p = len(x)
    eye = np.eye(p)
    pairs = [(i, j) for i in range(p) for j in range(i, p)]
    hessian_offsets = np.array(
        [
            sign_i * hessian_step * eye[i] + sign_j * hessian_step * eye[j]
            for i, j in pairs
            for sign_i, sign_j in ((1, 1), (1, -1), (-1, 1), (-1, -1))
        ]
    )
    offsets = np.vstack([np.zeros(p), gradient_step * eye, -gradient_step * eye, hessian_offsets])

    def safe(points: np.ndarray) -> np.ndarray:
        values = np.asarray(batched(points), dtype=float)
        return np.where(np.isfinite(values), values, np.inf)

    def derivatives_from(values: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        gradient = (values[1 : 1 + p] - values[1 + p : 1 + 2 * p]) / (2 * gradient_step)
        corners = values[1 + 2 * p :].reshape(-1, 4)
        hessian = np.empty((p, p))
        for (i, j), (a, b, c, d) in zip(pairs, corners, strict=True):
            hessian[i, j] = hessian[j, i] = (a - b - c + d) / (4 * hessian_step**2)
        return float(values[0]), gradient, hessian

    def derivatives(at: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        return derivatives_from(safe(at[None, :] + offsets))

    # the line search's step lengths, longest first: all tried in one call, with the
    # derivatives at the full step (accepted near the mode), so an iteration is one call
    lengths = 0.5 ** np.arange(LINE_SEARCH_HALVINGS + 1)
    n_offsets = len(offsets)
    value, gradient, hessian = derivatives(x)
    iterations = 0
    while iterations < max_iterations:
        if not (np.isfinite(value) and np.isfinite(gradient).all() and np.isfinite(hessian).all()):
            return Minimum(x, value, gradient, iterations, False)
        if np.max(np.abs(gradient)) < gtol:
            return Minimum(x, value, gradient, iterations, True)
        eigenvalues, vectors = np.linalg.eigh(0.5 * (hessian + hessian.T))
        magnitude = np.abs(eigenvalues)
        floor = max(1e-8 * float(magnitude.max()), 1e-10)
        direction = -(vectors / np.maximum(magnitude, floor)) @ (vectors.T @ gradient)
        length = float(np.linalg.norm(direction))
        if length > max_step:
            direction *= max_step / length
        slope = float(gradient @ direction)
        if slope >= 0:  # the differences no longer resolve a descent direction
            direction, slope = -gradient, -float(gradient @ gradient)
        values = safe(np.vstack([x + direction + offsets, x + lengths[1:, None] * direction]))
        trial_values = np.concatenate([values[:1], values[n_offsets:]])
        armijo = trial_values <= value + 1e-4 * lengths * slope  # Armijo's condition, per length
        iterations += 1
        if not armijo.any():
            return Minimum(x, value, gradient, iterations, False)
        first = int(np.argmax(armijo))
        x = x + lengths[first] * direction
        value, gradient, hessian = derivatives_from(values[:n_offsets]) if first == 0 else derivatives(x)
    return Minimum(x, value, gradient, iterations, np.max(np.abs(gradient)) < gtol)
