"""TensorBoard event files (``events.out.tfevents.*``): one folder of event files is one run.

What writes them: verl (``trainer.logger=['tensorboard']``) and the transformers/TRL
``TensorBoardCallback`` both call ``torch.utils.tensorboard.SummaryWriter.add_scalar``, which
writes one ``Event`` per value through tensorboard's ``EventFileWriter``: legacy
``simple_value`` summaries by default, a ``tensor`` with one ``float_val`` with
``new_style=True``. TensorFlow 2's ``tf.summary.scalar`` writes a scalar tensor whose bytes are
in ``tensor_content``. All three are read, in any float (or integer) dtype.

File layout (TFRecord): each record is ``uint64 length``, ``uint32 masked crc32c(length)``,
``length`` bytes of a serialised ``tensorboard.Event``, ``uint32 masked crc32c(data)``.
Records are framed here and each payload is decoded by tensorboard's compiled protos
(``tensorboard.compat.proto.event_pb2.Event.FromString``), because tensorboard's own loader
(``event_file_loader``) stops silently at a torn or corrupted record (``DataLossError`` ->
``break``), and, without TensorFlow, checks checksums in pure Python: measured on a 203 MB
file of 3.7 million events, its ``LegacyEventFileLoader`` parses about 75,000 events per CPU
second, this reader about 330,000 (checksums verified, scalars collected).
Both checksums of every record are verified; a record that fails is reported, never used:

- a torn last record (the file ends mid-record: written while being read, or cut): dropped,
  reported with its byte offset (``TruncatedLogError`` when ``strict``);
- a payload whose checksum does not match: that record dropped, reading goes on with the
  next record (its length was intact);
- a length whose checksum does not match: the bytes from there to the next valid record
  are skipped and reported (reading resynchronises), or, if no valid record follows, the
  rest of the file is reported as skipped;
- a file with no valid record at all (not an event file): ``LogReadError`` if it is the
  run's only file, otherwise reported and dropped;
- an empty file: ``EmptyLogError`` if it is the run's only file, otherwise noted.

Records are the scalar values: one long-form record per (event, tag) value, with
``_loc`` the event's number in the run (the decoded events of the run's files numbered from 1
in reading order, each file's ``file_version`` event included), so ``location_label`` is
``"event"``; records dropped by the reader are located by file and byte offset.
Histograms, images, audio, text, graphs and other non-scalar data are not records; they are
counted and listed in one ``info`` issue. The files of a folder are read in the order of the
timestamp in their names (``events.out.tfevents.<unix time>.<host>...``); steps logged again
by a later file (a resumed run) are left to ``tidy_run`` (latest wins).

Metadata: TRL/transformers write ``TrainingArguments`` (``args/text_summary``) and the model
configuration (``model_config/text_summary``) as text summaries; what they state (learning
rate, ``num_generations``, ``max_steps``, ``logging_steps``, epochs, model name) goes into the
run's metadata. verl writes no configuration to TensorBoard.
"""

from __future__ import annotations

from bayesgrpo.logs.readers.tensorboard.crc import masked_crc32c
from bayesgrpo.logs.readers.tensorboard.reader import REWARD_CANDIDATES, read_tensorboard, tensorboard_aliases
from bayesgrpo.logs.readers.tensorboard.records import event_file_order, tensor_scalar

__all__ = [
    "REWARD_CANDIDATES",
    "event_file_order",
    "masked_crc32c",
    "read_tensorboard",
    "tensor_scalar",
    "tensorboard_aliases",
]
