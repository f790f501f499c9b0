"""The notebook reader: the last complete progress table as a run, with its metadata (or the
console dicts or ``Step N | name: value`` lines printed in a cell's output, without a table that
gives the reward).

Metadata come, per field, from the banner and the returned ``TrainOutput`` first, then the
progress bar (``[250/250 1:40:29, Epoch 0/1]``), then the notebook's code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesgrpo.errors import EmptyLogError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers._common import locations, unique_names
from bayesgrpo.logs.readers._records import RawRun
from bayesgrpo.logs.readers.notebook.cells import (
    NO_LOG,
    NOTEBOOK_ALIASES,
    ROW_LABEL,
    SPACED_SLASH,
    ProgressTable,
    find_tables,
    load_notebook,
    notebook_cells,
    stream_lines,
)
from bayesgrpo.logs.readers.notebook.code import code_metadata
from bayesgrpo.logs.readers.notebook.printed import PrintedSteps, code_sources, printed_steps
from bayesgrpo.logs.readers.trl.columns import (
    TRL_REWARD_CANDIDATES,
    ColumnStore,
    trl_run,
)
from bayesgrpo.logs.readers.trl.console import find_dict, read_console_lines
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source

_BAR_COUNT = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)")
_BAR_ELAPSED = re.compile(r"\[\s*\d+\s*/\s*\d+\s+(\d+(?::\d{2}){1,2})")
_BAR_EPOCH = re.compile(r"Epoch\s+([\d.]+)\s*/\s*([\d.]+)")

# --------------------------------------------------------------------------------------------
# the reader
# --------------------------------------------------------------------------------------------


#: Headers transformers writes itself, kept as they are (their aliases map them).
_OWN_HEADERS = frozenset({"Step", "Training Loss", "Validation Loss", "Epoch"})


def metric_name(header: str) -> str:
    """A table header as the metric name TRL logs.

    Unsloth's tables keep TRL's names with spaced slashes (``rewards / f`` -> ``rewards/f``).
    transformers' own notebook callback title-cases them, each ``_``-separated part capitalised
    and joined by spaces (``reward_std`` -> ``Reward Std``, ``completions/mean_length`` ->
    ``Completions/mean Length``): that is undone (every TRL name is lower case).

    >>> metric_name("rewards / correctness_reward_func"), metric_name("Reward Std")
    ('rewards/correctness_reward_func', 'reward_std')
    >>> metric_name("Completions/mean Length"), metric_name("Training Loss")
    ('completions/mean_length', 'Training Loss')
    """
    name = SPACED_SLASH.sub("/", header.strip())
    parts = name.split(" ")
    if name not in _OWN_HEADERS and all(part[:1].isupper() for part in parts if part):
        return "_".join(part.lower() for part in parts if part)
    return name


def _seconds(clock: str) -> float:
    parts = [int(p) for p in clock.split(":")]
    total = 0
    for part in parts:
        total = total * 60 + part
    return float(total)


def _progress_metadata(table: ProgressTable) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """Steps done and planned, epochs and elapsed time, from the progress bar and its label."""
    out: dict[str, Any] = {}
    count: tuple[int, int] | None = None
    match = _BAR_COUNT.search(table.label)
    attrs = table.progress or {}
    try:
        if match:
            count = (int(match.group(1)), int(match.group(2)))
        elif attrs.get("value") is not None and attrs.get("max") is not None:
            count = (int(float(str(attrs["value"]))), int(float(str(attrs["max"]))))
    except ValueError:
        count = None
    if count is not None:
        out["steps_completed"] = float(count[0])
        out["total_steps"] = float(count[1])
    elapsed = _BAR_ELAPSED.search(table.label)
    if elapsed:
        out["train_runtime"] = _seconds(elapsed.group(1))
    epoch = _BAR_EPOCH.search(table.label)
    if epoch:
        try:
            out["num_epochs"] = float(epoch.group(2))
        except ValueError:
            pass
    return out, count


def _choose(tables: list[ProgressTable], path: Path) -> tuple[ProgressTable, list[ProgressTable]]:
    steps = [t for t in tables if t.is_step_table]
    if not steps:
        headers = sorted({t.header[0] if t.header else "(none)" for t in tables})
        raise EmptyLogError(
            f"{len(tables)} progress table(s) found, none with a 'Step' column (first columns: {headers}); "
            "a table per epoch (eval_strategy='epoch') does not state steps",
            path,
        )
    complete = [t for t in steps if t.closed]
    chosen = complete[-1] if complete else steps[-1]
    others = [t for t in tables if t is not chosen]
    return chosen, others


def read_notebook(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read the training progress table of a Jupyter notebook into one raw run.

    Parameters
    ----------
    source : Source
    options : ReadOptions

    Returns
    -------
    list of RawRun
        One run: the last complete progress table of the notebook; without one, the trainer's
        console dicts printed into a cell's output; without either, or when the table has no
        reward column, the ``Step N | name: value`` lines a callback printed (each noted).

    Raises
    ------
    EmptyLogError
        The notebook holds no progress table, console dicts or printed steps (saved without
        outputs?), or its table no row.
    TruncatedLogError
        The notebook's JSON is cut (notebooks are not salvaged).
    MalformedRecordError
        With ``options.strict``, at a table row whose cells do not match the header.
    LogReadError
        Not a notebook.
    """
    path = source.paths[0]
    label = str(path)
    cells = notebook_cells(load_notebook(path), path)
    tables = find_tables(cells)
    if not any(t.is_step_table for t in tables):
        from_streams = _console_dicts(source, options, cells)
        if from_streams is not None:
            return from_streams
    printed = _printed_run(source, options, cells, tables)
    if printed is not None:
        return printed
    table, issues = _last_complete_table(tables, cells, path, label)
    where_table = f"cell {table.cell}"
    rows = _table_rows(table, path, where_table, options.strict)
    issues.extend(_row_issues(table, rows, path, where_table, options.strict))
    store, dropped = rows.store, len(rows.bad) + table.partial_rows
    if len(store) == 0:
        raise EmptyLogError(f"the progress table in {where_table} has no complete row yet", path, where_table)
    issues.append(
        ReadIssue(
            label,
            "rounded_values",
            "info",
            len(store),
            (where_table,),
            "the notebook table prints values with 6 decimals (small values such as a KL near 0 "
            "lose precision)",
        )
    )

    metadata, count = _metadata(table, label, issues)
    return [
        trl_run(
            source,
            options,
            store,
            dropped,
            issues,
            metadata,
            location_label=ROW_LABEL,
            aliases=NOTEBOOK_ALIASES,
            text_values=True,
        )
    ]


