"""Model validation speed: a task of 10,000 mixed messages, validated and dumped.

Issue target: validating a 10,000-message task takes under 150 ms. Also measures the
callable discriminator against a plain (smart) union on the same data, side by side.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any, Union

from pydantic import TypeAdapter

from mindstore.model.messages import MESSAGE_CLASSES, MESSAGE_LIST_ADAPTER
from mindstore.model.task import Task
from mindstore.workload_small import mixed_message_dicts


def _best_of(fn: Any, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


async def run(results: dict[str, Any], *, messages: int = 10_000) -> None:
    data = mixed_message_dicts(messages)
    plain_union = TypeAdapter(list[Union[tuple(MESSAGE_CLASSES.values())]])  # type: ignore[misc]
    validate = _best_of(lambda: MESSAGE_LIST_ADAPTER.validate_python(data))
    validate_plain = _best_of(lambda: plain_union.validate_python(data))
    task = Task.model_validate({"id": "bench", "messages": data})
    task_validate = _best_of(lambda: Task.model_validate({"id": "bench", "messages": data}))
    dump = _best_of(lambda: task.model_dump())
    results["model"] = {
        "messages": messages,
        "validate_messages_ms": round(validate * 1000, 1),
        "validate_task_ms": round(task_validate * 1000, 1),
        "validate_plain_union_ms": round(validate_plain * 1000, 1),
        "discriminator_speedup": round(validate_plain / validate, 2),
        "dump_ms": round(dump * 1000, 1),
        "target_validate_ms": 150,
    }


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out))
    print(json.dumps(out, indent=2))
