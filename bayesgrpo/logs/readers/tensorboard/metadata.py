"""Run metadata that TRL / transformers write as text summaries (``TrainingArguments``, the model config)."""

from __future__ import annotations

import json
from typing import Any, TypeGuard

# --------------------------------------------------------------------------------------------
# Metadata stated by TRL / transformers


def metadata_from_texts(texts: dict[str, str]) -> dict[str, Any]:
    """Run metadata from the ``TrainingArguments`` and model-config JSON that transformers logs."""
    metadata: dict[str, Any] = {}
    args = _json_object(texts.get("args/text_summary"))
    if args:
        if is_number(args.get("learning_rate")):
            metadata["learning_rate"] = float(args["learning_rate"])
        if is_number(args.get("num_generations")) and args["num_generations"] >= 1:
            metadata["group_size"] = int(args["num_generations"])
        if is_number(args.get("logging_steps")) and args["logging_steps"] >= 1:
            metadata["logging_steps"] = int(args["logging_steps"])
        max_steps = args.get("max_steps")
        if is_number(max_steps) and max_steps > 0:
            metadata["total_steps"] = int(max_steps)
        elif is_number(args.get("num_train_epochs")):
            metadata["num_epochs"] = float(args["num_train_epochs"])
    config = _json_object(texts.get("model_config/text_summary"))
    if config and isinstance(config.get("_name_or_path"), str) and config["_name_or_path"].strip():
        metadata["model"] = config["_name_or_path"].strip()
    return metadata


def _json_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        loaded = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def is_number(value: Any) -> TypeGuard[int | float]:
    """Whether a JSON value is a number (bools excluded)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
