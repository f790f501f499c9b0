r"""Write TRL/transformers logs: ``trainer_state.json`` and the console's dict lines.

``trainer_state.json`` is what ``transformers.TrainerState.save_to_json`` writes:
``json.dumps(dataclasses.asdict(state), indent=2, sort_keys=True) + "\\n"``, with every field of
the ``TrainerState`` dataclass (transformers >= 4.47) and ``log_history`` entries as
``Trainer.log`` appends them: the logged values plus ``"step": global_step``. Python's ``json``
writes non-finite floats as ``NaN``/``Infinity``, as the trainer does.

The console lines are what ``transformers.ProgressCallback.on_log`` writes through
``tqdm.write``: ``str(logs)`` without ``total_flos``, the epoch rounded to 2 decimals
(``number_format="repr"``, transformers up to 4.5x), or every float as text with 4 significant
digits (``number_format="4g"``, newer transformers). With ``progress=True`` tqdm's bar redraws
(``\\r``) surround them, as in a captured terminal.

Points are a DataFrame (``step`` column, one column per metric; NaN cells are not logged) or an
iterable of mappings (written as given, NaN included).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal, TypeAlias

import pandas as pd

PointsLike: TypeAlias = "pd.DataFrame | Iterable[Mapping[str, Any]]"
NumberFormat = Literal["repr", "4g"]

#: What ``TrainerControl`` saves into ``stateful_callbacks`` at the end of training.
_CONTROL_STATE: dict[str, Any] = {
    "TrainerControl": {
        "args": {
            "should_epoch_stop": False,
            "should_evaluate": False,
            "should_log": False,
            "should_save": True,
            "should_training_stop": True,
        },
        "attributes": {},
    }
}


def point_records(points: PointsLike | None) -> list[dict[str, Any]]:
    """Points as a list of dicts (DataFrame NaN cells left out), in the order given."""
    if points is None:
        return []
    if isinstance(points, pd.DataFrame):
        out = []
        for row in points.to_dict(orient="records"):
            out.append({k: _plain(v) for k, v in row.items() if not _is_missing(v)})
        return out
    return [{k: _plain(v) for k, v in dict(p).items()} for p in points]


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _plain(value: Any) -> Any:
    """Numpy scalars as Python numbers (what ``.item()`` gives the trainer)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (ValueError, TypeError):
            return value
    return value


def _step_of(record: Mapping[str, Any], index: int, logging_steps: int) -> int:
    step = record.get("step")
    if step is None:
        return (index + 1) * logging_steps
    return int(step)


def _epoch(step: int, max_steps: int | None, num_train_epochs: float) -> float:
    if not max_steps:
        return 0.0
    return num_train_epochs * step / max_steps


def _log_entry(record: Mapping[str, Any], step: int, epoch: float) -> dict[str, Any]:
    """One ``Trainer.log`` call: the values, ``epoch`` (added last if absent), then ``step``."""
    entry = {k: v for k, v in record.items() if k != "step"}
    if "epoch" not in entry:
        entry["epoch"] = epoch
    entry["step"] = step
    return entry


def _summary_entry(summary: Mapping[str, Any], step: int, epoch: float) -> dict[str, Any]:
    """The row ``Trainer.train`` logs at the end (speed metrics, total_flos, train_loss)."""
    entry = {
        "train_runtime": 1.0,
        "train_samples_per_second": 1.0,
        "train_steps_per_second": 1.0,
        "total_flos": 0.0,
        "train_loss": 0.0,
    }
    entry.update(summary)
    entry.setdefault("epoch", epoch)
    entry["step"] = step
    return entry


def log_history(
    points: PointsLike,
    *,
    eval_points: PointsLike | None = None,
    summary: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    logging_steps: int = 1,
    num_train_epochs: float = 1.0,
) -> list[dict[str, Any]]:
    """The ``log_history`` entries of a run, in the order the trainer appends them.

    Training rows in order; each evaluation row right after the training row of its step (the
    trainer logs, then evaluates); the summary row last. Rows without ``step`` get
    ``(index + 1) * logging_steps``; rows without ``epoch`` get ``step / max_steps *
    num_train_epochs``.
    """
    train = point_records(points)
    evals = point_records(eval_points)
    train_steps = [_step_of(r, i, logging_steps) for i, r in enumerate(train)]
    eval_steps = [_step_of(r, i, logging_steps) for i, r in enumerate(evals)]
    last = max(train_steps + eval_steps, default=0)
    max_steps = max_steps if max_steps is not None else last
    keyed: list[tuple[int, int, int, dict[str, Any]]] = []
    for i, (record, step) in enumerate(zip(train, train_steps, strict=True)):
        keyed.append((step, 0, i, _log_entry(record, step, _epoch(step, max_steps, num_train_epochs))))
    for i, (record, step) in enumerate(zip(evals, eval_steps, strict=True)):
        keyed.append((step, 1, i, _log_entry(record, step, _epoch(step, max_steps, num_train_epochs))))
    keyed.sort(key=lambda item: (item[0], item[1], item[2]))
    entries = [entry for _, _, _, entry in keyed]
    if summary is not None:
        entries.append(_summary_entry(summary, last, _epoch(last, max_steps, num_train_epochs)))
    return entries


