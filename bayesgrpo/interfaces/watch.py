"""Follow training logs while they are written and forecast each run live (``bayesgrpo watch``).

What is followed
----------------
Each path given is a log file (a verl or TRL console log, a ``trainer_state.json``, a table, an
event file) or a folder (a TensorBoard run folder, a training output folder with
``checkpoint-N/`` subfolders, or a folder of several runs). Folders are expanded into sources with
the package's own ``discover`` (so a folder means here what it means to ``load_runs``), and each
source is followed by one :class:`LogFollower`, which re-reads it with the package's readers
(``load_runs``) when, and only when, one of its files changed: a file's (device, inode, size,
mtime) is compared with what it was at the last read. The readers take a growing file as it is:

- a console log's last line without its newline (being written) loses only its cut field;
- a TensorBoard file's torn last record is dropped;
- a ``trainer_state.json`` caught while the trainer rewrites it is salvaged up to the cut, or,
  when that gives fewer steps than the last complete read, the last complete read is kept;
- an empty or not yet recognisable file, or a path that does not exist yet, is *waiting*, not
  an error: it is read again once it changes.

Rotation: when a followed file is replaced (its inode changed: ``train.log`` renamed to
``train.log.1`` and a new ``train.log`` started) or shrinks (truncated in place), the steps read
so far are kept and the new file's steps are added to them, the new file winning where both
have a step. A renamed file found beside the new one (same inode as before) is read once more
first, for the lines written after the last poll. A restart that prints earlier steps again is
the readers' business: the latest record of a step wins, as in ``load_runs``. Rotation applies
to append-only logs with explicit steps (``verl-console``, ``jsonl``); a ``trainer_state.json``
holds the whole history in every version, and a TRL console log numbers its steps by line (after
rotation the numbering restarts: follow ``trainer_state.json`` instead).

Forecasts
---------
:class:`Watcher` orchestrates: per poll it refreshes the followers, and for each run whose
points (or horizon) changed since the last poll it conditions the population on the run's
points (``bayesgrpo.questions.live.LiveForecaster``, tens of milliseconds per run) and asks the stopping
rule; the other runs keep their cached status. ``Watcher.poll()`` returns one
:class:`RunStatus` per run, which the terminal view (:func:`render_table`, ``rich``) and the
JSON output (:meth:`RunStatus.to_dict`) only render.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pandas as pd

from bayesgrpo.errors import (
    BayesGRPOError,
    EmptyLogError,
    LogReadError,
    TruncatedLogError,
    UnknownFormatError,
)
from bayesgrpo.logs.readers import Source, detect_format, discover, load_runs, merge_metadata
from bayesgrpo.questions.live import live_forecaster
from bayesgrpo.logs.table import RunsTable, coerce_metadata

if TYPE_CHECKING:
    from rich.table import Table

    from bayesgrpo.questions.live import LiveForecaster
    from bayesgrpo.questions.stopping import StoppingRule

logger = logging.getLogger(__name__)

#: Formats whose files are append-only logs with explicit steps: kept across rotation.
ROTATING_FORMATS = frozenset({"verl-console", "verl-jsonl", "jsonl"})
#: Read errors that mean "the file is not written far enough yet": wait for the next poll.
WAITING_ERRORS = (EmptyLogError, TruncatedLogError, UnknownFormatError)
#: Probability mass of the forecast interval shown.
INTERVAL = 0.9
#: Default number of last logged rewards averaged into the "current reward".
SMOOTH = 10

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
    training folder (``checkpoint-N`` moves on), anything else its file.
    """
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
    points = points.drop_duplicates(["run_id", "step"], keep="last").sort_values(["run_id", "step"], kind="stable")
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
    """

    def __init__(self, source: Source, settings: ReadSettings | None = None, stated: pd.DataFrame | None = None) -> None:
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

    @property
    def label(self) -> str:
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
        stamps = {Path(p): FileStamp.of(p) for p in self.source.paths}
        if stamps == self._stamps:
            return False
        previous, self._stamps = self._stamps, stamps
        self._identities.update((st.device, st.inode) for st in stamps.values() if st is not None)
        if self.source.format in ROTATING_FORMATS and self._current is not None:
            self._check_rotation(previous, stamps)
        if all(s is None for s in stamps.values()):
            return self._wait("no such file yet" if self.table is None else "the file is gone; showing what was read")
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
            return self._wait(_short(exc))
        except (LogReadError, BayesGRPOError, OSError) as exc:
            self.state, self.message = "error", _short(exc)
            logger.warning("watch: cannot read %s: %s", self.label, exc)
            return False
        if format == "trl-state" and _is_cut(table) and _n_steps(table) < _n_steps(self._current):
            # the trainer is rewriting the file: the last complete read holds more
            return self._wait("trainer state being rewritten; showing the last complete read")
        self._current = table
        self.table = table if self._archive is None else merge_generations(self._archive, table)
        self.state, self.message = "ok", ""
        return True

    def _read(self, paths: Sequence[Path]) -> RunsTable:
        """``load_runs`` on the source's files, named and described as ``load_runs`` on the
        folder would: the source's run id, a manifest's reward key and metadata, the user's over it."""
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

    def _check_rotation(self, previous: Mapping[Path, FileStamp | None], stamps: Mapping[Path, FileStamp | None]) -> None:
        """Move what was read into the archive when the file was replaced or truncated."""
        for path, old in previous.items():
            new = stamps.get(path)
            if old is None:
                continue
            replaced = not old.same_file(new)  # or gone: renamed, the new file not started yet
            shrunk = not replaced and new is not None and new.size < old.size
            if not (replaced or shrunk):
                continue
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
            logger.info("watch: %s was %s; keeping its %d steps", path, "replaced" if replaced else "truncated",
                        _n_steps(generation))
            self._archive = generation if self._archive is None else merge_generations(self._archive, generation)
            self._current = None


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 160 else text[:157] + "..."