def _metadata(
    table: ProgressTable, label: str, issues: list[ReadIssue]
) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """Per field: the banner and the returned ``TrainOutput`` first, then the progress bar, then
    the notebook's code.
    """
    progress, count = _progress_metadata(table)
    metadata: dict[str, Any] = {**table.banner, **table.summary}
    for key, value in progress.items():
        metadata.setdefault(key, value)
    from_code = {k: v for k, v in table.code.items() if k not in metadata}
    metadata.update(from_code)
    if from_code:
        issues.append(_code_metadata_issue(label, from_code))
    if count is not None and count[0] < count[1]:
        issues.append(
            ReadIssue(
                label,
                "stopped_early",
                "info",
                1,
                (f"cell {table.cell}",),
                f"the progress bar stopped at {count[0]}/{count[1]} steps: the run was interrupted or "
                "stopped before its planned end",
            )
        )
    return metadata, count


def _console_dicts(source: Source, options: ReadOptions, cells: list[dict[str, Any]]) -> list[RawRun] | None:
    """The run of the trainer's console dicts printed in the cells' stream outputs, if any.

    Newer TRL prints ``{'loss': '0.1', 'reward': '0.3', ...}`` lines into a cell's output where a
    progress table used to be; they are read as a console log (:func:`read_console_lines`), the
    metadata the notebook's code states added.
    """
    lines, sources = stream_lines(cells)
    if not any(find_dict(text) for _, text, _ in lines):
        return None
    try:
        runs = read_console_lines(source, options, lines, location_label="stream line")
    except EmptyLogError:
        return None
    label = str(source.paths[0])
    for run in runs:
        from_code = {k: v for k, v in code_metadata(sources).items() if k not in run.metadata}
        run.metadata.update(from_code)
        run.issues.append(
            ReadIssue(
                label,
                "console_dicts",
                "info",
                len(run.records),
                (),
                "no progress table: read the trainer's console dicts printed in the cells' outputs"
                + (
                    f"; from the notebook's code: {', '.join(f'{k}={v!r}' for k, v in from_code.items())}"
                    if from_code
                    else ""
                ),
            )
        )
    return runs


def _has_reward(names: set[str], options: ReadOptions) -> bool:
    """Whether metrics of these names hold the reward asked for (or a default TRL reward)."""
    known = names | {NOTEBOOK_ALIASES.get(name, name) for name in names}
    wanted = (options.reward,) if options.reward else TRL_REWARD_CANDIDATES
    return any(name in known for name in wanted)


