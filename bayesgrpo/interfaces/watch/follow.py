"""Following logs as they are written: one :class:`LogFollower` a source, re-read only when a file changed.

A file's (device, inode, size, mtime) (:class:`FileStamp`) is compared with what it was at the
last read; a rotated or renamed file is found and its generations merged. A
:class:`WatchTarget` is one path the user gave, expanded into sources with the package's own
``discover``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import (
    BayesGRPOError,
    EmptyLogError,
    LogReadError,
    TruncatedLogError,
    UnknownFormatError,
)
from bayesgrpo.logs.readers import Source, default_run_id, detect_format, discover, load_runs, merge_metadata
from bayesgrpo.logs.readers.load import MLFLOW_SCHEME
from bayesgrpo.logs.table import RunsTable, coerce_metadata

logger = logging.getLogger(__name__)


#: Formats whose files are append-only logs with explicit steps: kept across rotation.
ROTATING_FORMATS = frozenset({"verl-console", "verl-jsonl", "jsonl"})
#: Formats whose files a trainer rewrites in place as it goes (a shorter file mid-rewrite is no restart).
REWRITTEN_FORMATS = frozenset({"trl-state"})
#: Read errors that mean "the file is not written far enough yet": wait for the next poll.
WAITING_ERRORS = (EmptyLogError, TruncatedLogError, UnknownFormatError)
#: Probability mass of the forecast interval shown.

# --------------------------------------------------------------------------------------------
# Files: stamps and sources
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStamp:
    """What says whether a file changed: its identity (device, inode), size and mtime."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | Path) -> FileStamp | None:
        """The stamp of ``path``, or None when it does not exist (or cannot be stat'ed)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def same_file(self, other: FileStamp | None) -> bool:
        """Whether ``other`` stamps the same file (device and inode) as this one."""
        return other is not None and (self.device, self.inode) == (other.device, other.inode)


def _listing(folder: Path) -> dict[Path, FileStamp]:
    """Every non-hidden file under ``folder`` with its stamp (as ``discover`` walks it)."""
    out: dict[Path, FileStamp] = {}
    for path in folder.rglob("*"):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue
        stamp = FileStamp.of(path)
        if stamp is not None and path.is_file():
            out[path] = stamp
    return out


def source_key(source: Source) -> str:
    """What identifies a followed source across polls although its files change.

    A TensorBoard run is its folder (a resumed run adds event files), a trainer state its
    training folder (``checkpoint-N`` moves on), a tracker its URI, anything else its file.
    """
    if source.uri is not None:
        return source.uri
    first = Path(source.paths[0])
    if source.format == "tensorboard":
        return f"tensorboard:{first.parent}"
    if source.format == "trl-state":
        folder = first.parent.parent if first.parent.name.startswith("checkpoint-") else first.parent
        return f"trl-state:{folder}"
    return f"{source.format}:{first}"


def _find_renamed(folder: Path, old: FileStamp, exclude: Path) -> Path | None:
    """A file in ``folder`` that is ``old``'s file under another name (logrotate's rename)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return None
    for entry in entries:
        if entry == exclude:
            continue
        stamp = FileStamp.of(entry)
        if stamp is not None and old.same_file(stamp):
            return entry
    return None


def merge_generations(old: RunsTable, new: RunsTable) -> RunsTable:
    """Points of two generations of one log, the newer winning a step both have.

    Metadata: the newer's values, with what only the older states kept (a rotated console log's
    new file lacks the config printed at the start).
    """
    points = pd.concat([old.points, new.points], ignore_index=True, sort=False)
    points = points.drop_duplicates(["run_id", "step"], keep="last").sort_values(
        ["run_id", "step"], kind="stable"
    )
    points["run_id"] = points["run_id"].astype("string")
    runs = new.runs.set_index("run_id").combine_first(old.runs.set_index("run_id")).reset_index()
    return RunsTable(points=points.reset_index(drop=True), runs=coerce_metadata(runs), report=new.report)


def _renamed(table: RunsTable, run_id: str) -> RunsTable:
    """One-run table under another run id (a rotated file read under its new name's run)."""
    points = table.points.assign(run_id=pd.Series(run_id, index=table.points.index, dtype="string"))
    runs = table.runs.assign(run_id=run_id)
    return RunsTable(points=points, runs=coerce_metadata(runs), report=table.report)


def _n_steps(table: RunsTable | None) -> int:
    if table is None:
        return 0
    return int(np.isfinite(table.points["reward"].to_numpy(dtype=float)).sum())


def _step_range(steps: Sequence[int]) -> str:
    """``"step 7"`` or ``"steps 1 .. 52"``."""
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]} .. {steps[-1]}"