# --------------------------------------------------------------------------------------------
# Paths given by the user: a file, or a folder expanded into sources
# --------------------------------------------------------------------------------------------


class _Target:
    """One path the user gave, and the followers it expands into."""

    def __init__(self, path: Path, settings: ReadSettings) -> None:
        self.path = path
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
        if self.path.is_dir():
            if self._mode != "folder":
                self.followers, self._listing, self._mode = {}, None, "folder"
            listing = _listing(self.path)
            if listing != self._listing and self._needs_discovery(listing):
                self._discover(listing)
            self._listing = listing
        elif self._mode == "file" or self.path.exists():
            if self._mode != "file":
                run_id = self.path.stem
                if self.path.name == "trainer_state.json":  # as load_runs names it: the training folder
                    folder = self.path.parent
                    run_id = (folder.parent if folder.name.startswith("checkpoint-") else folder).name
                follower = LogFollower(Source(self.settings.format or "", (self.path,), run_id), self.settings)
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

    def _discover(self, listing: Mapping[Path, FileStamp]) -> None:
        try:
            sources, _, stated = discover(self.path, self.settings.format)
        except (LogReadError, BayesGRPOError, OSError) as exc:
            self.message = _short(exc)
            logger.warning("watch: cannot list %s: %s", self.path, exc)
            return
        # files a follower read under another name: rotated away, not new runs
        known = {identity: follower for follower in self.followers.values() for identity in follower.identities}
        chosen: dict[str, Source] = {}
        for source in sources:
            key = source_key(source)
            if len(source.paths) == 1 and key not in self.followers:
                stamp = listing.get(Path(source.paths[0]))
                owner = known.get((stamp.device, stamp.inode)) if stamp else None
                if owner is not None and owner.key != key:
                    continue
            if key in chosen:  # two trainer states of one training folder: the newest
                newest = max((chosen[key], source), key=lambda s: FileStamp.of(s.paths[0]).mtime_ns if FileStamp.of(s.paths[0]) else 0)
                chosen[key] = newest
            else:
                chosen[key] = source
        for key, source in chosen.items():
            rows = stated[stated["run_id"].astype(str) == source.run_id] if len(stated.columns) > 1 else None
            if key in self.followers:
                self.followers[key].source = source
            else:
                self.followers[key] = LogFollower(source, self.settings, None if rows is None or rows.empty else rows)
        self.message = "" if chosen else "no log found yet"