def _printed_run(
    source: Source, options: ReadOptions, cells: list[dict[str, Any]], tables: list[ProgressTable]
) -> list[RawRun] | None:
    """The run a callback printed as ``Step N | name: value`` lines (:mod:`.printed`), if no
    progress table gives the reward: the notebook has no step table, or its table (a training
    loss only, say) lacks the reward the printed lines hold. ``None`` otherwise.
    """
    found = printed_steps(cells)
    if not found:
        return None
    path = source.paths[0]
    with_reward = [p for p in found if _has_reward({metric_name(n) for n in p.names}, options)]
    table = _choose(tables, path)[0] if any(t.is_step_table for t in tables) else None
    if table is not None and (
        not with_reward or _has_reward({metric_name(h) for h in table.header[1:]}, options)
    ):
        return None  # the table is the run (or neither holds the reward: the table's error says so)
    printed = (with_reward or found)[-1]
    label = str(path)
    store = ColumnStore()
    for line, step, metrics in printed.records:
        names = unique_names(metric_name(name) for name in metrics)
        store.add(line, step, dict(zip(names, metrics.values(), strict=True)))
    where = f"cell {printed.cell}"
    if table is None:
        why = "no progress table"
    else:
        shown = ", ".join(repr(h) for h in table.header[1:]) or "none"
        why = (
            f"the progress table in cell {table.cell} has no reward column (its metrics: {shown}); "
            f"its {len(table.rows)} row(s) not read"
        )
    issues = [
        ReadIssue(
            label,
            "printed_steps",
            "info",
            len(store),
            (where,),
            f"{why}: read the {len(store)} 'Step N | name: value' line(s) a callback printed in {where}",
        ),
        *_printed_notes(printed, found, tables, table, label),
    ]
    nan_issue = store.nan_issue(label, _PRINTED_LABEL)
    if nan_issue is not None:
        issues.append(nan_issue)
    same_cell = [t for t in tables if t.cell == printed.cell and t.is_step_table]
    if same_cell:  # the trainer's own table of this training: its banner, progress bar, TrainOutput
        metadata, _ = _metadata(same_cell[-1], label, issues)
    else:
        metadata = code_metadata(code_sources(cells[: printed.cell]))
        if metadata:
            issues.append(_code_metadata_issue(label, metadata))
    return [
        trl_run(
            source,
            options,
            store,
            0,
            issues,
            metadata,
            location_label=_PRINTED_LABEL,
            aliases=NOTEBOOK_ALIASES,
        )
    ]


_PRINTED_LABEL = "stream line"


def _printed_notes(
    printed: PrintedSteps,
    found: list[PrintedSteps],
    tables: list[ProgressTable],
    table: ProgressTable | None,
    label: str,
) -> list[ReadIssue]:
    """What a run of printed steps leaves unread: other cells' printed steps, other tables,
    ``Step N |`` lines that are no metrics, and the start of an output Colab cut.
    """
    notes: list[ReadIssue] = []
    others = [p for p in found if p is not printed]
    if others:
        notes.append(
            ReadIssue(
                label,
                "other_printed_steps",
                "info",
                sum(len(p.records) for p in others),
                tuple(f"cell {p.cell}" for p in others[:MAX_LOCATIONS]),
                f"printed step lines of {len(others)} other cell(s) (earlier runs or re-runs) not read; "
                f"read those of cell {printed.cell}",
            )
        )
    unread = [t for t in tables if t is not table]
    if unread:
        notes.append(
            ReadIssue(
                label,
                "other_tables",
                "info",
                len(unread),
                tuple(f"cell {t.cell}" for t in unread[:MAX_LOCATIONS]),
                f"{len(unread)} other progress table(s) (other trainings, earlier displays) not read",
            )
        )
    if printed.other_lines:
        notes.append(
            ReadIssue(
                label,
                "not_metric_lines",
                "info",
                len(printed.other_lines),
                locations(_PRINTED_LABEL, printed.other_lines),
                "lines starting 'Step N |' that hold no 'name: number' pairs (printed completions, say); "
                "no records, not read",
            )
        )
    if printed.kept_lines is not None:
        first = min(step for _, step, _ in printed.records)
        notes.append(
            ReadIssue(
                label,
                "output_cut",
                "info",
                1,
                (f"cell {printed.cell}",),
                f"the notebook kept only the last {printed.kept_lines} lines of the cell's output (Colab "
                f"cuts long outputs): steps printed before step {first} are not in the file",
            )
        )
    return notes


