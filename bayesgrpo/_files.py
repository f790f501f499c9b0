"""Files written whole or not at all: the old file or the new one, never neither, never half.

A file the package writes over (a saved model, its live summary) is written to a temporary file
in the same folder, flushed to disk, then renamed over the target (``os.replace``, atomic within
one file system), and the folder is flushed too so that the rename itself survives a crash. A
process killed at any moment leaves the target as it was before, or as it is after; at worst a
hidden ``.<name>.<random>.partial`` file beside it. Importable from every layer (it imports
nothing of the package).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

#: A temporary file's name keeps the target's name where it is short enough to read, so that a
#: leftover of a killed save says what it was; longer names would pass a file system's 255 bytes.
_NAME_KEPT_BYTES = 160


def _fsync_file(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (the rename); a platform without folder descriptors skips it."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # Windows opens no folder
        return
    try:
        os.fsync(descriptor)
    except OSError:  # some file systems refuse to sync a folder
        pass
    finally:
        os.close(descriptor)


def temporary_path(target: Path) -> Path:
    """A fresh hidden name beside ``target`` for the file that will replace it.

    Parameters
    ----------
    target : Path

    Returns
    -------
    Path
        ``.<target name>.<random hex>.partial`` in the target's folder (the target's name left out
        where it is long).
    """
    name = target.name if len(target.name.encode("utf-8")) <= _NAME_KEPT_BYTES else "bayesgrpo"
    return target.with_name(f".{name}.{secrets.token_hex(6)}.partial")


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """A temporary path to write in full; when the block ends without error it replaces ``target``.

    The writer creates the file at the path it is given (so it gets the permissions a new file
    gets); on leaving the block the file is synced, renamed over ``target`` and the folder synced.
    An error in the block removes the temporary file and leaves ``target`` untouched.

    Parameters
    ----------
    target : str or Path
        The file to write (or replace).

    Yields
    ------
    Path
        Where to write the new file.

    Examples
    --------
    >>> with atomic_path("model.nc") as partial:  # doctest: +SKIP
    ...     dataset.to_netcdf(partial)
    """
    target = Path(target)
    partial = temporary_path(target)
    try:
        yield partial
        _fsync_file(partial)
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    _fsync_folder(target.parent)


def atomic_write_bytes(target: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically (:func:`atomic_path`).

    Parameters
    ----------
    target : str or Path
    data : bytes

    Returns
    -------
    Path
        ``target``.
    """
    with atomic_path(target) as partial:
        partial.write_bytes(data)
    return Path(target)


def atomic_write_text(target: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``target`` atomically (:func:`atomic_path`).

    Parameters
    ----------
    target : str or Path
    text : str
    encoding : str

    Returns
    -------
    Path
        ``target``.
    """
    return atomic_write_bytes(target, text.encode(encoding))
