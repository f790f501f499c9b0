"""A model's family and size from its name, as trackers and trainers record it.

``Qwen/Qwen2.5-7B-Instruct`` -> family ``Qwen``, size 7 (billions of parameters);
``meta-llama/Llama-3.1-8B`` -> ``Llama``, 8; ``google/gemma-2-2b-it`` -> ``Gemma``, 2;
``openai/gpt-oss-20b`` -> ``gpt-oss``, 20; ``Qwen2.5-0.5B`` -> 0.5; ``HuggingFaceTB/SmolLM2-135M``
-> 0.135. The family names are those of the bundled runs' manifest (``data/runs.csv``), so a run
read from a tracker is placed in the population by the same names. A name no pattern matches
gives no family; a mixture-of-experts count (``8x7B``) or an active-parameter count (``A3B``) is
not read as the size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bayesgrpo.logs.readers.verl.config import model_name

#: (pattern on the model's name, family), first match wins: order matters where names nest.
FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), family)
    for pattern, family in (
        (r"gpt-?oss", "gpt-oss"),
        (r"deepseek", "DeepSeek"),
        (r"qwen|qwq", "Qwen"),
        (r"llama", "Llama"),
        (r"gemma", "Gemma"),
        (r"mistral|mixtral|ministral", "Mistral"),
        (r"\bphi[-_]?\d", "Phi"),
        (r"smollm", "SmolLM"),
        (r"olmo", "OLMo"),
        (r"granite", "Granite"),
        (r"\bgpt-?2\b", "GPT-2"),
    )
)
# 7B, 0.5b, 1.5B, 135M, 20b; not 8x7B (experts) nor A3B (active parameters)
_SIZE = re.compile(r"(?<![\dx.])(?<![aA])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z\d])")


def model_identity(name: Any) -> dict[str, Any]:
    """``model``, and ``family`` and ``size_b`` where the name says them.

    Parameters
    ----------
    name : str or None
        A model name or path (``"Qwen/Qwen2.5-7B-Instruct"``, ``"/cache/models--Qwen--Qwen2-7B"``).

    Returns
    -------
    dict
        ``{"model": name}`` plus ``family`` (str) and ``size_b`` (float, billions) when found;
        empty for a missing name.
    """
    if name is None or not str(name).strip():
        return {}
    text = str(name).strip()
    out: dict[str, Any] = {"model": text}
    base = re.split(r"[/\\]", model_name(text))
    tail = " ".join(base[-2:])
    for pattern, family in FAMILIES:
        if pattern.search(tail):
            out["family"] = family
            break
    sizes = [
        float(number) / (1000.0 if unit.lower() == "m" else 1.0) for number, unit in _SIZE.findall(base[-1])
    ]
    if sizes:
        out["size_b"] = sizes[-1] if len(sizes) == 1 else max(sizes)
    return out


def tracked_metadata(
    values: Mapping[str, Any], model_keys: Sequence[str], numbers: Mapping[str, str]
) -> dict[str, Any]:
    """Metadata from what a tracker kept of a run (MLflow params, a W&B config).

    Parameters
    ----------
    values : mapping
        The tracker's key -> value (strings or numbers).
    model_keys : sequence of str
        Keys that name the model, in order of preference: the first non-empty one gives
        :func:`model_identity`.
    numbers : mapping
        Key -> metadata name, for values that are numbers (a number written as text counts);
        a planned step count of 0 or less (TRL's ``max_steps=-1``) is not one.

    Returns
    -------
    dict
    """
    metadata: dict[str, Any] = {}
    for key in model_keys:
        value = values.get(key)
        if isinstance(value, str) and value:
            metadata.update(model_identity(value))
            break
    for key, name in numbers.items():
        number = finite_float(values.get(key))
        if number is not None and name not in metadata and not (name == "total_steps" and number <= 0):
            metadata[name] = number
    return metadata


def finite_float(value: Any) -> float | None:
    """``value`` as a finite float (a number written as text counts), else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
