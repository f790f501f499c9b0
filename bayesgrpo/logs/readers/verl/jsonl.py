"""verl's file logger (``trainer.logger=['file']``): one JSON object per step.

:func:`is_verl_jsonl` tells such records from a plain JSON-lines table; :func:`verl_jsonl_run`
turns them into a run, with the metrics flattened (:func:`flatten_metrics`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesgrpo.errors import LogReadError, MalformedRecordError
from bayesgrpo.logs.readers._records import LOC, STEP, RawRun
from bayesgrpo.logs.readers.json_lines import read_json_lines
from bayesgrpo.logs.readers.trl.columns import ColumnStore
from bayesgrpo.logs.readers.verl.lines import JSONL_FORMAT, REWARD_CANDIDATES, metric_aliases
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source
    from bayesgrpo.logs.readers.json_lines import JsonLines

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# verl's file logger (trainer.logger=['file']): one JSON object per step


def is_verl_jsonl(records: Sequence[Any]) -> bool:
    """Whether JSON Lines records are verl file-logger records: the first has a ``step`` and a
    ``data`` object (``{"step": 12, "data": {"critic/score/mean": 0.41, ...}}``).
    """
    if not records:
        return False
    first = records[0]
    return isinstance(first, Mapping) and STEP in first and isinstance(first.get("data"), Mapping)


def flatten_metrics(data: Mapping[str, Any]) -> dict[str, Any]:
    """A logged ``data`` object as metric -> value, ready for ``tidy_run``.

    Nested objects are flattened with ``/`` (``{"a": {"b": 1}}`` -> ``a/b``); ``true``/``false``
    become 1.0/0.0 as verl's console prints them; ``null`` (how orjson writes NaN) becomes NaN; a
    metric named ``step`` is kept as ``step_logged``. Other values are passed on as written,
    for ``tidy_run`` to convert or report.
    """
    out: dict[str, Any] = {}
    stack: list[tuple[str, Mapping[str, Any]]] = [("", data)]
    while stack:
        prefix, node = stack.pop()
        for key, value in node.items():
            name = f"{prefix}{key}"
            if isinstance(value, Mapping):
                stack.append((name + "/", value))
                continue
            if name in (STEP, LOC):
                name = f"{name}_logged"
            if value is None:
                value = math.nan
            elif isinstance(value, bool):
                value = float(value)
            out[name] = value
    return out


def verl_jsonl_run(lines: JsonLines, source: Source, options: ReadOptions) -> RawRun:
    """The raw run of a verl file-logger JSONL file already split into lines.

    Parameters
    ----------
    lines : JsonLines
        What ``readers.tabular.read_json_lines`` read.
    source : Source
    options : ReadOptions
        ``strict`` raises at a record with no ``data`` object; ``run_id`` names the run.

    Returns
    -------
    RawRun
        One record per line, ``step`` as written, the ``data`` metrics flattened.

    Raises
    ------
    MalformedRecordError
        With ``strict=True``, at a record whose ``data`` is missing or not an object.
    """
    path = Path(source.paths[0])
    label = str(path)
    store = ColumnStore()
    no_data: list[int] = []
    extra: dict[str, list[int]] = {}
    for loc, record in zip(lines.locs, lines.records, strict=True):
        data = record.get("data")
        if not isinstance(data, Mapping):
            if options.strict:
                found = "missing" if "data" not in record else f"a {type(data).__name__}"
                raise MalformedRecordError(
                    f"the record's 'data' is {found}, not an object of metrics; pass strict=False to drop "
                    "and report such records",
                    path,
                    f"line {loc}",
                )
            no_data.append(loc)
            continue
        for key in record:
            if key not in (STEP, "data"):
                extra.setdefault(str(key), []).append(loc)
        store.add(loc, record.get(STEP), flatten_metrics(data))
    issues = _line_issues(lines, no_data, extra, label)
    nan_issue = store.nan_issue(label, "line")
    if nan_issue is not None:
        issues.append(nan_issue)
    logger.debug("read %s: %d records, %d metrics", path, len(store), len(store.values))
    return RawRun(
        run_id=options.run_id or source.run_id,
        source=label,
        format=JSONL_FORMAT,
        records=store.frame(),
        records_read=lines.n_read,
        issues=issues,
        reward_candidates=REWARD_CANDIDATES,
        aliases=metric_aliases(list(store.values)),
        location_label="line",
    )


def _line_issues(
    lines: JsonLines, no_data: list[int], extra: dict[str, list[int]], label: str
) -> list[ReadIssue]:
    """The file logger's read report: lines that are not objects, a cut last line, records with no
    ``data`` object, keys beside ``step`` and ``data``.
    """
    issues: list[ReadIssue] = []
    broken = [n for n in lines.bad if n != lines.cut_line]
    if broken:
        issues.append(
            ReadIssue(
                label,
                "bad_line",
                "dropped",
                len(broken),
                tuple(f"line {n}" for n in broken[:MAX_LOCATIONS]),
                "line(s) that are not a JSON object; dropped",
            )
        )
    if lines.cut_line is not None:
        issues.append(
            ReadIssue(
                label,
                "truncated",
                "dropped",
                1,
                (f"line {lines.cut_line}",),
                "the last line is not a complete JSON object and has no line end: the file ends "
                "mid-record (cut while being written?); dropped",
            )
        )
    if no_data:
        issues.append(
            ReadIssue(
                label,
                "no_data",
                "dropped",
                len(no_data),
                tuple(f"line {n}" for n in no_data[:MAX_LOCATIONS]),
                "record(s) whose 'data' is missing or not an object of metrics; dropped",
            )
        )
    if extra:
        first = min(extra, key=lambda k: extra[k][0])
        issues.append(
            ReadIssue(
                label,
                "extra_keys",
                "info",
                sum(len(v) for v in extra.values()),
                tuple(f"line {n}" for n in extra[first][:MAX_LOCATIONS]),
                f"keys beside 'step' and 'data' ({sorted(extra)[:5]}) are not metrics; not read",
            )
        )
    return issues


def read_verl_jsonl(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read one verl file-logger JSONL file (``trainer.logger=['file']``) into one raw run.

    Parameters
    ----------
    source : Source
        One file.
    options : ReadOptions
        ``strict`` raises at a bad line, a cut last line or a record without ``data``;
        ``run_id`` names the run.

    Returns
    -------
    list of RawRun
        One run: a record per line.

    Raises
    ------
    EmptyLogError
        An empty file.
    LogReadError
        The file cannot be opened or read.
    MalformedRecordError, TruncatedLogError
        With ``strict=True`` only.
    """
    path = Path(source.paths[0])
    try:
        lines = read_json_lines(path, options.strict)
    except (OSError, UnicodeError) as exc:
        raise LogReadError(f"cannot read: {exc}", path) from exc
    return [verl_jsonl_run(lines, source, options)]
