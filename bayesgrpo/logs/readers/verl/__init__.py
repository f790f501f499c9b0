r"""verl logs: the console (``step:12 - critic/score/mean:0.41 - ...``) and the file logger's JSONL.

What verl prints
----------------
verl's console logger (``verl/utils/logger/aggregate_logger.py``: ``LocalLogger.log`` ->
``concat_dict_to_str``, used by ``verl/utils/tracking.py`` when ``trainer.logger`` includes
``'console'``) prints, for each ``Tracking.log(data=metrics, step=global_steps)`` call, the
numbers of the dict joined by ``" - "``::

    step:<step> - <name>:<value> - <name>:<value> - ...

``<value>`` is ``f"{v:.3f}"`` in verl up to mid 2025 and ``pprint.pformat(v)`` after: the full
repr, which for numpy >= 2 scalars reads ``np.float64(0.41)`` or ``np.int64(3)``, and for a
``bool`` ``True``. The trainer runs in a Ray actor, so each line starts with Ray's prefix, often
coloured: ``\\x1b[36m(TaskRunner pid=678203)\\x1b[0m `` (``main_task`` in late-2024 verl; ``\\x1b[2m``
dims some). Validation is logged at step 0 on its own line before training (``val_before_train``)
and merged into the line of every ``test_freq``-th step. Metric names seen in verl's source and
the bundled logs: ``critic/score/mean`` (the train reward), ``critic/rewards/mean`` (reward after
a KL penalty), ``actor/entropy`` (older: ``actor/entropy_loss``, which is the mean entropy too),
``actor/kl_loss`` / ``actor/reward_kl_penalty`` / ``critic/kl``, ``response_length/mean``,
``actor/lr`` (older ``actor/lr(1e-4)``, in units of 1e-4, kept under its own name),
``training/epoch``, and validation: ``test_score/<dataset>`` (late-2024 step 0),
``val/test_score/<dataset>`` (late 2024 - early 2025), ``val-core/<dataset>/<var>/mean@<n>`` and
``val-aux/...`` (2025, ``<var>`` is ``acc`` if the reward function returns one, else ``reward``).

How lines are read
------------------
* A *step line* is a line that, once ANSI codes and an optional logging prefix are set aside
  (a Ray prefix ``(... pid=N ...)``, a timestamp, a level, a rank tag:
  ``bayesgrpo.logs.readers._prefix``; and anything before a carriage return, as a progress bar
  leaves), starts with ``step:``. Every step line is a record (``records_read``); every other
  line is not (config dumps, warnings, model outputs, tracebacks, binary noise: the file is
  decoded as UTF-8 with undecodable bytes replaced), and one that looks like a step line after
  other text is reported (``unread_step_line``). Line numbers count ``\\n`` only, as editors do.
  A line past ``MAX_LINE_BYTES`` or ``MAX_METRICS_PER_LINE`` metrics is an error
  (``bayesgrpo.logs.readers._limits``).
* Fields are split at ``" - "``; each is ``<name>:<value>`` split at its *last* colon (verl's
  values never hold a colon or ``" - "``). A chunk with no colon is the start of a name that
  itself contains ``" - "`` and is joined to the next chunk (reported as ``info``); a trailing
  chunk with no colon, or an empty name or value, is a malformed field: ignored and reported.
* Values: plain numbers (``nan``, ``inf`` included), ``np.float64(x)``-style wrappers and
  ``True``/``False`` become floats; anything else is passed on as the text written, for
  ``tidy_run`` to report. Steps are passed on as written when they are not whole numbers.
* A file that does not end with a newline was cut while being written (``print`` always ends
  the line): if its last line is a step line, its last field may be cut mid-value, so it is
  dropped and reported; a cut line with no complete field is dropped as a record.
* The same step on several lines (validation-only step 0 and train step 0 in late-2024 logs, or a
  resumed run printing steps again) is left to ``tidy_run``: merged, the latest value winning.

Run metadata (only what the log states)
---------------------------------------
From the resolved config verl pretty-prints before training (reassembled from its prefixed
lines and read with ``ast.literal_eval``; the latest dump wins): ``group_size`` =
``actor_rollout_ref.rollout.n``, ``batch_size`` = ``data.train_batch_size``, ``num_epochs`` =
``trainer.total_epochs``, ``learning_rate`` = ``actor_rollout_ref.actor.optim.lr``, ``model`` =
``actor_rollout_ref.model.path`` (a Hugging Face cache path ``models--Org--Name/snapshots/...`` is
written ``Org/Name``), ``algorithm`` = ``algorithm.adv_estimator`` as written (``gae`` for PPO,
``grpo``, ``gpg``...). Where no config dump parses, the same keys are read from a Hydra command
line (a line with at least two ``a.b=c`` overrides; the last value wins). ``total_steps`` from
verl's ``Total training steps: N``, else ``trainer.total_training_steps`` when positive, else the
LR scheduler's ``Total steps: N, num_warmup_steps`` (late-2024 workers); ``steps_per_epoch`` from
``Size of train dataloader: N``.

verl's file logger (``verl-jsonl``)
-----------------------------------
With ``trainer.logger`` including ``'file'``, verl's ``Tracking`` (``verl/utils/tracking.py``,
``FileLogger``) writes one line per ``log(data=metrics, step=global_steps)`` call to
``$VERL_FILE_LOGGER_PATH``, by default ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl``
(root ``.``)::

    {"step": 12, "data": {"critic/score/mean": 0.41, "actor/entropy": 0.35, ...}}

``json.dumps`` in earlier versions (NaN written ``NaN``, buffered writes: a line can be cut
anywhere while the run goes on), ``orjson`` with numpy support in later ones (compact, NaN and
infinities written ``null``, unbuffered). The file is opened with ``"w"``: a run resumed with
the same path starts the file again. The metric names are the console's, so the default reward
and the canonical names are the console's too. Each line is a record: a line that is not a JSON
object is dropped and reported (the last one, without line end, as ``truncated``), as is a
record without a ``data`` object; ``data`` is flattened (``flatten_metrics``); ``null`` values
are missing values (noted); the step, strings and repeated steps go through ``tidy_run`` as for
every format. A ``.jsonl`` file whose first line starts ``{"step": <N>, "data": {`` is detected
as ``verl-jsonl``, and the plain ``jsonl`` reader reads such records the same way (a file that
was empty when its format was detected).

Canonical names
---------------
``entropy``, ``kl``, ``completion_length``, ``loss`` (``actor/pg_loss``), ``learning_rate``
(``actor/lr``) and ``epoch`` alias the first of their verl names present. ``val_reward`` aliases
the main validation score when the log validates on exactly one dataset: the best of
``val-core/<ds>/acc/mean@<n>``, ``val-core/<ds>/reward/mean@<n>`` (largest ``n``), then
``val/test_score/<ds>`` and ``test_score/<ds>`` (one metric under two names in late-2024 logs:
step 0 and later steps), in that order of preference. With several datasets no ``val_reward``
is made: pass the metric's own name as ``reward=``. Every metric stays available under its own
name unless aliased.
"""

