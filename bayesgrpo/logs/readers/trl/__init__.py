r"""TRL / transformers logs: ``trainer_state.json`` and the console's dict lines.

``trainer_state.json``
    Written by ``transformers.TrainerState.save_to_json`` (``json.dumps(state, indent=2,
    sort_keys=True)``) in the output folder and in every ``checkpoint-N/``. Its ``log_history``
    is a list of dicts, one per ``Trainer.log`` call, each with the ``step``
    (``state.global_step``) added: training rows (``loss``, ``grad_norm``, ``learning_rate``,
    TRL's ``reward``, ``reward_std``, ``rewards/<func>/mean``, ``kl``, ``entropy``,
    ``completions/mean_length``... and ``epoch``), evaluation rows (``eval_*`` keys), and once
    training ends a summary row (``train_runtime``, ``train_loss``, ``total_flos``...). The file
    is rewritten whole at every save: a reader can catch it cut mid-way. Complete entries are
    then salvaged one by one and the cut is reported.

TRL console
    ``transformers.ProgressCallback.on_log`` writes ``str(logs)`` for every log call:
    ``{'loss': 0.0012, 'grad_norm': 0.5, 'learning_rate': 4e-06, 'reward': 0.25, ...,
    'epoch': 0.02}`` (recent versions write every float as text with 4 significant digits:
    ``{'loss': '0.0012', ...}``), between tqdm progress bars (``\\r`` redraws). The lines carry no
    step: the k-th training line is step ``k * logging_steps``. Evaluation dicts (``eval_*``
    keys) belong to the step of the training line before them; the final summary dict
    (``train_runtime``...) goes to the run's metadata. Lines are parsed as Python literals,
    never evaluated.

Both formats may show the trainer's start banner (transformers' ``***** Running training
*****`` block, or Unsloth's ``Num examples = 7,473 | Num Epochs = 1 ...``): what it states
becomes metadata (``BannerParser``, shared with the notebook reader).
"""

from __future__ import annotations

from bayesgrpo.logs.readers.trl.columns import TRL_ALIASES, TRL_REWARD_CANDIDATES, ColumnStore
from bayesgrpo.logs.readers.trl.console import find_dict, parse_dict_line, read_trl_console
from bayesgrpo.logs.readers.trl.metadata import BannerParser
from bayesgrpo.logs.readers.trl.state import FiledHistory, history_store, read_trainer_state

__all__ = [
    "BannerParser",
    "ColumnStore",
    "FiledHistory",
    "TRL_ALIASES",
    "TRL_REWARD_CANDIDATES",
    "find_dict",
    "history_store",
    "parse_dict_line",
    "read_trainer_state",
    "read_trl_console",
]
