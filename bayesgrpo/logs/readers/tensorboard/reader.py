"""The TensorBoard reader: one folder of event files, one run, with verl's and TRL's tag names aliased."""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesgrpo.errors import EmptyLogError, LogReadError
from bayesgrpo.logs.readers._records import LOC, STEP, RawRun
from bayesgrpo.logs.readers.tensorboard.metadata import metadata_from_texts
from bayesgrpo.logs.readers.tensorboard.records import EventScan, FileResult, event_file_order, scan_file
from bayesgrpo.logs.readers.trl.columns import TRL_ALIASES, TRL_REWARD_CANDIDATES
from bayesgrpo.logs.readers.verl.lines import REWARD_CANDIDATES as VERL_REWARD_CANDIDATES
from bayesgrpo.logs.readers.verl.lines import metric_aliases as verl_metric_aliases
from bayesgrpo.logs.report import ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source

logger = logging.getLogger(__name__)


#: Train reward tags, in order of preference: verl's raw score and its reward after a KL
#: penalty (as the verl console reader), then TRL's as the transformers callback names them
#: (each logged key ``k`` becomes ``train/k``), then bare names of hand-made loggers.
REWARD_CANDIDATES: tuple[str, ...] = (
    *VERL_REWARD_CANDIDATES,
    *(f"train/{name}" for name in TRL_REWARD_CANDIDATES),
    "train/rewards/mean",
    "reward",
    "rewards/mean",
)


def tensorboard_aliases(tags: Iterable[str]) -> dict[str, str]:
    """Tag -> canonical name, for the tags present, as the verl and TRL readers map them.

    verl's tags are named as in its console log (``actor/entropy`` -> ``entropy``,
    ``actor/kl_loss`` -> ``kl``, ``response_length/mean`` -> ``completion_length``, the main
    validation score -> ``val_reward``...; see ``readers.verl.metric_aliases``). The
    transformers callback writes each logged key ``k`` as ``train/k`` (``eval_k`` as
    ``eval/k``, kept under its own name): ``train/kl`` -> ``kl`` and so on (``TRL_ALIASES``).
    """
    names = list(tags)
    aliases = verl_metric_aliases(names)
    present = set(names)
    taken = set(aliases.values())
    for name, canonical in TRL_ALIASES.items():
        tag = f"train/{name}"
        if tag in present and canonical not in taken:
            aliases[tag] = canonical
            taken.add(canonical)
    return aliases


# --------------------------------------------------------------------------------------------
# The reader


def _take_column(values: array, dtype: type) -> np.ndarray:
    """The array's contents as a numpy array; the array is emptied (its memory freed)."""
    column: np.ndarray = np.frombuffer(values, dtype=dtype).copy()
    del values[:]
    return column


def read_event_files(
    paths: Sequence[Path], strict: bool = False, chunk: int | None = None
) -> tuple[EventScan, list[FileResult]]:
    """Scan a run's event files, in the order given, into one ``EventScan``.

    ``chunk``: bytes read at a time (default ``CHUNK_BYTES``); a record larger than that is
    read whole all the same.
    """
    scan = EventScan()
    return scan, [scan_file(path, scan, strict, chunk) for path in paths]


