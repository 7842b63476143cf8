"""Deterministic mixed message data for model benchmarks and tests (no store needed)."""

from __future__ import annotations

import random
from typing import Any


def mixed_message_dicts(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """`count` stored-form messages of every common role, as an agent produces them."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    ts = 1_700_000_000
    for index in range(count):
        ts += rng.randint(0, 3)
        kind = index % 5
        base = {
            "id": f"m{index:06d}",
            "task_id": "bench",
            "started_ts": ts,
            "finished_ts": ts + 1,
            "scope": None,
            "depth": 0,
        }
        if kind == 0:
            messages.append(
                {**base, "role": "user", "content": [{"type": "text", "text": "question " * 8}]}
            )
        elif kind == 1:
            messages.append(
                {
                    **base,
                    "role": "assistant",
                    "status": "completed",
                    "model_id": "openai/gpt-4o",
                    "tokens_in": rng.randint(100, 4000),
                    "tokens_out": rng.randint(10, 400),
                    "cost": 0.001,
                    "content": [
                        {"type": "reasoning", "reasoning": "thinking " * 5, "signature": "sig"},
                        {"type": "text", "text": "answer " * 10},
                        {
                            "type": "toolCall",
                            "tool_call_id": f"c{index}",
                            "tool_name": "search",
                            "args": {"q": "lisbon hotels", "limit": 5},
                            "is_loading": False,
                            "is_approval_pending": False,
                        },
                    ],
                }
            )
        elif kind == 2:
            messages.append(
                {
                    **base,
                    "role": "tool",
                    "content": [
                        {
                            "type": "toolResult",
                            "tool_call_id": f"c{index - 1}",
                            "tool_name": "search",
                            "result": {"hits": ["a", "b", "c"]},
                            "is_error": False,
                            "tool_result_contents": [{"type": "text", "text": "3 hits"}],
                        }
                    ],
                }
            )
        elif kind == 3:
            messages.append(
                {
                    **base,
                    "role": "informational",
                    "content": [
                        {
                            "type": "informational",
                            "informational_type": "status",
                            "details": "ok",
                            "is_visible_ui": True,
                        }
                    ],
                }
            )
        else:
            messages.append(
                {**base, "role": "system", "content": [{"type": "text", "text": "be brief"}]}
            )
    return messages
