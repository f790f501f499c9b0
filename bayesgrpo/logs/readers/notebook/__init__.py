"""Jupyter notebooks (``.ipynb``) holding a transformers training progress table.

In a notebook, transformers' ``NotebookProgressCallback`` shows training as one HTML output
(``display_data``, ``text/html``) that it keeps updating: a ``<progress value='250'
max='250'>`` bar labelled ``[250/250 1:40:29, Epoch 0/1]``, then a ``<table>`` whose header is
``Step``, ``Training Loss`` and (with Unsloth's patch, used by TRL notebooks) every TRL metric
with ``/`` written `` / `` (``rewards / correctness_reward_func``); values are printed with 6
decimals, and a metric missing from a log call reads ``No Log``. The saved notebook holds the
table's last state. The trainer's start banner is in a stream output before it (transformers'
``***** Running training *****`` block or Unsloth's ``Num examples = 7,473 | Num Epochs = 1``).

The reader takes the last complete progress table of the notebook (others are earlier
displays or re-runs, reported), turns header names back into TRL's metric names, and reads
the banner, the progress bar and the notebook's own ``GRPOConfig(...)`` call into metadata.
Without a progress table it reads the trainer's console dicts printed into a cell's output
(newer TRL); without either, or when the table has no reward column (a training loss only), it
reads the ``Step 10 | reward: 1.570`` lines a callback printed, one a logged step
(:mod:`~bayesgrpo.logs.readers.notebook.printed`).
"""

from __future__ import annotations

from bayesgrpo.logs.readers.notebook.cells import NOTEBOOK_ALIASES
from bayesgrpo.logs.readers.notebook.code import CONFIG_METADATA, code_metadata
from bayesgrpo.logs.readers.notebook.reader import metric_name, read_notebook

__all__ = [
    "CONFIG_METADATA",
    "NOTEBOOK_ALIASES",
    "code_metadata",
    "metric_name",
    "read_notebook",
]
