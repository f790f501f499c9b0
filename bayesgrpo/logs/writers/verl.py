r"""Write verl console logs exactly as verl prints them.

verl's console logger (``verl/utils/logger/aggregate_logger.py``, ``LocalLogger`` used by
``verl/utils/tracking.py`` when ``trainer.logger`` includes ``'console'``) prints one line per
``Tracking.log(data=metrics, step=global_steps)`` call::

    print(concat_dict_to_str(data, step=step), flush=True)

    def concat_dict_to_str(dict, step):
        output = [f"step:{step}"]
        for k, v in dict.items():
            if isinstance(v, numbers.Number):
                output.append(f"{k}:{v:.3f}")          # verl up to mid 2025
                # output.append(f"{k}:{pprint.pformat(v)}")   # later verl
        return " - ".join(output)

Later verl prints ``pprint.pformat(v)``: full precision, and with numpy >= 2 the repr of numpy
scalars, ``np.float64(0.41)`` or ``np.int64(3)``. The trainer runs inside a Ray actor, so Ray
prefixes every line with the actor's name and pid, coloured: ``\\x1b[36m(TaskRunner pid=678203)\\x1b[0m``
(``main_task`` in verl of late 2024; worker output dimmed by ``\\x1b[2m``). Before training the
trainer pretty-prints its resolved Hydra config (``pprint(OmegaConf.to_container(config,
resolve=True))``), one prefixed line per line of the dict, and prints ``Total training steps: N``.

These writers produce that format line by line (optionally flushing each line, so that a test
can play a run being written), for tests, benchmarks and the live-log watcher.

verl's file logger (``trainer.logger`` including ``'file'``; ``FileLogger`` in
``verl/utils/tracking.py``) writes the same ``log`` calls as JSON Lines to
``$VERL_FILE_LOGGER_PATH`` (default ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl``)::

    data = {"step": step, "data": data}
    self.fp.write(json.dumps(data) + "\n")                                              # earlier
    self.fp.write(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")         # later

``write_verl_jsonl`` writes either (``style="json"`` or ``"orjson"``: compact separators, NaN
and infinities as ``null`` as orjson writes them).
"""

from __future__ import annotations

import itertools
import json
import math
import numbers
import pprint
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pandas as pd

#: Canonical metric names written under the name verl logs them (the reader maps them back).
CANONICAL_TO_VERL: dict[str, str] = {
    "reward": "critic/score/mean",
    "kl": "actor/kl_loss",
    "entropy": "actor/entropy",
    "completion_length": "response_length/mean",
    "loss": "actor/pg_loss",
    "learning_rate": "actor/lr",
    "epoch": "training/epoch",
    "val_reward": "val-core/openai/gsm8k/reward/mean@1",
}

ANSI_CYAN = "\x1b[36m"
ANSI_DIM = "\x1b[2m"
ANSI_RESET = "\x1b[0m"


def ray_prefix(
    actor: str | None = "TaskRunner", pid: int = 678203, *, ansi: bool = True, dim: bool = False
) -> str:
    r"""The prefix Ray puts before each line an actor prints, with its trailing space.

    Parameters
    ----------
    actor : str or None
        The actor's name (``"TaskRunner"``, ``"main_task"``, ``"WorkerDict"``); ``None`` gives
        the bare ``(pid=N)`` Ray writes for unnamed processes.
    pid : int
    ansi : bool
        Colour it as Ray does on a terminal (cyan, ``\\x1b[36m ... \\x1b[0m``).
    dim : bool
        Prepend ``\\x1b[2m`` (Ray dims some actors' output).

    Returns
    -------
    str
    """
    name = f"({actor} pid={pid})" if actor else f"(pid={pid})"
    if not ansi:
        return name + " "
    return (ANSI_DIM if dim else "") + ANSI_CYAN + name + ANSI_RESET + " "