# --------------------------------------------------------------------------------------------
# Status of a run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunStatus:
    """Where one run stands at one poll: what the watcher shows in one row.

    Attributes
    ----------
    run_id, source : str
    state : {"ok", "waiting", "no_horizon", "error"}
        ``ok``: forecast and advice below; ``waiting``: nothing readable yet; ``no_horizon``:
        read, but no horizon (pass one, or a log stating its total steps); ``error``: see reason.
    n_steps : int
        Logged steps with a reward so far.
    step : float or None
        The last of them.
    reward_now : float or None
        Mean of the last ``smooth`` logged rewards.
    horizon_step : float or None
    final_median, final_lower, final_upper : float or None
        Forecast expected reward at the horizon: median and 90% interval.
    p_plateau : float or None
        ``P(gain from now to the horizon < eps)``.
    decision : {"stop", "continue"} or None
        The rule's advice.
    reason : str
        The rule's one-line reason, or why there is no advice.
    updated : bool
        Recomputed at this poll (False: the run's data did not change; cached).
    seconds : float
        Time the update took (0 when cached).
    pareto_k : float or None
        Reliability of the live update's importance weights (above 0.7: unreliable).
    """

    run_id: str
    source: str
    state: str
    n_steps: int = 0
    step: float | None = None
    reward_now: float | None = None
    horizon_step: float | None = None
    final_median: float | None = None
    final_lower: float | None = None
    final_upper: float | None = None
    p_plateau: float | None = None
    decision: str | None = None
    reason: str = ""
    updated: bool = False
    seconds: float = 0.0
    pareto_k: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (NaN as None)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        return out


