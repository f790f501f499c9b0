"""What every figure shares: pyplot on first use, labels that fit, a colour per family.

matplotlib is imported here only (:func:`pyplot`), so nothing else in the package needs it.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import colormaps

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> Any:
    """``matplotlib.pyplot``, imported on first use (Agg unless a display or a notebook is there)."""
    if (
        matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline")
        and not _interactive()
    ):
        matplotlib.use("Agg")

    return plt


def _interactive() -> bool:
    return hasattr(sys, "ps1") or "ipykernel" in sys.modules


def subplots(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = (5.0, 3.2), **kwargs: Any
) -> tuple[Figure, Any]:
    """A new figure and its axes (``matplotlib.pyplot.subplots``), for modules that must not
    import matplotlib themselves.
    """
    return pyplot().subplots(nrows, ncols, figsize=figsize, **kwargs)


def figure_png(figure: Figure, *, dpi: int = 72) -> bytes:
    """The figure as PNG bytes (tight bounding box); the figure is closed."""
    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        pyplot().close(figure)
    return buffer.getvalue()


# --------------------------------------------------------------------------------------------
# Runs, fan charts from curve draws, stopping, transfer, pooling
# --------------------------------------------------------------------------------------------

#: Colours of the phases of ``bayesgrpo.questions.stopping.PHASES``.
PHASE_COLORS: dict[str, str] = {"slow_start": "#6baed6", "rapid": "#fd8d3c", "plateau": "#41ab5d"}
#: Label of a run, family or size that the metadata leave unknown.
UNKNOWN_LABEL = "unknown"


def plain_label(text: str) -> str:
    """Text from a log as matplotlib shows it literally: a ``$`` would start mathtext (and a
    malformed formula fails the whole figure).
    """
    return str(text).replace("$", r"\$")


def short_label(text: str, width: int = 40) -> str:
    """``text`` cut to ``width`` characters in the middle, keeping its start and its end (run ids
    often differ only in a suffix), made literal for matplotlib (:func:`_plain`).
    """
    text = str(text)
    if len(text) > width:
        head = (width - 3) // 3
        text = text[:head] + "..." + text[len(text) - (width - 3 - head) :]
    return plain_label(text)


def wrapped_label(text: str, width: int = 40) -> str:
    """``text`` whole, broken into lines of at most ``width`` characters (at underscores, dashes
    and slashes where it can), made literal for matplotlib (:func:`plain_label`).
    """
    text = str(text)
    lines: list[str] = []
    while len(text) > width:
        cut = max(text.rfind(mark, 0, width) for mark in "_-/ ") + 1
        cut = cut if cut > width // 2 else width
        lines.append(text[:cut])
        text = text[cut:]
    lines.append(text)
    return plain_label("\n".join(lines))


def known_value(value: Any) -> bool:
    """Whether a metadata value is known (not None, NaN, empty or the unknown label)."""
    return (
        value is not None
        and not (not isinstance(value, str) and bool(pd.isna(value)))
        and str(value) not in ("", "<NA>", "nan")
    )


def family_colors(families: Sequence[Any]) -> dict[str, Any]:
    """A colour per family, stable for a given set (sorted; ``tab10``, ``tab20`` beyond ten);
    :data:`UNKNOWN_LABEL` grey.
    """
    names = sorted({str(f) for f in families if known_value(f)})
    palette = colormaps["tab10" if len(names) <= 10 else "tab20"]
    colors: dict[str, Any] = {name: palette(i % palette.N) for i, name in enumerate(names)}
    colors[UNKNOWN_LABEL] = "0.6"
    return colors


def family_of(value: Any) -> str:
    """A run's family as a label (the unknown label when the metadata leave it unknown)."""
    return str(value) if known_value(value) else UNKNOWN_LABEL


def robust_limits(values: np.ndarray, pad: float = 0.05, log: bool = False) -> tuple[float, float]:
    """Axis limits holding every value but far outliers (beyond 3 interquartile ranges of the
    quartiles, on a log scale when ``log``): a heavy-tailed asymptote does not flatten the rest.
    """
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite) & ((finite > 0) if log else True)]
    if finite.size == 0:
        return (0.1, 10.0) if log else (0.0, 1.0)
    scaled = np.log(finite) if log else finite
    q1, q3 = np.quantile(scaled, [0.25, 0.75])
    fence = 3.0 * (q3 - q1)
    kept = scaled[(scaled >= q1 - fence) & (scaled <= q3 + fence)] if fence > 0 else scaled
    low, high = float(kept.min()), float(kept.max())
    span = high - low if high > low else max(abs(high), 1.0)
    low, high = low - pad * span, high + pad * span
    return (float(np.exp(low)), float(np.exp(high))) if log else (low, high)
