"""HTML pieces of the report: escaping, numbers, tables, inline images and the page's style.

Every string that came from a log goes through :func:`esc`.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from bayesgrpo._text import printable_lines
from bayesgrpo.interfaces.text import distinguishing_digits

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.0em; margin: 1.2em 0 0.3em; word-break: break-all; }
table { border-collapse: collapse; font-size: 0.82em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.run { word-break: break-all; max-width: 22em; }
.stop { color: #b2182b; font-weight: 600; }
.undecided { color: #8c6d00; }
.continue { color: #2166ac; font-weight: 600; }
.sev-high { color: #b2182b; font-weight: 600; }
.sev-warning { color: #d6604d; font-weight: 600; }
.sev-info { color: #666; }
.note { color: #555; font-size: 0.9em; }
.warn { color: #b2182b; }
td.evidence { font-size: 0.85em; color: #444; max-width: 40em; }
img { max-width: 100%; height: auto; }
details { margin: 0.4em 0; }
code { background: #f5f5f5; padding: 0 3px; }
"""


def esc(value: Any) -> str:
    """HTML-escaped text of any value (quotes too), its control characters shown escaped
    (``bayesgrpo._text.printable_lines``): a run name or source label from a log is data on the
    page, never a character that acts.
    """
    return html.escape("" if value is None else printable_lines(value), quote=True)


def fmt_number(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, or a dash when it is missing."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    if not math.isfinite(number):
        return "-"
    return f"{number:.{digits}g}"


def band_digits(median: Any, lower: Any, upper: Any) -> int:
    """Significant digits that tell a band's median and ends apart
    (:func:`~bayesgrpo.interfaces.text.distinguishing_digits`; 3 where one is missing).
    """
    try:
        values = [float(median), float(lower), float(upper)]
    except (TypeError, ValueError):
        return 3
    return distinguishing_digits(*values)


def fmt_band(median: Any, lower: Any, upper: Any) -> str:
    """``median [lower, upper]`` with the digits that tell them apart; dashes where missing."""
    digits = band_digits(median, lower, upper)
    return f"{fmt_number(median, digits)} [{fmt_number(lower, digits)}, {fmt_number(upper, digits)}]"


def fmt_text(value: Any) -> str | None:
    """A metadata value as text, None when missing."""
    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):
        return None
    text = str(value)
    return None if text in ("", "<NA>", "nan", "None") else text


def img_tag(png: bytes, alt: str) -> str:
    """An inline ``<img>`` of a PNG (base64 ``data:`` URI)."""
    return f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" alt="{esc(alt)}">'


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table; cells are given as HTML (escape before)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_cell(html_text: str, cls: str | None = None) -> str:
    """One ``<td>`` cell, with a class when given."""
    return f'<td class="{cls}">{html_text}</td>' if cls else f"<td>{html_text}</td>"
