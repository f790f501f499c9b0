"""Old import paths of modules that moved into the layer folders, kept working.

Until 0.x the modules sat side by side at the top of the package (``bayesgrpo.stopping``,
``bayesgrpo.live``, ...). They now live in the folder of their layer (``docs/ARCHITECTURE.md``).
``import bayesgrpo.stopping`` and ``from bayesgrpo.stopping import PlateauRule`` still work: a
finder on ``sys.meta_path`` answers an old name with the module at its new path (the same module
object, so classes and module state are shared) and warns once with a ``DeprecationWarning``
naming the new path. ``python -m bayesgrpo.<old path>`` runs the new module's code.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import CodeType, ModuleType

#: Old dotted path -> the path of the same module now.
MOVED_MODULES: dict[str, str] = {
    "bayesgrpo.table": "bayesgrpo.logs.table",
    "bayesgrpo.report": "bayesgrpo.logs.report",
    "bayesgrpo.readers": "bayesgrpo.logs.readers",
    "bayesgrpo.writers": "bayesgrpo.logs.writers",
    "bayesgrpo.curves": "bayesgrpo.model.curves",
    "bayesgrpo.simulate": "bayesgrpo.model.simulate",
    "bayesgrpo.datasets": "bayesgrpo.model.datasets",
    "bayesgrpo.live": "bayesgrpo.questions.live",
    "bayesgrpo.stopping": "bayesgrpo.questions.stopping",
    "bayesgrpo.transfer": "bayesgrpo.questions.transfer",
    "bayesgrpo.diagnostics": "bayesgrpo.questions.diagnostics",
    "bayesgrpo.history": "bayesgrpo.questions.history",
    "bayesgrpo.shrinkage": "bayesgrpo.questions.shrinkage",
    "bayesgrpo.plotting": "bayesgrpo.interfaces.plotting",
    "bayesgrpo.html_report": "bayesgrpo.interfaces.html_report",
    "bayesgrpo.cli": "bayesgrpo.interfaces.cli",
    "bayesgrpo.watch": "bayesgrpo.interfaces.watch",
}


def new_path(old: str) -> str | None:
    """The current dotted path of a module imported by its old path, or None if it did not move.

    Submodules of a moved package move with it: ``bayesgrpo.readers.trl`` is
    ``bayesgrpo.logs.readers.trl``.
    """
    for prefix, target in MOVED_MODULES.items():
        if old == prefix or old.startswith(prefix + "."):
            return target + old[len(prefix) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the already imported module at its new path."""

    def __init__(self, old: str, target: str) -> None:
        self.old = old
        self.target = target
        self.target_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{self.old} moved to {self.target}; import it from there (the old path will be removed)",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.target)
        self.target_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already executed.

        The import system has just set the module's ``__spec__`` to the old name's spec: the
        module keeps the spec of its own path.
        """
        module.__spec__ = self.target_spec

    def get_code(self, fullname: str) -> CodeType | None:
        """The new module's code, for ``python -m`` with an old path."""
        spec = importlib.util.find_spec(self.target)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "get_code"):
            return None
        return loader.get_code(self.target)


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds old module paths of bayesgrpo and hands them to :class:`_AliasLoader`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        moved = new_path(fullname)
        if moved is None:
            return None
        target_spec = importlib.util.find_spec(moved)
        if target_spec is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(fullname, moved), origin=target_spec.origin
        )


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once per process.

    First, because the path finder would otherwise load ``bayesgrpo.readers.trl`` a second time
    from the folder of the package that ``bayesgrpo.readers`` stands for.
    """
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