def missing_steps(before: RunsTable, now: RunsTable) -> list[int]:
    """Steps with a reward in ``before`` that ``now`` does not have (any run), sorted."""
    old = before.points[np.isfinite(before.points["reward"].to_numpy(dtype=float))]
    new = set(zip(now.points["run_id"].astype(str), now.points["step"].astype(int), strict=True))
    gone = {
        int(s) for r, s in zip(old["run_id"].astype(str), old["step"], strict=True) if (r, int(s)) not in new
    }
    return sorted(gone)


def _is_cut(table: RunsTable) -> bool:
    """Whether the reader met a file cut while being written."""
    return any(issue.kind == "truncated" for issue in table.report.issues)


# --------------------------------------------------------------------------------------------
# One source followed
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadSettings:
    """How followed files are read (``load_runs`` options)."""

    format: str | None = None
    reward: str | None = None
    metadata: Any = None
    logging_steps: int | None = None


class LogFollower:
    """One source followed as it grows: a log file, a TensorBoard run folder, a trainer state.

    Parameters
    ----------
    source : Source
        What ``discover`` found (format, files, run id, reward key). For a file that does not
        exist yet or is not recognisable yet, ``format`` may be ``""``: it is detected once the
        file has data.
    settings : ReadSettings
    stated : DataFrame, optional
        Metadata a manifest (``runs.csv``) states for the run, keyed by ``run_id``.

    Attributes
    ----------
    table : RunsTable or None
        Everything read so far (None while waiting).
    state : {"waiting", "ok", "error"}
    message : str
        Why it waits or failed ("" when ok).
    reads : int
        How many times the files were read (a file that did not change is not read).
    restart_note : str or None
        When the log was deleted and written again, or truncated (a restarted run, a rotated
        log): what became of the steps read before, for the watcher's output. Formats with
        explicit steps that are appended to (:data:`ROTATING_FORMATS`) keep them; for the others
        the note says which earlier steps are no longer shown, until the file holds them again.
    """

    def __init__(
        self, source: Source, settings: ReadSettings | None = None, stated: pd.DataFrame | None = None
    ) -> None:
        self.source = source
        self.stated = stated
        self.key = source_key(source)  # fixed: the source's files and format may change later
        self.settings = settings or ReadSettings()
        self.table: RunsTable | None = None
        self.state = "waiting"
        self.message = "nothing read yet"
        self.reads = 0
        self.rotations = 0
        self._stamps: dict[Path, FileStamp | None] = {}
        self._identities: set[tuple[int, int]] = set()
        self._archive: RunsTable | None = None
        self._current: RunsTable | None = None
        self._before: RunsTable | None = None  # what was shown before a restart not kept
        self._restart: str | None = None  # how the file restarted: "deleted and written again"...
        self.restart_note: str | None = None

    @property
    def label(self) -> str:
        """The source's label as the read report shows it."""
        return self.source.label

    @property
    def identities(self) -> set[tuple[int, int]]:
        """(device, inode) of every file this follower has read, rotated-away ones included."""
        return set(self._identities)

    def poll(self) -> bool:
        """Read the source again if one of its files changed; True when :attr:`table` changed.

        Never raises for a file being written: a missing, empty, cut or not yet recognisable
        file sets :attr:`state` to ``"waiting"`` (keeping what was read before); other read
        errors set ``"error"`` with the reader's message.
        """
        if self.source.uri is not None:
            return self._poll_tracker()
        stamps = {Path(p): FileStamp.of(p) for p in self.source.paths}
        if stamps == self._stamps:
            return False
        previous, self._stamps = self._stamps, stamps
        self._identities.update((st.device, st.inode) for st in stamps.values() if st is not None)
        if self.source.format in ROTATING_FORMATS and self._current is not None:
            self._check_rotation(previous, stamps)
        elif self._current is not None:
            self._note_restart(previous, stamps)
        if all(s is None for s in stamps.values()):
            return self._wait(
                "no such file yet" if self.table is None else "the file is gone; showing what was read"
            )
        format = self.source.format
        if not format:
            format = detect_format(self.source.paths[0]) or ""
            if not format:
                return self._wait("format not recognisable yet")
            self.source = Source(format, self.source.paths, self.source.run_id, self.source.reward)
        try:
            self.reads += 1
            table = self._read(self.source.paths)
        except WAITING_ERRORS as exc:
            return self._wait(short_error(exc))
        except (LogReadError, BayesGRPOError, OSError) as exc:
            self.state, self.message = "error", short_error(exc)
            logger.warning("watch: cannot read %s: %s", self.label, exc)
            return False
        if format == "trl-state" and _is_cut(table) and _n_steps(table) < _n_steps(self._current):
            # the trainer is rewriting the file: the last complete read holds more
            return self._wait("trainer state being rewritten; showing the last complete read")
        self._current = table
        self.table = table if self._archive is None else merge_generations(self._archive, table)
        self._update_restart_note(table)
        self.state, self.message = "ok", ""
        return True

    def _note_restart(
        self, previous: Mapping[Path, FileStamp | None], stamps: Mapping[Path, FileStamp | None]
    ) -> None:
        """Remember what was shown when a file of a format not kept across rotation restarted."""
        shrink_counts = self.source.format not in REWRITTEN_FORMATS
        for path, _, replaced in _restarted_files(previous, stamps, shrink_counts=shrink_counts):
            self.rotations += 1
            if self._before is None:
                self._before = self.table
            self._restart = "replaced (deleted or renamed)" if replaced else "truncated"
            logger.info("watch: %s was %s", path, self._restart)

    def _update_restart_note(self, table: RunsTable) -> None:
        """The restart note after a read: earlier steps the file no longer holds, if any."""
        if self._before is None:
            return
        gone = missing_steps(self._before, table)
        if not gone:  # rewritten in full (or caught up): nothing was lost
            self._before, self._restart = None, None
            self.restart_note = None
            return
        self.restart_note = (
            f"the log was {self._restart} (restarted?): {len(gone)} earlier logged "
            f"step(s), {_step_range(gone)}, are no longer in it and not shown"
        )

    def _poll_tracker(self) -> bool:
        """A tracker (an ``mlflow:`` source) has no file to stat: ask it again, keep what changed."""
        uri, settings = str(self.source.uri), self.settings
        try:
            self.reads += 1
            table = load_runs([uri], reward=settings.reward, metadata=settings.metadata, warn=False)
        except (LogReadError, BayesGRPOError, OSError) as exc:
            self.state, self.message = "error", short_error(exc)
            logger.warning("watch: cannot read %s: %s", self.label, exc)
            return False
        changed = self.table is None or not table.points.equals(self.table.points)
        self.table, self._current = table, table
        self.state, self.message = "ok", ""
        return changed

    def _read(self, paths: Sequence[Path]) -> RunsTable:
        """``load_runs`` on the source's files, named and described as ``load_runs`` on the
        folder would: the source's run id, a manifest's reward key and metadata, the user's over it.
        """
        settings = self.settings
        table = load_runs(
            list(paths),
            format=self.source.format or settings.format,
            reward=settings.reward or self.source.reward,
            metadata=settings.metadata if self.stated is None else None,
            logging_steps=settings.logging_steps,
            warn=False,
        )
        if len(table.run_ids) == 1 and table.run_ids[0] != self.source.run_id:
            table = _renamed(table, self.source.run_id)
        if self.stated is not None:
            runs, _ = merge_metadata(table.runs, self.stated)
            runs, _ = merge_metadata(runs, settings.metadata)
            table = RunsTable(points=table.points, runs=coerce_metadata(runs), report=table.report)
        return table

    def _wait(self, message: str) -> bool:
        """Nothing new to show: waiting when nothing was read yet, else still the last read."""
        self.state = "waiting" if self.table is None else "ok"
        self.message = message
        return False

    def _check_rotation(
        self, previous: Mapping[Path, FileStamp | None], stamps: Mapping[Path, FileStamp | None]
    ) -> None:
        """Move what was read into the archive when the file was replaced or truncated."""
        for path, old, replaced in _restarted_files(previous, stamps):
            self.rotations += 1
            generation = self._current
            assert generation is not None
            renamed = _find_renamed(path.parent, old, exclude=path) if replaced else None
            if renamed is not None and (FileStamp.of(renamed) or old).size > old.size:
                # lines written to the old file after the last poll, before the rename
                try:
                    tail = self._read([renamed])
                    generation = tail if tail.run_ids == generation.run_ids else generation
                except (LogReadError, BayesGRPOError, OSError) as exc:
                    logger.warning("watch: cannot read the rotated file %s: %s", renamed, exc)
            how = "replaced (deleted or renamed)" if replaced else "truncated"
            logger.info("watch: %s was %s; keeping its %d steps", path, how, _n_steps(generation))
            kept = sorted(int(step) for step in generation.points["step"])
            if kept:
                self.restart_note = (
                    f"the log was {how} (rotated or restarted): the {len(kept)} step(s) read before, "
                    f"{_step_range(kept)}, are kept; where the new file logs a step again, its value is shown"
                )
            self._archive = (
                generation if self._archive is None else merge_generations(self._archive, generation)
            )
            self._current = None