from __future__ import annotations

from bayesgrpo.logs.readers.verl.config import (
    CONFIG_FIELDS,
    metadata_from_config,
    model_name,
    parse_config_dump,
)
from bayesgrpo.logs.readers.verl.console import CHUNK_ROWS, read_verl_console
from bayesgrpo.logs.readers.verl.jsonl import flatten_metrics, is_verl_jsonl, read_verl_jsonl, verl_jsonl_run
from bayesgrpo.logs.readers.verl.lines import (
    ALIAS_CANDIDATES,
    FORMAT,
    JSONL_FORMAT,
    REWARD_CANDIDATES,
    is_step_line,
    looks_like_verl_console,
    metric_aliases,
    parse_fields,
    parse_value,
    parse_values,
    split_fields,
    validation_aliases,
)

__all__ = [
    "ALIAS_CANDIDATES",
    "CHUNK_ROWS",
    "CONFIG_FIELDS",
    "FORMAT",
    "JSONL_FORMAT",
    "REWARD_CANDIDATES",
    "flatten_metrics",
    "is_step_line",
    "is_verl_jsonl",
    "looks_like_verl_console",
    "metadata_from_config",
    "metric_aliases",
    "model_name",
    "parse_config_dump",
    "parse_fields",
    "parse_value",
    "parse_values",
    "read_verl_console",
    "read_verl_jsonl",
    "split_fields",
    "validation_aliases",
    "verl_jsonl_run",
]
