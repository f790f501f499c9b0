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

from bayesgrpo.interfaces.watch.follow import (
    FileStamp,
    LogFollower,
    ReadSettings,
    merge_generations,
    source_key,
)
from bayesgrpo.interfaces.watch.terminal import main_from_args, poll_json, render_table, run
from bayesgrpo.interfaces.watch.watcher import RunStatus, Watcher
from bayesgrpo.questions.live import live_forecaster

__all__ = [
    "FileStamp",
    "LogFollower",
    "ReadSettings",
    "RunStatus",
    "Watcher",
    "main_from_args",
    "live_forecaster",
    "merge_generations",
    "poll_json",
    "render_table",
    "run",
    "source_key",
]
