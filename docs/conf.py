"""Sphinx configuration of bayesgrpo's documentation site.

Build it from the repository root (what ``.ci/run`` runs, warnings as errors)::

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

Pages are MyST markdown; the API reference is generated from the docstrings (autosummary, numpydoc);
the notebooks of ``notebooks/`` are rendered as committed, with their outputs (the slow test lane
executes them, the build does not). Before reading the sources the build writes ``docs/_generated/``:
the Results page from ``benchmarks/results/*.md`` (``docs/results.py``) and copies of the notebooks.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
GENERATED = DOCS / "_generated"
sys.path.insert(0, str(DOCS))

import results  # noqa: E402  (docs/results.py, found through the path set above)

from bayesgrpo import __version__  # noqa: E402


def copy_notebooks() -> None:
    """The notebooks of ``notebooks/`` copied under ``docs/_generated/notebooks`` (Sphinx reads
    sources under ``docs/`` only); a copy is rewritten only when its notebook changed.
    """
    target = GENERATED / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
    for stale in target.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for name, source in wanted.items():
        copy = target / name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            shutil.copyfile(source, copy)


results.write_page(GENERATED / "results.md")
copy_notebooks()

# -- project -----------------------------------------------------------------------------------

project = "bayesgrpo"
author = "the bayesgrpo authors"
copyright = "the bayesgrpo authors, Apache-2.0"  # noqa: A001  (Sphinx's own name for it)
version = release = __version__

# -- extensions ----------------------------------------------------------------------------------

extensions = [
    "myst_nb",  # MyST markdown pages and the .ipynb notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",  # the docstrings are numpydoc's format (ruff's pydocstyle, numpy convention)
]

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# MyST: ``:::`` fences for directives, anchors for headings (links such as ``stop.md#two-bands``).
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# The notebooks are committed executed; the slow test lane (tests/test_notebooks.py) runs them.
nb_execution_mode = "off"
# tqdm's notebook progress bars are widget views: without the widget state they render as nothing.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]

# -- API reference -------------------------------------------------------------------------------

autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # the numpydoc sections give the types; signatures stay readable
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}  # documented members only
numpydoc_show_class_members = False  # members are documented by autodoc's ``:members:``
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# The integrations subclass their framework's classes. A docs-only install (``.[docs]``) need not
# have them: autodoc then imports the module against stand-ins. CI installs them all.
autodoc_mock_imports = [
    name for name in ("transformers", "trl", "optuna", "torch") if importlib.util.find_spec(name) is None
]

# -- HTML ----------------------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"bayesgrpo {version}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]  # a wider article for the code blocks
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"changelog": [], "_generated/results": []}  # single pages: no section navigation


def hide_private_parameters(app, what, name, obj, options, signature, return_annotation):
    """A signature without its private parameters (a dataclass's ``_cache`` fields, say): they are
    no part of the API, and their defaults print as ``<factory>``.
    """
    if signature:
        signature = re.sub(r",\s*_\w+=[^,)]*", "", signature)
    return signature, return_annotation


def setup(app):
    """Sphinx's hook for this configuration's own event handlers."""
    app.connect("autodoc-process-signature", hide_private_parameters)