def _modified_ns(source: Source) -> int:
    """When a source's (first) file was last modified, in ns; 0 when it is gone."""
    stamp = FileStamp.of(source.paths[0])
    return stamp.mtime_ns if stamp is not None else 0


def short_error(exc: BaseException) -> str:
    """An exception as one short line for the status table."""
    text = str(exc)
    return text if len(text) <= 160 else text[:157] + "..."


# --------------------------------------------------------------------------------------------
# Paths given by the user: a file, or a folder expanded into sources
# --------------------------------------------------------------------------------------------


class WatchTarget:
    """One path the user gave, and the followers it expands into."""

    def __init__(self, path: Path | str, settings: ReadSettings) -> None:
        self.uri = str(path) if str(path).startswith(MLFLOW_SCHEME) else None
        self.path = Path(path)
        self.settings = settings
        self.followers: dict[str, LogFollower] = {}
        self._listing: dict[Path, FileStamp] | None = None
        self._mode = ""  # "file" or "folder" once the path exists
        self.message = ""

    def refresh(self) -> list[LogFollower]:
        """The followers of this path now (a folder re-expanded when its files changed).

        A path that does not exist yet has none (it is waiting); once it exists it is followed as
        a file or expanded as a folder, whichever it turned out to be.
        """
        if self.uri is not None:  # a tracker: one follower for every run it holds
            if not self.followers:
                follower = LogFollower(Source("mlflow", (), "", uri=self.uri), self.settings)
                self.followers = {follower.key: follower}
        elif self.path.is_dir():
            if self._mode != "folder":
                self.followers, self._listing, self._mode = {}, None, "folder"
            listing = _listing(self.path)
            if listing != self._listing and self._needs_discovery(listing):
                self._discover()
            self._listing = listing
        elif self._mode == "file" or self.path.exists():
            if self._mode != "file":
                run_id = default_run_id(self.path)  # as load_runs names it (a trainer state: its folder)
                follower = LogFollower(
                    Source(self.settings.format or "", (self.path,), run_id), self.settings
                )
                self.followers, self._mode = {follower.key: follower}, "file"
        else:
            self.message = "no such file or folder yet"
        return list(self.followers.values())

    def _needs_discovery(self, listing: Mapping[Path, FileStamp]) -> bool:
        """New or removed files, or a changed file no follower reads (it may be recognisable now)."""
        if self._listing is None or set(listing) != set(self._listing):
            return True
        followed = {p for f in self.followers.values() for p in f.source.paths}
        return any(listing[p] != self._listing.get(p) for p in listing if p not in followed)

    def _discover(self) -> None:
        try:
            sources, _, stated = discover(self.path, self.settings.format)
        except (LogReadError, BayesGRPOError, OSError) as exc:
            self.message = short_error(exc)
            logger.warning("watch: cannot list %s: %s", self.path, exc)
            return
        # files a follower read under another name: rotated away, not new runs
        known = {
            identity: follower for follower in self.followers.values() for identity in follower.identities
        }
        chosen: dict[str, Source] = {}
        for source in sources:
            key = source_key(source)
            if len(source.paths) == 1 and key not in self.followers:
                # stat'ed now, not taken from the listing: a file renamed between the listing and
                # discover() is in neither the listing under its new name nor a new run
                stamp = FileStamp.of(source.paths[0])
                owner = known.get((stamp.device, stamp.inode)) if stamp else None
                if owner is not None and owner.key != key:
                    continue
            if key in chosen:  # two trainer states of one training folder: the newest
                newest = max((chosen[key], source), key=_modified_ns)
                chosen[key] = newest
            else:
                chosen[key] = source
        for key, source in chosen.items():
            rows = stated[stated["run_id"].astype(str) == source.run_id] if len(stated.columns) > 1 else None
            if key in self.followers:
                self.followers[key].source = source
            else:
                self.followers[key] = LogFollower(
                    source, self.settings, None if rows is None or rows.empty else rows
                )
        self.message = "" if chosen else "no log found yet"


def _restarted_files(
    previous: Mapping[Path, FileStamp | None],
    stamps: Mapping[Path, FileStamp | None],
    *,
    shrink_counts: bool = True,
) -> Iterator[tuple[Path, FileStamp, bool]]:
    """Each file replaced (deleted or renamed: gone counts, compared with what is written again)
    or, where ``shrink_counts``, truncated since the last poll: its path, its stamp then, and
    whether it was replaced.
    """
    for path, old in previous.items():
        new = stamps.get(path)
        if old is None:
            continue
        replaced = not old.same_file(new)
        shrunk = shrink_counts and not replaced and new is not None and new.size < old.size
        if replaced or shrunk:
            yield path, old, replaced