def read_tensorboard(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read the event files of one run (one folder) into one long-form raw run.

    Parameters
    ----------
    source : Source
        ``source.paths``: the folder's ``events.out.tfevents.*`` files (any order; they are
        read in the order of the time in their names).
    options : ReadOptions

    Returns
    -------
    list of RawRun
        One run; records ``_loc, step, metric, value`` (``_loc`` = event number in the run).

    Raises
    ------
    EmptyLogError
        When no file holds a scalar value (empty files, or only histograms, text...).
    LogReadError
        When a file is not an event file and it is the run's only file (or ``strict``).
    TruncatedLogError, MalformedRecordError
        With ``options.strict``, at the first torn or corrupted record.
    """
    paths = event_file_order(source.paths)
    label = source.label
    scan, results = read_event_files(paths, options.strict)
    issues, skipped_files = _file_issues(results, label, single_file=len(paths) == 1, strict=options.strict)
    issues.extend(_scan_issues(scan, label))
    n_values = len(scan.values)
    if n_values == 0:
        found = ", ".join(f"{kind} {count}" for kind, count in scan.non_scalar.most_common()) or "none"
        dropped = (
            ", ".join(f"{p.kind} {p.count} ({p.locations[0]})" for p in scan.problems.values()) or "none"
        )
        raise EmptyLogError(
            f"no scalar summary in {len(paths)} event file(s): {scan.events} event(s) decoded; non-scalar "
            f"data: {found}; records dropped: {dropped}",
            label,
        )
    tags = list(scan.tags)
    records = pd.DataFrame(
        {
            LOC: _take_column(scan.locs, np.int64),
            STEP: _take_column(scan.steps, np.int64),
            "metric": pd.Categorical.from_codes(_take_column(scan.codes, np.int32), categories=tags),
            "value": _take_column(scan.values, np.float64),
        },
        copy=False,
    )
    records_read = n_values + scan.dropped + skipped_files
    logger.debug("%s: %d events, %d scalar values, %d tags", label, scan.events, n_values, len(tags))
    return [
        RawRun(
            run_id=options.run_id or source.run_id,
            source=label,
            format="tensorboard",
            records=records,
            records_read=records_read,
            issues=issues,
            metadata=metadata_from_texts(scan.texts),
            reward_candidates=REWARD_CANDIDATES,
            aliases=tensorboard_aliases(tags),
            location_label="event",
            long=True,
        )
    ]


def _file_issues(
    results: list[FileResult], label: str, *, single_file: bool, strict: bool
) -> tuple[list[ReadIssue], int]:
    """Notes on empty files and files that are not event files (an error for a lone file); the
    number of files skipped.
    """
    issues: list[ReadIssue] = []
    skipped_files = 0
    for result in results:
        name = result.path.name
        if result.size == 0:
            if single_file:
                raise EmptyLogError("empty event file (0 bytes): the writer never flushed", result.path)
            issues.append(
                ReadIssue(
                    label,
                    "empty_file",
                    "info",
                    0,
                    (name,),
                    f"{name} is empty (0 bytes); nothing read from it",
                )
            )
        elif result.garbage:
            message = (
                f"not a TensorBoard event file: none of its {result.size} bytes starts a record with valid "
                "checksums (a TFRecord starts with an 8-byte length and its masked CRC-32C)"
            )
            if single_file or strict:
                raise LogReadError(message, result.path, "byte 0")
            skipped_files += 1
            issues.append(
                ReadIssue(
                    label,
                    "not_event_file",
                    "dropped",
                    1,
                    (f"{name} byte 0",),
                    f"{name}: {message}; file skipped",
                )
            )
    return issues, skipped_files


def _scan_issues(scan: EventScan, label: str) -> list[ReadIssue]:
    """What the scan dropped (damaged records), passed over (non-scalar summaries) and met (restarts)."""
    issues = [
        ReadIssue(
            label,
            problem.kind,
            "dropped",
            problem.count,
            tuple(problem.locations),
            problem.details[0] + (f" (and {problem.count - 1} more like it)" if problem.count > 1 else ""),
        )
        for problem in scan.problems.values()
    ]
    if scan.non_scalar:
        parts = [
            f"{kind} {count}"
            + (
                f" ({', '.join(repr(t) for t in scan.non_scalar_tags.get(kind, []))})"
                if scan.non_scalar_tags.get(kind)
                else ""
            )
            for kind, count in scan.non_scalar.most_common()
        ]
        issues.append(
            ReadIssue(
                label,
                "non_scalar",
                "info",
                sum(scan.non_scalar.values()),
                (),
                "summaries that are not scalars are not read as metrics: " + "; ".join(parts),
            )
        )
    for where, step in scan.restarts:
        issues.append(
            ReadIssue(
                label,
                "restart",
                "info",
                1,
                (where,),
                f"the writer restarted at step {step} (SessionLog START, a resumed run): TensorBoard would "
                f"hide earlier values at steps >= {step}; here steps logged again keep their latest value",
            )
        )
    return issues
