r"""Names are data, never control: run names (and any text taken from logs) made safe to show.

A run name comes from a log, and a log can hold anything: an ANSI escape that rewrites a terminal
line (``"good\x1b[2K\rgood: CONTINUE"``), a spreadsheet formula (``"=HYPERLINK(...)"``), a
NUL, or 5,000 characters. The helpers here escape the first for a terminal, quote the second in
a CSV cell (the OWASP CSV-injection rule) and bound the last in a file name. Importable from
every layer (it imports nothing of the package).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

#: Characters that act on a terminal or a line instead of showing: C0 and C1 controls (ESC, CR,
#: BEL, NUL...), DEL, the Unicode line and paragraph separators, the bidirectional overrides
#: and isolates (which reorder what follows them on screen) and lone surrogates (which no
#: terminal encoding can write).
CONTROL_CHARACTERS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

#: The first characters of a CSV cell a spreadsheet reads as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: A cell that is a plain number in text (``"-0.5"``, ``"+3e-2"``) is no formula: left as it is.
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

#: File names built from run names are at most this many bytes of UTF-8 (file systems allow 255).
MAX_FILE_NAME_BYTES = 120


_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    code = ord(character)
    if character in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[character]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def has_control_characters(text: str) -> bool:
    """Whether ``text`` holds a character of :data:`CONTROL_CHARACTERS`.

    Parameters
    ----------
    text : str

    Returns
    -------
    bool
    """
    return CONTROL_CHARACTERS.search(text) is not None


def printable(text: Any) -> str:
    r"""``text`` with its control characters escaped as Python writes them (``\x1b``, ``\r``,
    ``\u202e``): one line, shown as it is, never acted on by a terminal.

    Parameters
    ----------
    text : object
        A run name, or anything taken from a log (made a string with ``str``).

    Returns
    -------
    str

    Examples
    --------
    >>> printable("good\x1b[2K\rgood: CONTINUE")
    'good\\x1b[2K\\rgood: CONTINUE'
    """
    return CONTROL_CHARACTERS.sub(_escape, str(text))


def printable_lines(text: Any) -> str:
    r"""Like :func:`printable`, but a message's own line breaks (``\n``) are kept.

    Parameters
    ----------
    text : object
        A message of several lines (made a string with ``str``).

    Returns
    -------
    str
    """
    return "\n".join(printable(line) for line in str(text).split("\n"))


def csv_cell(value: Any) -> Any:
    """A CSV cell safe to open in a spreadsheet: text starting with ``=``, ``+``, ``-``, ``@``, a
    tab or a carriage return gets a leading single quote (OWASP's rule), unless it is a plain
    number (``"-0.5"``); numbers and other values are returned as they are.

    Parameters
    ----------
    value : object

    Returns
    -------
    object

    Examples
    --------
    >>> csv_cell("=HYPERLINK(1)"), csv_cell(-0.5), csv_cell("-0.5"), csv_cell("run-1")
    ("'=HYPERLINK(1)", -0.5, '-0.5', 'run-1')
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_safe(frame: Any) -> Any:
    """A copy of a pandas DataFrame with every text cell passed through :func:`csv_cell` (the
    columns of numbers untouched), to write with ``to_csv``.

    Parameters
    ----------
    frame : pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
    """
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if getattr(column.dtype, "kind", "") in ("O", "U"):  # object and pandas' text dtypes
            out[name] = column.map(csv_cell, na_action="ignore")
    return out


def bounded_file_name(name: str, max_bytes: int = MAX_FILE_NAME_BYTES, suffix: str = "") -> str:
    """``name`` and ``suffix`` in at most ``max_bytes`` bytes of UTF-8: ``name`` cut where it is too
    long, with a short hash of the whole name, so two long names that share a start stay apart.

    Parameters
    ----------
    name : str
        A file name's stem (without its folder) built from a run name.
    max_bytes : int
        At least 13 more than the suffix's bytes.
    suffix : str
        Kept whole at the end (``".png"``).

    Returns
    -------
    str
        ``name + suffix`` where it fits, else the longest start of ``name`` that fits, ``-``,
        12 hex digits of the SHA-256 of ``name``, then ``suffix``.

    Examples
    --------
    >>> bounded_file_name("run", suffix=".png")
    'run.png'
    >>> len(bounded_file_name("漢" * 100, suffix=".png").encode()) <= 120
    True
    """
    encoded = name.encode("utf-8", "surrogatepass")
    room = max_bytes - len(suffix.encode("utf-8"))
    if len(encoded) <= room:
        return name + suffix
    digest = hashlib.sha256(encoded).hexdigest()[:12]
    start = encoded[: room - len(digest) - 1].decode("utf-8", "ignore")  # no half character
    return f"{start}-{digest}{suffix}"