def format_value(value: Any, *, precision: int | None = 3, np_wrappers: bool = False) -> str:
    """One metric value as verl prints it.

    Parameters
    ----------
    value : number or str
        A number is formatted; a ``str`` is written verbatim (to make malformed logs in tests).
    precision : int or None
        ``3``: ``f"{v:.3f}"`` as verl up to mid 2025. ``None``: ``pprint.pformat(v)`` (the repr)
        as later verl.
    np_wrappers : bool
        Write numbers as numpy >= 2 scalars print under later verl: ``np.float64(0.41)``,
        ``np.int64(3)`` (implies the repr).

    Returns
    -------
    str
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) and (np_wrappers or precision is None):
        return pprint.pformat(value)  # later verl prints True / False
    if np_wrappers:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return pprint.pformat(np.int64(value))
        return pprint.pformat(np.float64(value))
    if precision is None:
        return pprint.pformat(value.item() if isinstance(value, np.generic) else value)
    return f"{value:.{precision}f}"


def format_step_line(
    step: int | str,
    metrics: Mapping[str, Any],
    *,
    precision: int | None = 3,
    np_wrappers: bool = False,
) -> str:
    """The text verl's ``concat_dict_to_str`` makes of one ``log`` call, without prefix or newline.

    Non-numbers other than ``str`` are skipped as verl skips them; ``str`` values are written
    verbatim (verl never does: this is for making malformed logs). NaN values are written
    ``nan`` as verl does.
    """
    fields = [f"step:{step}"]
    for name, value in metrics.items():
        if isinstance(value, (str, numbers.Number)):
            fields.append(f"{name}:{format_value(value, precision=precision, np_wrappers=np_wrappers)}")
    return " - ".join(fields)


def _rows(
    points: pd.DataFrame | Iterable[tuple[int, Mapping[str, Any]]], names: Mapping[str, str]
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(step, metrics) pairs from a points frame (NaN cells skipped) or from pairs as given."""
    if isinstance(points, pd.DataFrame):
        if "step" not in points.columns:
            raise ValueError("points frame needs a 'step' column")
        columns = [c for c in points.columns if c not in ("step", "run_id")]
        renamed = [names.get(c, c) for c in columns]
        steps = points["step"].tolist()
        values = points[columns].to_numpy(dtype=object)
        for step, row in zip(steps, values, strict=True):
            metrics = {}
            for name, value in zip(renamed, row, strict=True):
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                metrics[name] = value
            yield (int(step) if isinstance(step, (int, np.integer)) else step), metrics
        return
    for step, logged in points:
        yield step, {names.get(k, k): v for k, v in logged.items()}