def _last_complete_table(
    tables: list[ProgressTable], cells: list[dict[str, Any]], path: Path, label: str
) -> tuple[ProgressTable, list[ReadIssue]]:
    """The notebook's last complete progress table, and a note on the others it holds."""
    if not tables:
        n_outputs = sum(len(c.get("outputs") or []) for c in cells if isinstance(c.get("outputs"), list))
        raise EmptyLogError(
            f"no training progress table (an HTML <table> after a <progress> bar, as transformers "
            f"shows in notebooks), no trainer console dicts and no printed 'Step N | name: value' lines "
            f"in {len(cells)} cell(s) with {n_outputs} output(s); was the notebook saved with its outputs?",
            path,
        )
    table, others = _choose(tables, path)
    issues: list[ReadIssue] = []
    if others:
        issues.append(
            ReadIssue(
                label,
                "other_tables",
                "info",
                len(others),
                tuple(f"cell {t.cell}" for t in others[:MAX_LOCATIONS]),
                f"{len(others)} other progress table(s) (earlier displays, re-runs or other trainings) not "
                f"read; read the last complete one, in cell {table.cell}",
            )
        )
    return table, issues


@dataclass
class _TableRows:
    """A progress table's rows filed as columns, and what did not fit."""

    store: ColumnStore
    bad: list[int] = field(default_factory=list)
    no_log: int = 0
    no_log_rows: list[int] = field(default_factory=list)


def _table_rows(table: ProgressTable, path: Path, where_table: str, strict: bool) -> _TableRows:
    """File every row whose cells match the header; ``No Log`` cells are missing values."""
    names = unique_names(metric_name(h) for h in table.header[1:])
    width = len(table.header)
    rows = _TableRows(ColumnStore())
    for number, row in enumerate(table.rows, start=1):
        if len(row) != width:
            if strict:
                raise MalformedRecordError(
                    f"progress table row has {len(row)} cells, the header {width}",
                    path,
                    f"{where_table}, {ROW_LABEL} {number}",
                )
            rows.bad.append(number)
            continue
        record: dict[str, Any] = {}
        for name, cell in zip(names, row[1:], strict=True):
            if cell.strip().lower() in NO_LOG:
                rows.no_log += 1
                if len(rows.no_log_rows) < MAX_LOCATIONS and (
                    not rows.no_log_rows or rows.no_log_rows[-1] != number
                ):
                    rows.no_log_rows.append(number)
                record[name] = None
            else:
                record[name] = cell
        rows.store.add(number, row[0], record)
    return rows


def _row_issues(
    table: ProgressTable, rows: _TableRows, path: Path, where_table: str, strict: bool
) -> list[ReadIssue]:
    """What was dropped or repaired among the table's rows: bad rows, a cut table, ``No Log``."""
    label = str(path)
    issues: list[ReadIssue] = []
    if rows.bad:
        issues.append(
            ReadIssue(
                label,
                "bad_row",
                "dropped",
                len(rows.bad),
                locations(ROW_LABEL, rows.bad),
                f"progress table rows ({where_table}) whose number of cells differs from the "
                f"header's {len(table.header)}; dropped",
            )
        )
    if table.partial_rows or not table.closed:
        detail = (
            f"the progress table in {where_table} ends without closing its last row or the table "
            f"(output saved mid-update?); {table.partial_rows} partial row(s) dropped"
        )
        if strict:
            raise TruncatedLogError(detail, path, where_table)
        issues.append(
            ReadIssue(
                label,
                "truncated",
                "dropped" if table.partial_rows else "info",
                table.partial_rows,
                (where_table,),
                detail,
            )
        )
    if rows.no_log:
        issues.append(
            ReadIssue(
                label,
                "no_log",
                "info",
                rows.no_log,
                locations(ROW_LABEL, rows.no_log_rows),
                "cells reading 'No Log' (metric not logged at that step) treated as missing",
            )
        )
    return issues


def _code_metadata_issue(label: str, metadata: dict[str, Any]) -> ReadIssue:
    """The read report's note of metadata taken from the notebook's own code."""
    shown = ", ".join(f"{k}={v!r}" for k, v in metadata.items())
    return ReadIssue(
        label,
        "code_metadata",
        "info",
        len(metadata),
        (),
        f"metadata read from the notebook's own code (GRPOConfig / from_pretrained): {shown}",
    )