def _finite_or_none(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _fingerprint(points: pd.DataFrame) -> tuple[int, int]:
    """Changes whenever a step or reward of the run changes."""
    frame = points[["step", "reward"]]
    return len(frame), int(pd.util.hash_pandas_object(frame, index=False).sum())


# --------------------------------------------------------------------------------------------
# The watcher
# --------------------------------------------------------------------------------------------


@dataclass
class Watcher:
    """Follow logs and forecast every run in them; :meth:`poll` answers, the UI renders.

    Parameters
    ----------
    paths : path or paths
        Log files or folders; they need not exist yet.
    rule : StoppingRule
        Gives the advice (``PlateauRule``, ``BudgetRule``, ``TargetRule``).
    population : RewardModel, LiveForecaster, path of a saved model, or None
        The prior of each run; default the population shipped with the package
        (``bayesgrpo.model.datasets.bundled_population()``). Loaded at the first forecast (see
        :func:`live_forecaster`).
    horizon : float, optional
        The step every run is planned to end at; default each run's ``total_steps`` as its log
        states it.
    eps : float
        Gain that counts as nothing in ``P(plateau)``: a share of the run's reward range
        (``relative``) or reward units.
    relative : bool
    smooth : int
        Last logged rewards averaged into the current reward.
    read : ReadSettings
        ``load_runs`` options (format, reward metric, metadata, TRL ``logging_steps``).
    random_seed : int, optional
    """

    paths: str | Path | Sequence[str | Path]
    rule: StoppingRule
    population: Any = None
    horizon: float | None = None
    eps: float = 0.01
    relative: bool = True
    smooth: int = SMOOTH
    read: ReadSettings = field(default_factory=ReadSettings)
    random_seed: int | None = 1
    _targets: list[_Target] = field(default_factory=list, init=False, repr=False)
    _live: LiveForecaster | None = field(default=None, init=False, repr=False)
    _cache: dict[tuple[str, str], tuple[Any, RunStatus]] = field(default_factory=dict, init=False, repr=False)
    _names: dict[tuple[str, str], str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        paths = [self.paths] if isinstance(self.paths, (str, Path)) else list(self.paths)
        if not paths:
            raise BayesGRPOError("watch needs at least one log file or folder")
        self._targets = [_Target(Path(p), self.read) for p in paths]
        if self.smooth < 1:
            raise BayesGRPOError(f"smooth must be at least 1 (points averaged); got {self.smooth}")

    @property
    def followers(self) -> list[LogFollower]:
        return [f for target in self._targets for f in target.followers.values()]

    @property
    def live(self) -> LiveForecaster:
        """The live forecaster (the population loaded on first use)."""
        if self._live is None:
            self._live = live_forecaster(self.population, self.random_seed)
        return self._live

    def poll(self) -> list[RunStatus]:
        """Read what changed, update what needs it, and say where every run stands.

        Returns
        -------
        list of RunStatus
            One per run (or per followed path with nothing readable yet), in the order of the
            paths given, then of discovery.
        """
        statuses: list[RunStatus] = []
        for target in self._targets:
            followers = target.refresh()
            if not followers:
                statuses.append(RunStatus(run_id=target.path.name, source=str(target.path), state="waiting",
                                          reason=target.message or "no log found yet"))
                continue
            for follower in followers:
                follower.poll()
                statuses.extend(self._statuses(follower))
        return statuses

    def _display_name(self, key: str, run_id: str) -> str:
        if (key, run_id) not in self._names:
            taken = set(self._names.values())
            name, n = run_id, 1
            while name in taken:
                n += 1
                name = f"{run_id}#{n}"
            self._names[(key, run_id)] = name
        return self._names[(key, run_id)]

    def _statuses(self, follower: LogFollower) -> list[RunStatus]:
        table = follower.table
        if table is None:
            name = self._display_name(follower.key, follower.source.run_id)
            state = "error" if follower.state == "error" else "waiting"
            return [RunStatus(run_id=name, source=follower.label, state=state, reason=follower.message)]
        out = []
        for run_id in table.run_ids:
            name = self._display_name(follower.key, run_id)
            status = self._run_status(follower, table.select([run_id]), name)
            if follower.state == "error":  # shown from the last good read
                status = replace(status, reason=f"{status.reason} [last read failed: {follower.message}]")
            out.append(status)
        return out

    def _horizon_of(self, run: RunsTable) -> float | None:
        if self.horizon is not None:
            return float(self.horizon)
        return _finite_or_none(run.runs["total_steps"].iloc[0]) if "total_steps" in run.runs.columns else None

    def _run_status(self, follower: LogFollower, run: RunsTable, name: str) -> RunStatus:
        points = run.points[np.isfinite(run.points["reward"].to_numpy(dtype=float))]
        horizon = self._horizon_of(run)
        key = (follower.key, name)
        fingerprint = (_fingerprint(points), horizon, follower.state)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == fingerprint:
            return RunStatus(**{**asdict(cached[1]), "updated": False, "seconds": 0.0})
        status = self._compute(run, points, horizon, name, follower)
        self._cache[key] = (fingerprint, status)
        return status

    def _compute(self, run: RunsTable, points: pd.DataFrame, horizon: float | None, name: str, follower: LogFollower) -> RunStatus:
        from bayesgrpo.questions.stopping import prob_gain_below, reward_at

        start = time.perf_counter()
        rewards = points["reward"].to_numpy(dtype=float)
        base = {
            "run_id": name,
            "source": follower.label,
            "n_steps": len(points),
            "step": _finite_or_none(points["step"].max()) if len(points) else None,
            "reward_now": float(rewards[-self.smooth :].mean()) if len(rewards) else None,
            "horizon_step": horizon,
            "updated": True,
        }
        if not len(points):
            return RunStatus(**base, state="waiting", reason="no reward logged yet")
        if horizon is None:
            return RunStatus(**base, state="no_horizon", reason="no horizon: pass --horizon (the log states no total steps)")
        step = float(base["step"])
        if step > horizon:
            return RunStatus(**base, state="error", reason=f"step {step:g} is past the horizon {horizon:g}; pass a larger --horizon")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                update = self.live.update(run, horizon=horizon)
            draws = update.curve_draws
            final = reward_at(draws, np.array([horizon]))[:, 0, 0]
            tail = (1 - INTERVAL) / 2
            lower, median, upper = np.quantile(final, [tail, 0.5, 1 - tail])
            p_plateau = float(prob_gain_below(draws, step, horizon, eps=self.eps, relative=self.relative)[0])
            decision = self.rule.decide(draws, step, horizon)[0]
        except (BayesGRPOError, ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
            logger.warning("watch: no forecast for %s: %s", name, exc)
            return RunStatus(**base, state="error", reason=_short(exc), seconds=time.perf_counter() - start)
        reason = decision.reason
        unreliable = [str(w.message) for w in caught if "unreliable" in str(w.message)]
        if unreliable:
            reason += f" [live update unreliable: Pareto k {update.posterior.pareto_k:.2f}]"
        return RunStatus(
            **base,
            state="ok",
            final_median=float(median),
            final_lower=float(lower),
            final_upper=float(upper),
            p_plateau=p_plateau,
            decision=decision.decision,
            reason=reason,
            seconds=time.perf_counter() - start,
            pareto_k=float(update.posterior.pareto_k),
        )


# --------------------------------------------------------------------------------------------
# Rendering (no logic: statuses in, text out)
# --------------------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def render_table(statuses: Sequence[RunStatus], *, title: str | None = None) -> Table:
    """A ``rich`` table with one row per run."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("run", overflow="fold", max_width=40)
    table.add_column("steps", justify="right")
    table.add_column("step / horizon", justify="right")
    table.add_column("reward now", justify="right")
    table.add_column(f"final reward [{INTERVAL:.0%}]", justify="right")
    table.add_column("P(plateau)", justify="right")
    table.add_column("advice")
    table.add_column("reason", overflow="fold", ratio=1)
    for s in statuses:
        if s.state == "ok":
            advice = "[bold red]STOP[/]" if s.decision == "stop" else "[green]continue[/]"
            final = f"{_num(s.final_median)} [{_num(s.final_lower)}, {_num(s.final_upper)}]"
        else:
            advice = f"[dim]{s.state}[/]"
            final = "-"
        where = "-" if s.step is None else f"{s.step:g} / {_num(s.horizon_step, 6)}"
        # text from logs and messages is escaped: "[live update unreliable: ...]" is not markup
        table.add_row(escape(s.run_id), str(s.n_steps), where, _num(s.reward_now), escape(final), _num(s.p_plateau, 2),
                      advice, escape(s.reason or ""))
    return table


def poll_json(statuses: Sequence[RunStatus], *, poll: int, seconds: float) -> str:
    """One poll as one line of JSON."""
    payload = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "poll": poll, "seconds": round(seconds, 4),
               "runs": [s.to_dict() for s in statuses]}
    return json.dumps(payload, default=str)


def run(
    watcher: Watcher,
    *,
    interval: float = 5.0,
    once: bool = False,
    as_json: bool = False,
    stream: TextIO | None = None,
    max_polls: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Poll and show: one table (``once``), a live-redrawn table, or one JSON line per poll.

    Stops after ``max_polls`` polls (None: until interrupted with Ctrl-C). Returns the exit code.
    """
    from rich.console import Console
    from rich.live import Live

    stream = stream or sys.stdout
    limit = 1 if once else max_polls
    rule = f"rule: {watcher.rule}; P(plateau) = P(gain to the horizon < {watcher.eps:g}"
    rule += " of the reward range)" if watcher.relative else ")"
    # a pipe or a file has no width: wide enough that a row stays on one line
    console = Console(file=stream, width=None if stream.isatty() else 200)
    live = None if (once or as_json) else Live(console=console, auto_refresh=False)
    count = 0
    try:
        if live is not None:
            live.start()
        while limit is None or count < limit:
            start = time.perf_counter()
            statuses = watcher.poll()
            count += 1
            seconds = time.perf_counter() - start
            title = f"bayesgrpo watch - {time.strftime('%H:%M:%S')} - poll {count} ({seconds * 1000:.0f} ms) - {rule}"
            if as_json:
                stream.write(poll_json(statuses, poll=count, seconds=seconds) + "\n")
                stream.flush()
            elif live is not None:
                live.update(render_table(statuses, title=title), refresh=True)
            else:
                console.print(render_table(statuses, title=title))
            if limit is None or count < limit:
                sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()
    return 0


def main_from_args(args: Any, rule: StoppingRule) -> int:
    """``bayesgrpo watch`` (the CLI parses its arguments and builds the rule)."""
    if args.interval <= 0:
        raise BayesGRPOError(f"--interval must be positive (seconds between polls); got {args.interval:g}")
    watcher = Watcher(
        args.paths,
        rule=rule,
        population=args.population,
        horizon=args.horizon,
        eps=args.eps,
        relative=not args.absolute,
        smooth=args.smooth,
        read=ReadSettings(format=args.format, reward=args.reward, metadata=args.metadata, logging_steps=args.logging_steps),
        random_seed=args.seed,
    )
    return run(watcher, interval=args.interval, once=args.once, as_json=args.json, max_polls=args.polls)


__all__ = [
    "FileStamp",
    "LogFollower",
    "ReadSettings",
    "RunStatus",
    "Watcher",
    "live_forecaster",
    "merge_generations",
    "poll_json",
    "render_table",
    "run",
    "source_key",
]