def trainer_state(
    points: PointsLike,
    *,
    eval_points: PointsLike | None = None,
    summary: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    logging_steps: int = 1,
    eval_steps: int = 500,
    save_steps: int = 500,
    train_batch_size: int | None = 8,
    num_train_epochs: float = 1.0,
    best_metric: float | None = None,
) -> dict[str, Any]:
    """The ``TrainerState`` fields as ``dataclasses.asdict`` gives them (transformers >= 4.47)."""
    history = log_history(
        points,
        eval_points=eval_points,
        summary=summary,
        max_steps=max_steps,
        logging_steps=logging_steps,
        num_train_epochs=num_train_epochs,
    )
    steps = [entry["step"] for entry in history]
    global_step = max(steps, default=0)
    max_steps = max_steps if max_steps is not None else global_step
    epochs = [entry["epoch"] for entry in history if isinstance(entry.get("epoch"), (int, float))]
    return {
        "best_global_step": None,
        "best_metric": best_metric,
        "best_model_checkpoint": None,
        "epoch": epochs[-1] if epochs else None,
        "eval_steps": eval_steps,
        "global_step": global_step,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": history,
        "logging_steps": logging_steps,
        "max_steps": max_steps,
        "num_input_tokens_seen": 0,
        "num_train_epochs": num_train_epochs,
        "save_steps": save_steps,
        "stateful_callbacks": json.loads(json.dumps(_CONTROL_STATE)),
        "total_flos": float(summary.get("total_flos", 0.0)) if summary else 0.0,
        "train_batch_size": train_batch_size,
        "trial_name": None,
        "trial_params": None,
    }


def trainer_state_text(points: PointsLike, **kwargs: Any) -> str:
    """The text of ``trainer_state.json`` exactly as ``TrainerState.save_to_json`` writes it.

    Keyword arguments are those of ``trainer_state``.
    """
    return json.dumps(trainer_state(points, **kwargs), indent=2, sort_keys=True) + "\n"


