"""Logging prefixes: the text a logger, a launcher or Ray writes before a program's own line.

Training output often reaches its log through ``logging`` or a launcher that marks each line:
a timestamp (``2025-01-01 12:00:00``, ``[2025-01-01 12:00:00,123]``, ``2025-01-01T12:00:00Z``),
a level (``INFO``, ``[WARNING]``, ``INFO:root:``), a rank tag (``[rank0]:``, ``[Rank 3]``) or a
Ray prefix (``(TaskRunner pid=123)``, ``(main_task pid=7, ip=10.0.0.1)``), in any order and
any number. :func:`split_log_prefix` tells such a prefix from the line's content, so that a
reader reads the content as if the prefix were not there. No format knowledge here.
"""

from __future__ import annotations

import re

_TIMESTAMP = (
    r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:\s?(?:Z|UTC|[+-]\d{2}:?\d{2}))?\]?"
    r"|\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?"
)
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_TOKEN = (
    rf"(?:{_TIMESTAMP}"
    rf"|\[{_LEVEL}(?:\|[^\]\n]*)?\]"  # [INFO], [INFO|trainer.py:123]
    rf"|{_LEVEL}:[\w.]+:"  # INFO:root: (logging.basicConfig's default)
    rf"|{_LEVEL}\b"
    r"|\[\s*[Rr]ank\s*\d+\s*\]:?|[Rr]ank\s*\d+:"  # [rank0]:, [Rank 3], rank0:
    r"|\[[\w./-]+\.py:\d+(?::\w+)?\]"  # [logging.py:128:log_dist]
    r"|[\w.]+(?=\s+-\s)"  # a logger's name between ' - ' separators: '... - root - INFO - '
    r"|\([^()\n]*\bpid=\d+[^()\n]*\))"  # (TaskRunner pid=123), (main_task pid=7, ip=10.0.0.1)
)
#: One or more prefix tokens, each followed by spaces or a `` - ``, ``|`` or ``:`` separator.
LOG_PREFIX = re.compile(rf"\s*(?:{_TOKEN}(?:\s*(?:-|\||:)(?=\s))?\s*)+")


def split_log_prefix(text: str) -> tuple[str, str]:
    """A line split into its logging prefix (possibly empty) and its content.

    Parameters
    ----------
    text : str
        One line, without its line end.

    Returns
    -------
    prefix : str
        The leading timestamps, levels, rank tags and Ray prefixes, with the spaces and
        separators after them; ``""`` when the line has none.
    content : str
        The rest of the line.

    Examples
    --------
    >>> split_log_prefix("2025-01-01 12:00:00 INFO step:3 - critic/score/mean:0.3")
    ('2025-01-01 12:00:00 INFO ', 'step:3 - critic/score/mean:0.3')
    >>> split_log_prefix("[rank0]: (TaskRunner pid=12) step:1")
    ('[rank0]: (TaskRunner pid=12) ', 'step:1')
    >>> split_log_prefix("step:1 - a:2")
    ('', 'step:1 - a:2')
    """
    match = LOG_PREFIX.match(text)
    if match is None:
        return "", text
    return text[: match.end()], text[match.end() :]


def is_log_prefix(text: str) -> bool:
    """Whether ``text`` is a logging prefix and nothing else (blank counts as one).

    Parameters
    ----------
    text : str
        The part of a line before its content (the text before ``step:`` on a verl line).

    Returns
    -------
    bool
    """
    return not text.strip() or LOG_PREFIX.fullmatch(text) is not None


__all__ = ["LOG_PREFIX", "is_log_prefix", "split_log_prefix"]
