"""A framework's tool-call arguments as the mapping a `ToolCallPart` stores.

Frameworks hand arguments over as a dict or as the model's JSON text. Text that is not a
JSON object, or anything else, is stored as no arguments: the framework has already
accepted the call, and a save must not fail on what the model wrote.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["tool_args"]


def tool_args(value: Any) -> dict[str, Any]:
    """`value` (a mapping, or JSON text of an object) as a dict; {} for anything else."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}