def write_trainer_state(
    path: str | Path,
    points: PointsLike,
    *,
    eval_points: PointsLike | None = None,
    summary: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    logging_steps: int = 1,
    **kwargs: Any,
) -> Path:
    """Write a ``trainer_state.json`` holding ``points`` as its training log.

    Parameters
    ----------
    path : str or Path
        The file to write (a folder gets ``trainer_state.json`` inside it).
    points : DataFrame or iterable of mappings
        Training rows: ``step`` and the logged metrics (``loss``, ``reward``, ``kl``...).
    eval_points : DataFrame or iterable of mappings, optional
        Evaluation rows (``eval_*`` metrics) with their ``step``.
    summary : mapping, optional
        End-of-training summary values (``train_runtime``, ``train_loss``...); with it the
        summary row is written, as after ``trainer.train()`` returns.
    max_steps, logging_steps : int
        The state's ``max_steps`` (default: the last step) and ``logging_steps``.
    **kwargs
        Further ``trainer_state`` fields: ``eval_steps``, ``save_steps``, ``train_batch_size``,
        ``num_train_epochs``, ``best_metric``.

    Returns
    -------
    Path
        The file written.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "trainer_state.json"
    text = trainer_state_text(
        points,
        eval_points=eval_points,
        summary=summary,
        max_steps=max_steps,
        logging_steps=logging_steps,
        **kwargs,
    )
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


# --------------------------------------------------------------------------------------------
# console
# --------------------------------------------------------------------------------------------


def format_log(logs: Mapping[str, Any], number_format: NumberFormat = "repr") -> str:
    """One printed dict as ``ProgressCallback.on_log`` writes it.

    ``"repr"``: ``str(logs)`` with the epoch rounded to 2 decimals; ``"4g"``: every float as
    text with 4 significant digits. ``total_flos`` is left out, as the callback does.
    """
    shown = {k: v for k, v in logs.items() if k != "total_flos"}
    if number_format == "4g":
        shown = {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in shown.items()}
    elif "epoch" in shown and isinstance(shown["epoch"], float):
        shown["epoch"] = round(shown["epoch"], 2)
    return str(shown)


def _bar(step: int, total: int) -> str:
    """A tqdm bar as written to a non-terminal (``{l_bar}{bar}{r_bar}``)."""
    total = max(total, 1)
    frac = min(step / total, 1.0)
    filled = int(frac * 10)
    bar = "█" * filled + " " * (10 - filled)
    return f"{int(frac * 100):3d}%|{bar}| {step}/{total} [00:{step % 60:02d}<00:00,  1.00s/it]"


def console_lines(
    points: PointsLike,
    *,
    eval_points: PointsLike | None = None,
    summary: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    logging_steps: int = 1,
    num_train_epochs: float = 1.0,
    number_format: NumberFormat = "repr",
    progress: bool = False,
) -> Iterator[str]:
    r"""The console output of a run, one ``tqdm.write`` at a time (each ends with ``\\n``).

    Dicts have no ``step`` (the console shows none). With ``progress``, each line is preceded by
    tqdm's bar redraw and clearing (``\\r<bar>\\r<spaces>\\r``) and the bar is redrawn at the end.
    """
    history = log_history(
        points,
        eval_points=eval_points,
        summary=summary,
        max_steps=max_steps,
        logging_steps=logging_steps,
        num_train_epochs=num_train_epochs,
    )
    total = max_steps or max((e["step"] for e in history), default=1)
    bar = ""
    for entry in history:
        logs = {k: v for k, v in entry.items() if k != "step"}
        text = format_log(logs, number_format)
        if progress:
            bar = _bar(int(entry["step"]), int(total))
            yield f"\r{bar}\r{' ' * len(bar)}\r{text}\n"
        else:
            yield text + "\n"
    if progress and bar:
        yield f"\r{bar}\n"


def write_trl_console(
    handle: IO[str] | str | Path,
    points: PointsLike,
    *,
    eval_points: PointsLike | None = None,
    summary: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    logging_steps: int = 1,
    number_format: NumberFormat = "repr",
    progress: bool = False,
    banner: bool = False,
) -> Path | None:
    r"""Write a run's console output line by line (flushed after each, like a live trainer).

    Parameters
    ----------
    handle : text file or path
        An open text file (appended to), or a path (created).
    points, eval_points, summary, max_steps, logging_steps
        As for ``write_trainer_state``.
    number_format : {"repr", "4g"}
        transformers' older (numbers) or newer (text, 4 significant digits) console format.
    progress : bool
        Surround the dicts with tqdm bar redraws (``\\r``).
    banner : bool
        Start with transformers' ``***** Running training *****`` banner.

    Returns
    -------
    Path or None
        The path written, when a path was given.
    """
    lines = console_lines(
        points,
        eval_points=eval_points,
        summary=summary,
        max_steps=max_steps,
        logging_steps=logging_steps,
        number_format=number_format,
        progress=progress,
    )
    if banner:
        total = max_steps or len(point_records(points)) * logging_steps
        lines = itertools.chain([training_banner(num_examples=total, total_steps=total)], lines)
    if isinstance(handle, (str, Path)):
        path = Path(handle)
        with open(path, "w", encoding="utf-8", newline="") as opened:
            _write_flushed(opened, lines)
        return path
    _write_flushed(handle, lines)
    return None


def _write_flushed(handle: IO[str], lines: Iterable[str]) -> None:
    """Write text piece by piece, flushing after each (a live trainer's console)."""
    for line in lines:
        handle.write(line)
        handle.flush()


def training_banner(
    *,
    num_examples: int,
    total_steps: int,
    num_epochs: int = 1,
    per_device_batch_size: int = 8,
    gradient_accumulation_steps: int = 1,
    total_batch_size: int | None = None,
    trainable_parameters: int = 494_032_768,
) -> str:
    """Transformers' start banner, as its logger prints it (``Trainer._inner_training_loop``)."""
    total_batch_size = total_batch_size or per_device_batch_size * gradient_accumulation_steps
    return (
        "***** Running training *****\n"
        f"  Num examples = {num_examples:,}\n"
        f"  Num Epochs = {num_epochs:,}\n"
        f"  Instantaneous batch size per device = {per_device_batch_size:,}\n"
        f"  Total train batch size (w. parallel, distributed & accumulation) = {total_batch_size:,}\n"
        f"  Gradient Accumulation steps = {gradient_accumulation_steps}\n"
        f"  Total optimization steps = {total_steps:,}\n"
        f"  Number of trainable parameters = {trainable_parameters:,}\n"
    )


__all__ = [
    "console_lines",
    "format_log",
    "log_history",
    "trainer_state",
    "trainer_state_text",
    "training_banner",
    "write_trainer_state",
    "write_trl_console",
]
