"""What every reader is given: the :class:`Source` it reads and the :class:`ReadOptions`.

Format modules import this module, never the package's ``__init__``, so that
:mod:`bayesgrpo.logs.readers.load`, which dispatches to them, sits above them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bayesgrpo.logs.readers._records import RawRun

PathLike = str | Path


@dataclass(frozen=True)
class ReadOptions:
    """Options every reader receives.

    Attributes
    ----------
    reward : str, optional
        The metric to forecast (its name in the log, or a canonical name). Default: the
        format's usual train reward (``critic/score/mean`` for verl, ``reward`` for TRL).
    strict : bool
        Raise at the first record that would be dropped or repaired.
    columns : mapping, optional
        For plain tables: canonical name -> the table's column, e.g.
        ``{"step": "global_step", "reward": "score", "run_id": "name"}``.
    logging_steps : int, optional
        For TRL console logs (no step key): step = (index + 1) * logging_steps. Default 1.
    run_id : str, optional
        Name for the run of a single-run file (default: derived from the path).
    """

    reward: str | None = None
    strict: bool = False
    columns: Mapping[str, str] | None = None
    logging_steps: int | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class Source:
    """One unit a reader reads: a file, a folder's TensorBoard event files, or a tracker's URI."""

    format: str
    paths: tuple[Path, ...]
    run_id: str
    reward: str | None = None
    #: A source that is not a file: an ``mlflow:`` URI (``paths`` is then empty).
    uri: str | None = None

    @property
    def label(self) -> str:
        """The file read, the folder of a TensorBoard run's event files, or the URI."""
        if self.uri is not None:
            return self.uri
        if len(self.paths) == 1:
            return str(self.paths[0])
        return str(self.paths[0].parent)


ReaderFunction = Callable[[Source, ReadOptions], list[RawRun]]
