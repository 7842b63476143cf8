"""Model speed: validating, dumping and *reading* 10,000 stored messages.

Two parts:

* ``model`` (kept from earlier runs, comparable with them): a task of 10,000 mixed messages
  validated and dumped, best of 5 after a collection; the callable discriminator against
  a plain (smart) union on the same data.
* ``model["read"]``: reading 10,000 stored messages the way the repository does, the
  garbage collector ON, in a process that holds other live objects (a ballast of plain
  containers, as an application would). Each figure is the median (mean and max too) of
  consecutive runs whose previous result stays alive until the next one is built, so
  collections that one run defers land in the next run's time. Side by side in the same
  run: the former read path (three walks - markers, keys, strings - then the exact
  validator; reimplemented below as it was) and the current one (`read_stored` +
  `parse_read`: a marshal scan, a walk only where needed, the keyed validator), the
  latter with and without its collector pause (so the pause's share is visible), on
  the two workloads `mixed_message_dicts` (~330 B a message) and the realistic
  `conversation` in its stored form (~730 B). Last, ``tasks.messages()`` of the 10,000
  conversation messages end to end on the embedded backend, both read paths, with the
  decode passes counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Union

import bson
from pydantic import TypeAdapter

import mindstore
from benchmarks.conversation import conversation
from mindstore.documents import task_document
from mindstore.errors import ValidationError
from mindstore.model import stored_read
from mindstore.model.messages import (
    MESSAGE_CLASSES,
    MESSAGE_LIST_ADAPTER,
    AnyMessage,
    UnknownMessage,
    parse_messages,
)
from mindstore.model.plans import DERIVED_KEY, stored_doc
from mindstore.model.storage_form import unescape_keys
from mindstore.model.task import Task
from mindstore.payloads import find_markers, read_value
from mindstore.repositories import port
from mindstore.workload_small import mixed_message_dicts

BALLAST_CONTAINERS = 300_000
"""Live container objects besides the library's own: full collections must visit them."""
RUNS = 15
E2E_RUNS = 7
TARGET_MS = 150