@contextmanager
def _opened(path_or_handle: str | Path | IO[str]) -> Iterator[IO[str]]:
    if isinstance(path_or_handle, (str, Path)):
        with open(path_or_handle, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
    else:
        yield path_or_handle


def config_lines(config: Mapping[str, Any]) -> list[str]:
    """The lines of ``pprint(config)`` as verl's trainer prints its resolved config."""
    return pprint.pformat(dict(config)).splitlines()


def write_verl_console(
    path_or_handle: str | Path | IO[str],
    points: pd.DataFrame | Iterable[tuple[int, Mapping[str, Any]]],
    *,
    config: Mapping[str, Any] | None = None,
    command: str | None = None,
    total_training_steps: int | None = None,
    info_lines: Iterable[str] = (),
    ansi: bool = True,
    np_wrappers: bool = False,
    precision: int | None = 3,
    actor: str | None = "TaskRunner",
    pid: int = 678203,
    dim: bool = False,
    prefix: bool = True,
    names: Mapping[str, str] | None = None,
    flush: bool = False,
    final_newline: bool = True,
) -> Path | None:
    """Write a verl console log.

    Parameters
    ----------
    path_or_handle : str, Path or text handle
        A file to create, or an open text handle to append to (a live-log test).
    points : DataFrame or iterable of (step, dict)
        A frame with a ``step`` column (one line per row; NaN cells are left out, as verl only
        prints the metrics of that step), or ``(step, {metric: value})`` pairs in the order to
        write them (validation-only lines, repeated or out-of-order steps, text values...).
    config : mapping, optional
        Written first as verl's trainer prints its resolved config (``pprint``, one prefixed
        line per line), e.g. ``{"actor_rollout_ref": {"rollout": {"n": 5}, ...}, ...}``.
    command : str, optional
        Written first, unprefixed, as a launch script echoes it (``++ python3 -m
        verl.trainer.main_ppo data.train_batch_size=1024 ...``).
    total_training_steps : int, optional
        Writes verl's ``Total training steps: N`` line after the config.
    info_lines : iterable of str
        Further lines the trainer prints before training (``Size of train dataloader: 14``),
        written with the prefix after the config.
    ansi : bool
        Colour the Ray prefix as on a terminal.
    np_wrappers : bool
        Numbers as later verl prints numpy scalars: ``np.float64(0.41)``.
    precision : int or None
        ``3`` (older verl, ``:.3f``) or ``None`` (later verl, full repr).
    actor, pid, dim, prefix
        The Ray prefix (``prefix=False``: none, as a run outside Ray).
    names : mapping, optional
        Metric name -> name to write; default ``CANONICAL_TO_VERL`` (so a frame of canonical
        columns ``reward``, ``kl``... is written under verl's names).
    flush : bool
        Flush after every line.
    final_newline : bool
        ``False`` leaves the last line without its newline, as a file cut while being written.

    Returns
    -------
    Path or None
        The path written, or ``None`` for a handle.
    """
    mapping = dict(CANONICAL_TO_VERL if names is None else names)
    head = ray_prefix(actor, pid, ansi=ansi, dim=dim) if prefix else ""
    lines_before: list[str] = []
    if command is not None:
        lines_before.append(command)
    if config is not None:
        lines_before.extend(head + line for line in config_lines(config))
    lines_before.extend(head + line for line in info_lines)
    if total_training_steps is not None:
        lines_before.append(f"{head}Total training steps: {total_training_steps}")
    step_lines = (
        head + format_step_line(step, metrics, precision=precision, np_wrappers=np_wrappers)
        for step, metrics in _rows(points, mapping)
    )
    with _opened(path_or_handle) as handle:
        previous: str | None = None
        for line in itertools.chain(lines_before, step_lines):
            if previous is not None:
                handle.write(previous + "\n")
                if flush:
                    handle.flush()
            previous = line
        if previous is not None:
            handle.write(previous + ("\n" if final_newline else ""))
        handle.flush()
    return Path(path_or_handle) if isinstance(path_or_handle, (str, Path)) else None


def _json_value(value: Any, style: str) -> Any:
    """A metric value as verl's file logger serialises it (numpy scalars as Python numbers)."""
    if isinstance(value, np.generic):
        value = value.item()
    if style == "orjson" and isinstance(value, float) and not math.isfinite(value):
        return None  # orjson writes NaN and infinities as null
    return value


def verl_jsonl_line(
    step: Any, metrics: Mapping[str, Any], *, style: Literal["json", "orjson"] = "json"
) -> str:
    """One line of verl's file logger, without the newline.

    Parameters
    ----------
    step : int or any JSON value
        Written as given (a text step makes a malformed log for tests).
    metrics : mapping
        Metric -> value; numbers, and anything JSON holds (text, null...) written as given.
    style : {"json", "orjson"}
        ``json.dumps`` (earlier verl: ``", "`` separators, NaN written ``NaN``) or orjson (later
        verl: compact, NaN and infinities written ``null``).

    Returns
    -------
    str
    """
    if style not in ("json", "orjson"):
        raise ValueError(f"style must be 'json' or 'orjson', not {style!r}")
    record = {
        "step": _json_value(step, style),
        "data": {k: _json_value(v, style) for k, v in metrics.items()},
    }
    if style == "orjson":
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return json.dumps(record)


def write_verl_jsonl(
    path_or_handle: str | Path | IO[str],
    points: pd.DataFrame | Iterable[tuple[Any, Mapping[str, Any]]],
    *,
    style: Literal["json", "orjson"] = "json",
    names: Mapping[str, str] | None = None,
    flush: bool = False,
    final_newline: bool = True,
) -> Path | None:
    """Write a verl file-logger JSONL log (``trainer.logger=['file']``).

    Parameters
    ----------
    path_or_handle : str, Path or text handle
        A file to create, or an open text handle to append to (a live-log test).
    points : DataFrame or iterable of (step, dict)
        A frame with a ``step`` column (one line per row; NaN cells left out, as verl logs the
        metrics of that step only), or ``(step, {metric: value})`` pairs in the order to write
        them (repeated or out-of-order steps, text or NaN values...).
    style : {"json", "orjson"}
        How verl serialises each line (see ``verl_jsonl_line``).
    names : mapping, optional
        Metric name -> name to write; default ``CANONICAL_TO_VERL`` (a frame of canonical
        columns ``reward``, ``kl``... is written under verl's names).
    flush : bool
        Flush after every line.
    final_newline : bool
        ``False`` leaves the last line without its newline, as a file cut while being written.

    Returns
    -------
    Path or None
        The path written, or ``None`` for a handle.
    """
    mapping = dict(CANONICAL_TO_VERL if names is None else names)
    lines = (verl_jsonl_line(step, metrics, style=style) for step, metrics in _rows(points, mapping))
    with _opened(path_or_handle) as handle:
        previous: str | None = None
        for line in lines:
            if previous is not None:
                handle.write(previous + "\n")
                if flush:
                    handle.flush()
            previous = line
        if previous is not None:
            handle.write(previous + ("\n" if final_newline else ""))
        handle.flush()
    return Path(path_or_handle) if isinstance(path_or_handle, (str, Path)) else None


#: Metric names of a verl GRPO step line (verl 0.4), in the order verl prints them.
_LARGE_NAMES: tuple[str, ...] = (
    "global_seqlen/min",
    "global_seqlen/max",
    "global_seqlen/minmax_diff",
    "global_seqlen/balanced_min",
    "global_seqlen/balanced_max",
    "global_seqlen/mean",
    "actor/entropy",
    "actor/pg_loss",
    "actor/pg_clipfrac",
    "actor/ppo_kl",
    "actor/grad_norm",
    "perf/mfu/actor",
    "perf/max_memory_allocated_gb",
    "perf/max_memory_reserved_gb",
    "perf/cpu_memory_used_gb",
    "actor/lr",
    "training/global_step",
    "training/epoch",
    "critic/score/mean",
    "critic/score/max",
    "critic/score/min",
    "critic/rewards/mean",
    "critic/rewards/max",
    "critic/rewards/min",
    "critic/advantages/mean",
    "critic/advantages/max",
    "critic/advantages/min",
    "critic/returns/mean",
    "critic/returns/max",
    "critic/returns/min",
    "response_length/mean",
    "response_length/max",
    "response_length/min",
    "response_length/clip_ratio",
    "prompt_length/mean",
    "prompt_length/max",
    "prompt_length/min",
    "prompt_length/clip_ratio",
    "timing_s/gen",
    "timing_s/reward",
    "timing_s/old_log_prob",
    "timing_s/adv",
    "timing_s/update_actor",
    "timing_s/step",
    "timing_per_token_ms/gen",
    "timing_per_token_ms/update_actor",
    "perf/total_num_tokens",
    "perf/time_per_step",
    "perf/throughput",
)


def write_large_verl_console(
    path: str | Path,
    n_lines: int,
    n_metrics: int = 40,
    *,
    validation_every: int = 10,
    seed: int = 0,
    ansi: bool = True,
    chunk: int = 10_000,
) -> Path:
    """Write a long synthetic verl log (benchmarks): ``n_lines`` step lines, steps 1..n_lines.

    Each line holds ``n_metrics`` metrics (verl's names, ``critic/score/mean`` among them, then
    ``extra/metric_<i>`` beyond verl's list) formatted ``:.3f`` behind a coloured Ray prefix, as
    verl 0.4 prints them; every ``validation_every``-th line also carries
    ``val-core/openai/gsm8k/reward/mean@1`` as verl adds validation to that step's line.

    Parameters
    ----------
    path : str or Path
    n_lines : int
    n_metrics : int
        At least 19 so that ``critic/score/mean`` is among them.
    validation_every : int
    seed : int
    ansi : bool
    chunk : int
        Lines generated per batch of random numbers.

    Returns
    -------
    Path
    """
    if n_metrics < 19:
        raise ValueError("n_metrics must be at least 19 so that critic/score/mean is written")
    extra = max(0, n_metrics - len(_LARGE_NAMES))
    names = list(_LARGE_NAMES[:n_metrics]) + [f"extra/metric_{i}" for i in range(extra)]
    reward_index = names.index("critic/score/mean")
    head = ray_prefix("TaskRunner", 4242, ansi=ansi)
    template = head + "step:{} - " + " - ".join(f"{name}:{{:.3f}}" for name in names)
    validation = " - val-core/openai/gsm8k/reward/mean@1:{:.3f}"
    rng = np.random.default_rng(seed)
    path = Path(path)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for start in range(0, n_lines, chunk):
            stop = min(n_lines, start + chunk)
            steps = np.arange(start + 1, stop + 1)
            values = rng.uniform(0.0, 1.0, size=(stop - start, len(names)))
            curve = 0.9 - 0.7 * np.exp(-steps / max(n_lines / 5, 1))
            values[:, reward_index] = curve + rng.normal(0, 0.03, stop - start)
            lines = []
            for step, row in zip(steps.tolist(), values.tolist(), strict=True):
                line = template.format(step, *row)
                if validation_every and step % validation_every == 0:
                    line += validation.format(row[reward_index])
                lines.append(line)
            handle.write("\n".join(lines) + "\n")
    return path


__all__ = [
    "CANONICAL_TO_VERL",
    "config_lines",
    "format_step_line",
    "format_value",
    "ray_prefix",
    "verl_jsonl_line",
    "write_large_verl_console",
    "write_verl_console",
    "write_verl_jsonl",
]
