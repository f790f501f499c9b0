"""Run metadata from a notebook's own code: the last ``GRPOConfig(...)`` and ``from_pretrained(...)`` calls.

Calls are read as text and their arguments parsed as Python literals (:mod:`ast`), never run.
"""

from __future__ import annotations

import ast
import re
from typing import Any

#: ``GRPOConfig(...)`` keywords -> metadata names.
CONFIG_METADATA: dict[str, str] = {
    "num_generations": "group_size",
    "learning_rate": "learning_rate",
    "logging_steps": "logging_steps",
    "max_steps": "total_steps",
    "num_train_epochs": "num_epochs",
    "per_device_train_batch_size": "per_device_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
}
_CONFIG_CALL = re.compile(r"\bGRPOConfig\s*\(")
_MODEL_CALL = re.compile(
    r"\b(?:FastLanguageModel|FastModel|FastVisionModel|AutoModelForCausalLM)\.from_pretrained\s*\("
)
_MODEL_KEYWORDS = ("model_name", "pretrained_model_name_or_path")

# --------------------------------------------------------------------------------------------
# the notebook's own code
# --------------------------------------------------------------------------------------------


def _call_text(source: str, open_paren: int) -> str | None:
    """The text of a call's parenthesised arguments, from ``(`` to its matching ``)``."""
    depth = 0
    quote: str | None = None
    index = open_paren
    while index < len(source):
        char = source[index]
        if quote:
            if char == "\\":
                index += 2
                continue
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#":
            newline = source.find("\n", index)
            if newline < 0:
                return None
            index = newline
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return source[open_paren : index + 1]
        index += 1
    return None


def _call_arguments(source: str, open_paren: int) -> tuple[list[Any], dict[str, Any]]:
    """Literal positional and keyword arguments of one call (others left out)."""
    text = _call_text(source, open_paren)
    if text is None:
        return [], {}
    try:
        tree = ast.parse("f" + text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return [], {}
    call = tree.body
    if not isinstance(call, ast.Call):
        return [], {}
    positional = []
    for node in call.args:
        try:
            positional.append(ast.literal_eval(node))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            positional.append(None)
    keywords: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        try:
            keywords[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return positional, keywords


def code_metadata(sources: list[str]) -> dict[str, Any]:
    """What the notebook's code states literally: its last ``GRPOConfig(...)`` and model load.

    ``GRPOConfig(num_generations=6, learning_rate=5e-6, logging_steps=1, max_steps=250, ...)``
    gives ``group_size``, ``learning_rate``, ``logging_steps``, ``total_steps``...;
    ``FastLanguageModel.from_pretrained(model_name="Qwen/Qwen2.5-3B-Instruct")`` (or
    ``AutoModelForCausalLM.from_pretrained("...")``) gives ``model``. Only literal values count
    (``max_steps=250``, not ``max_steps=n``).
    """
    text = "\n".join(sources)
    found: dict[str, Any] = {}
    config = list(_CONFIG_CALL.finditer(text))
    if config:
        _, keywords = _call_arguments(text, config[-1].end() - 1)
        for key, name in CONFIG_METADATA.items():
            value = keywords.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found[name] = float(value)
    models = list(_MODEL_CALL.finditer(text))
    if models:
        positional, keywords = _call_arguments(text, models[-1].end() - 1)
        candidates = [keywords.get(k) for k in _MODEL_KEYWORDS] + positional[:1]
        model = next((c for c in candidates if isinstance(c, str) and c.strip()), None)
        if model is not None:
            found["model"] = model.strip()
    return found
