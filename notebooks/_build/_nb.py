"""Write a notebook from a list of cells and run it with full settings (helper of make_0*.py).

A cell is ``("md", text)`` or ``("code", source)``. A generator calls ``main(CELLS, name)``: the
notebook is built (:func:`notebook`) and written to ``notebooks/<name>``; with ``--execute`` it is
first run in a kernel by nbclient with ``BAYESGRPO_NOTEBOOK_FAST`` unset (:func:`execute`), and
written with its outputs: the committed file.
"""

from __future__ import annotations

import argparse
import logging
import os
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat

logger = logging.getLogger(__name__)

NOTEBOOKS = Path(__file__).resolve().parents[1]
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python", "pygments_lexer": "ipython3"},
}


def notebook(cells: Sequence[tuple[str, str]]) -> nbformat.NotebookNode:
    """The notebook of ``cells`` (sources dedented and stripped), without outputs."""
    made = []
    for kind, text in cells:
        source = textwrap.dedent(text).strip("\n")
        if kind == "md":
            made.append(nbformat.v4.new_markdown_cell(source))
        elif kind == "code":
            made.append(nbformat.v4.new_code_cell(source))
        else:
            raise ValueError(f"cell kind must be 'md' or 'code'; got {kind!r}")
    nb = nbformat.v4.new_notebook(cells=made, metadata=METADATA)
    nbformat.validate(nb)
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = 3600) -> float:
    """Run ``nb`` in place in a python3 kernel started in notebooks/; returns seconds taken."""
    import nbclient

    start = time.perf_counter()
    nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    return time.perf_counter() - start


def with_outputs_of(nb: nbformat.NotebookNode, executed: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The executed notebook with the markdown of ``nb``: for a change of the text alone.

    Cell ids, outputs and execution metadata stay those of ``executed``, whose cells must be
    ``nb``'s cells in kind and order, with the same code.

    Raises
    ------
    ValueError
        When the cells differ in number, kind or code (the outputs would not be those of the
        code shown).
    """
    same = len(nb.cells) == len(executed.cells) and all(
        new.cell_type == old.cell_type and (new.cell_type != "code" or new.source == old.source)
        for new, old in zip(nb.cells, executed.cells)
    )
    if not same:
        raise ValueError("cells differ from the executed notebook beyond their markdown: run it again with --execute")
    for new, old in zip(nb.cells, executed.cells):
        if new.cell_type == "markdown":
            old.source = new.source
    return executed


def main(cells: Sequence[tuple[str, str]], name: str, argv: Sequence[str] | None = None) -> None:
    """Command line of a generator: write ``notebooks/<name>`` without outputs; with ``--execute``
    run it first with full settings (the committed file), with ``--execute --fast`` with
    ``BAYESGRPO_NOTEBOOK_FAST=1`` (to try it out: never commit those outputs)."""
    parser = argparse.ArgumentParser(description=f"write notebooks/{name}")
    parser.add_argument("--execute", action="store_true", help="run it and keep the outputs")
    parser.add_argument("--fast", action="store_true", help="with --execute: BAYESGRPO_NOTEBOOK_FAST=1")
    parser.add_argument(
        "--text-only",
        action="store_true",
        help="rewrite the markdown of the committed notebook, keeping its outputs (code cells must be unchanged)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    nb = notebook(cells)
    path = NOTEBOOKS / name
    if args.text_only:
        nbformat.write(with_outputs_of(nb, nbformat.read(path, as_version=4)), path)
        logger.info("rewrote the markdown of %s, outputs kept", path)
        return
    if args.execute:
        if args.fast:
            os.environ["BAYESGRPO_NOTEBOOK_FAST"] = "1"
        else:
            os.environ.pop("BAYESGRPO_NOTEBOOK_FAST", None)
        try:
            seconds = execute(nb)
        finally:  # a failed run is written too, with its traceback, to be read
            nbformat.write(nb, path)
        logger.info("executed %s in %.0f s (%s settings)", name, seconds, "fast" if args.fast else "full")
    nbformat.write(nb, path)
    logger.info("wrote %s (%.0f kB)", path, path.stat().st_size / 1024)
