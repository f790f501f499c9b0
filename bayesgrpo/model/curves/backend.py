"""One curve function for numpy arrays and PyTensor tensors alike: the backend dispatch.

:func:`array_ops` picks numpy or ``pytensor.tensor`` functions from the arguments' types (PyTensor
is imported only when a tensor is given); :func:`curve_inputs` checks and broadcasts ``t`` and the
shape parameters. :func:`bisect_monotone` solves ``g(t) = q`` for families without a closed-form
inverse.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError

#: Anything a curve function accepts: a float, a numpy array, or a PyTensor variable.
ArrayLike = Any

# Smallest positive t fed to a logarithm (float64 ``tiny``; a float32 graph uses float32's);
# ``t = 0`` itself is handled by a switch, so this only keeps the discarded branch (and its
# gradient) finite.
T_TINY = float(np.finfo(np.float64).tiny)

# --------------------------------------------------------------------------------------------
# Backend dispatch: the same formula runs on numpy arrays or on PyTensor tensors.
# --------------------------------------------------------------------------------------------


class _NumpyOps:
    """Elementwise operations on float64 numpy arrays."""

    is_tensor = False

    @staticmethod
    def asarray(x: ArrayLike) -> np.ndarray:
        return np.asarray(x, dtype=np.float64)

    exp = staticmethod(np.exp)
    expm1 = staticmethod(np.expm1)
    log = staticmethod(np.log)
    log1p = staticmethod(np.log1p)
    sqrt = staticmethod(np.sqrt)
    cos = staticmethod(np.cos)
    sin = staticmethod(np.sin)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    clip = staticmethod(np.clip)

    @staticmethod
    def log_clipped(t: np.ndarray) -> np.ndarray:
        """``log(max(t, tiny))``: finite at ``t = 0``."""
        return np.log(np.maximum(t, T_TINY))

    @staticmethod
    def switch(cond: np.ndarray, a: ArrayLike, b: ArrayLike) -> np.ndarray:
        """``a`` where ``cond``, else ``b``."""
        return np.asarray(np.where(cond, a, b))

    @staticmethod
    def sigmoid(z: np.ndarray) -> np.ndarray:
        return np.exp(-np.logaddexp(0.0, -z))

    @staticmethod
    def log_sigmoid(z: np.ndarray) -> np.ndarray:
        return -np.logaddexp(0.0, -z)


class _TensorOps:
    """The same operations on PyTensor tensors (imported only when a tensor is passed)."""

    is_tensor = True

    def __init__(self) -> None:
        import pytensor.tensor as pt

        self.pt = pt
        for name in (
            "exp",
            "expm1",
            "log",
            "log1p",
            "sqrt",
            "cos",
            "sin",
            "maximum",
            "minimum",
            "clip",
            "switch",
            "sigmoid",
        ):
            setattr(self, name, getattr(pt, name))

    def asarray(self, x: ArrayLike) -> Any:
        return self.pt.as_tensor_variable(x)

    def log_sigmoid(self, z: Any) -> Any:
        return -self.pt.softplus(-z)

    def log_clipped(self, t: Any) -> Any:
        """``log(max(t, tiny))`` with the ``tiny`` of ``t``'s float type (float32 graphs too)."""
        dtype = t.dtype if str(t.dtype).startswith("float") else "float64"
        tiny = np.asarray(np.finfo(dtype).tiny, dtype=dtype)
        return self.pt.log(self.pt.maximum(t, tiny))


NUMPY_OPS = _NumpyOps()


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a PyTensor variable."""
    if isinstance(x, np.ndarray | np.generic | float | int):  # the live path's every call: no lookup
        return False
    if "pytensor" not in sys.modules:  # no tensor can exist before pytensor is imported
        return False
    from pytensor.graph.basic import Variable

    return isinstance(x, Variable)


def array_ops(*args: ArrayLike) -> Any:
    """The operations namespace for these arguments: PyTensor if any is a tensor, else numpy."""
    if any(is_tensor(a) for a in args):
        return _TensorOps()
    return NUMPY_OPS


def curve_inputs(t: ArrayLike, **params: ArrayLike) -> tuple[Any, Any, list[Any]]:
    """Dispatch, convert, and (numpy only) check ``t >= 0`` and positive finite parameters."""
    ops = array_ops(t, *params.values())
    t = ops.asarray(t)
    values = [ops.asarray(v) for v in params.values()]
    if not ops.is_tensor:
        # reductions, no temporary arrays: a NaN fails each comparison (the live path makes
        # dozens of calls an update, most of a few draws, where the checks' overhead is the cost)
        if t.size and not t.min() >= 0:
            raise BayesGRPOError("curve progress t must be >= 0 and not NaN; got a negative or NaN value.")
        for name, v in zip(params, values, strict=True):
            if v.size and not (v.min() > 0 and v.max() < np.inf):
                raise BayesGRPOError(f"curve shape parameter {name!r} must be finite and > 0; got {v!r}.")
    return ops, t, values


def inverse_inputs(q: ArrayLike, **params: ArrayLike) -> tuple[Any, Any, list[Any]]:
    """As :func:`_inputs` for a fraction ``q``, which must lie strictly between 0 and 1 (numpy)."""
    ops, q, values = curve_inputs(q, **params)
    if not ops.is_tensor and not np.all((q > 0) & (q < 1)):
        raise BayesGRPOError(f"fraction q must lie strictly between 0 and 1; got {q!r}.")
    return ops, q, values


def bisect_crossing(
    g: Callable[..., np.ndarray], q: np.ndarray, hi: np.ndarray, params: Sequence[np.ndarray], iterations: int
) -> np.ndarray:
    """The ``t`` in ``[0, hi]`` where ``g(t, *params)`` crosses ``q``, by halving the bracket
    ``iterations`` times (vectorised; ``g`` below ``q`` at 0 and not below it at ``hi``).
    """
    lo = np.zeros_like(hi)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        below = g(mid, *params) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def bisect_monotone(
    g: Callable[..., np.ndarray], q: np.ndarray, scale: np.ndarray, *params: np.ndarray, iterations: int = 64
) -> np.ndarray:
    """First ``t`` with ``g(t, *params) = q`` for a non-decreasing ``g`` with ``g(inf) = 1``.

    Vectorised over all elements: the bracket ``[0, hi]`` starts at ``scale`` and doubles where
    ``g(hi) < q``, then 64 halvings (float64 accuracy).
    """
    q, scale, *rest = np.broadcast_arrays(q, scale, *params)
    params = tuple(rest)
    hi = np.array(scale, dtype=float)
    for _ in range(2000):
        short = g(hi, *params) < q
        if not np.any(short):
            break
        hi = np.where(short, 2.0 * hi, hi)
    else:  # pragma: no cover - g -> 1 > q, so doubling always ends
        raise BayesGRPOError("time_to_fraction: could not bracket the crossing.")
    return bisect_crossing(g, q, hi, params, iterations)