def _best_of(fn: Any, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


# --------------------------------------------------------------------- the former read path
class Passes:
    """Counts of Python walks over whole message documents, and validations, per read."""

    def __init__(self) -> None:
        self.walks = 0
        self.validated = 0

    def per_message(self, messages: int, reads: int) -> dict[str, float]:
        return {
            "python_walks_per_message": round(self.walks / (messages * reads), 2),
            "validations_per_message": round(self.validated / (messages * reads), 2),
        }


def former_parse(documents: list[Any], found: dict[str, Any], passes: Passes) -> list[AnyMessage]:
    """`parse_stored(documents, read_value)` as it was: unescape, rewrite, validate."""
    derived = [doc.get(DERIVED_KEY) for doc in documents]
    plain = []
    for document in documents:
        if DERIVED_KEY in document:
            document = {key: value for key, value in document.items() if key != DERIVED_KEY}
        document = unescape_keys(document)
        plain.append(read_value(document, found))
    passes.walks += 2 * len(documents)
    passes.validated += len(plain)
    try:
        messages = MESSAGE_LIST_ADAPTER.validate_python(plain)
    except Exception as exc:
        raise ValidationError(f"invalid message list: {exc}") from exc
    for position, names in enumerate(derived):
        message = messages[position]
        if names and isinstance(message, UnknownMessage):
            messages[position] = UnknownMessage.from_stored(message.raw, list(names))
    return messages


def former_read(documents: list[Any], passes: Passes) -> list[AnyMessage]:
    markers: set[str] = set()
    find_markers(documents, markers)
    passes.walks += len(documents)
    return former_parse(documents, {}, passes)  # the workloads refer to no payloads


async def former_decode(
    self: Any, task_id: str, documents: list[Any], passes: Passes
) -> list[AnyMessage]:
    """`TaskPort.decode` as it was (markers, payload query, then `former_parse`)."""
    markers: set[str] = set()
    find_markers(documents, markers)
    passes.walks += len(documents)
    found: dict[str, Any] = {}
    if markers:
        query = {"_id": {"$in": sorted(markers)}, "tenant": self.scope.tenant, "task_id": task_id}
        async for payload in self.scope.payloads.find(query, {"data": 1}):
            found[payload["_id"]] = payload["data"]
    return former_parse(documents, found, passes)


# --------------------------------------------------------------------- the current read path
def current_read(documents: list[Any], passes: Passes) -> list[AnyMessage]:
    read = stored_read.read_stored(documents, strings=True)
    passes.walks += read.walked
    passes.validated += len(read.documents)
    return stored_read.parse_read(read)


@contextlib.contextmanager
def collector_pause_off() -> Iterator[None]:
    """The current path without its collector pause (to show what the pause is worth)."""
    original = stored_read.collector_paused
    stored_read.collector_paused = contextlib.nullcontext  # type: ignore[assignment]
    try:
        yield
    finally:
        stored_read.collector_paused = original


# --------------------------------------------------------------------- measuring
def _stats(times: list[float], cpu: list[float]) -> dict[str, float]:
    """Wall-clock figures, and the process's CPU time (less sensitive to other processes
    on a shared machine; `os.getloadavg()` is reported next to the figures)."""
    return {
        "median_ms": round(statistics.median(times) * 1000, 1),
        "mean_ms": round(statistics.fmean(times) * 1000, 1),
        "max_ms": round(max(times) * 1000, 1),
        "cpu_median_ms": round(statistics.median(cpu) * 1000, 1),
        "cpu_mean_ms": round(statistics.fmean(cpu) * 1000, 1),
    }


def _runs(fn: Callable[[], Any], runs: int = RUNS) -> dict[str, float]:
    """Consecutive runs, the collector on; each result lives until the next is built."""
    assert gc.isenabled(), "measured with the garbage collector on"
    times, cpu = [], []
    kept = fn()  # warm-up (and the first result to keep alive)
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        kept = result
    del kept
    return _stats(times, cpu)


def _stored(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the driver hands over: the documents decoded from BSON."""
    decoded: list[dict[str, Any]] = bson.decode(bson.encode({"m": documents}))["m"]
    return decoded


def _workload(documents: list[dict[str, Any]]) -> dict[str, Any]:
    count = len(documents)
    former_passes, current_passes = Passes(), Passes()
    assert former_read(documents, Passes()) == current_read(documents, Passes())
    block: dict[str, Any] = {
        "messages": count,
        "bson_bytes": len(bson.encode({"m": documents})),
        "validate_exact_adapter": _runs(lambda: MESSAGE_LIST_ADAPTER.validate_python(documents)),
        "validate_keyed": _runs(lambda: parse_messages(documents)),
        "former_read": _runs(lambda: former_read(documents, former_passes)),
        "current_read": _runs(lambda: current_read(documents, current_passes)),
    }
    with collector_pause_off():
        block["current_read_without_collector_pause"] = _runs(
            lambda: current_read(documents, Passes())
        )
    reads = RUNS + 1
    block["former_passes"] = former_passes.per_message(count, reads)
    block["current_passes"] = current_passes.per_message(count, reads)
    block["speedup_median"] = round(
        block["former_read"]["median_ms"] / block["current_read"]["median_ms"], 2
    )
    block["speedup_median_without_collector_pause"] = round(
        block["former_read"]["median_ms"]
        / block["current_read_without_collector_pause"]["median_ms"],
        2,
    )
    block["within_target"] = block["current_read"]["median_ms"] < TARGET_MS
    return block


async def _end_to_end(messages: list[AnyMessage]) -> dict[str, Any]:
    """`tasks.messages()` of a 10,000-message task on the embedded backend, both paths."""
    store = await mindstore.connect("embedded", database=f"bench_{uuid.uuid4().hex[:8]}")
    try:
        task = Task(id="bench", messages=list(messages))  # the conversation's own task id
        await store.database["tasks"].insert_one(task_document(task, "bench"))
        tasks = store.scoped("bench").tasks

        async def timed(runs: int) -> dict[str, float]:
            assert gc.isenabled()
            kept = await tasks.messages(task.id)
            assert len(kept) == len(messages)
            times, cpu = [], []
            for _ in range(runs):
                start, start_cpu = time.perf_counter(), time.process_time()
                result = await tasks.messages(task.id)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                kept = result
            del kept
            return _stats(times, cpu)

        current_passes = Passes()
        original_read = port.read_stored

        def counting_read(documents: list[Any], **kwargs: Any) -> stored_read.StoredRead:
            read = original_read(documents, **kwargs)
            current_passes.walks += read.walked
            current_passes.validated += len(read.documents)
            return read

        port.read_stored = counting_read  # type: ignore[assignment]
        try:
            current = await timed(E2E_RUNS)
        finally:
            port.read_stored = original_read
        former_passes = Passes()
        original_decode = port.TaskPort.decode

        async def patched(self: Any, task_id: str, documents: list[Any]) -> list[AnyMessage]:
            return await former_decode(self, task_id, documents, former_passes)

        port.TaskPort.decode = patched  # type: ignore[method-assign]
        try:
            former = await timed(E2E_RUNS)
        finally:
            port.TaskPort.decode = original_decode  # type: ignore[method-assign]
        reads = E2E_RUNS + 1
        return {
            "backend": "embedded",
            "messages": len(messages),
            "former": former,
            "current": current,
            "former_passes": former_passes.per_message(len(messages), reads),
            "current_passes": current_passes.per_message(len(messages), reads),
            "speedup_median": round(former["median_ms"] / current["median_ms"], 2),
            "note": "includes the embedded backend's own work (mongomock copies the document, "
            "then a BSON round trip as the driver would decode it)",
        }
    finally:
        await store.close()


async def run(results: dict[str, Any], *, messages: int = 10_000) -> None:
    data = mixed_message_dicts(messages)
    plain_union = TypeAdapter(list[Union[tuple(MESSAGE_CLASSES.values())]])  # type: ignore[misc]  # noqa: UP007
    validate = _best_of(lambda: MESSAGE_LIST_ADAPTER.validate_python(data))
    validate_plain = _best_of(lambda: plain_union.validate_python(data))
    task = Task.model_validate({"id": "bench", "messages": data})
    task_validate = _best_of(lambda: Task.model_validate({"id": "bench", "messages": data}))
    dump = _best_of(lambda: task.model_dump())
    block: dict[str, Any] = {
        "messages": messages,
        "validate_messages_ms": round(validate * 1000, 1),
        "validate_task_ms": round(task_validate * 1000, 1),
        "validate_plain_union_ms": round(validate_plain * 1000, 1),
        "discriminator_speedup": round(validate_plain / validate, 2),
        "dump_ms": round(dump * 1000, 1),
        "target_validate_ms": TARGET_MS,
    }
    results["model"] = block

    story = conversation(messages)
    workloads = {
        "mixed_message_dicts": _stored(data),
        "conversation": _stored([stored_doc(message, message.task_id) for message in story]),
    }
    ballast = [{"n": i, "tags": [i]} for i in range(BALLAST_CONTAINERS // 2)]
    gc.collect()
    read: dict[str, Any] = {
        "live_objects_tracked_by_the_collector": len(gc.get_objects()),
        "runs": RUNS,
        "target_median_ms": TARGET_MS,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    for name, documents in workloads.items():
        read[name] = _workload(documents)
    read["tasks_messages_end_to_end"] = await _end_to_end(story)
    read["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    del ballast
    block["read"] = read


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out))
    print(json.dumps(out, indent=2))
