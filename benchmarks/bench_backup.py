"""Backup, verify and restore throughput and peak memory for 100,000 messages.

Data: tasks of 100 mixed messages each (`mindstore.workload_small`), in two tenants
(10% / 90% of the messages), a dialog node for every task (every tenth a fork) and a
64 KiB payload for every twentieth task, inserted directly into an embedded store.

Timings run without tracing. Peak memory is measured in a second pass under
`tracemalloc` (Python allocations above the level before the call):

* ``backup_peak_mib`` for the whole database and ``backup_peak_mib_small`` for the 10%
  tenant: flat streaming means the two are about the same;
* ``restore_peak_mib`` includes the restored documents the embedded store keeps in
  memory (``restore_retained_mib``); ``restore_transient_mib`` = peak - retained is
  what restoring itself needs.

On the embedded backend the store's own work (mongomock copies every document in and
out) is part of every figure; see DESIGN.md ("Time on the embedded backend is not the
product's cost on a server").

Run standalone: ``python benchmarks/bench_backup.py [messages]``.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import importlib
import json
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import bson

import mindstore
from mindstore.backup import backup, restore, verify
from mindstore.documents import task_document
from mindstore.model.messages import parse_messages
from mindstore.model.task import Task
from mindstore.workload_small import mixed_message_dicts

PER_TASK = 100
MIB = 1024 * 1024


def _task(index: int, tenant: str) -> dict[str, Any]:
    task_id = f"bench-{index:06d}"
    messages = mixed_message_dicts(PER_TASK, seed=index)
    for message in messages:
        message["task_id"] = task_id
    # the header folded from the messages, as the store keeps it (verify checks it)
    task = Task(id=task_id, messages=parse_messages(messages))
    return task_document(task, tenant, owner=f"user-{index % 50}", title=f"task {index}")


async def _populate(store: Any, messages: int) -> dict[str, Any]:
    tasks = max(1, messages // PER_TASK)
    small = max(1, tasks // 10)
    db = store.database
    bson_bytes = 0
    for start in range(0, tasks, 50):
        docs = [_task(i, "small" if i < small else "large") for i in range(start, min(tasks, start + 50))]
        bson_bytes += sum(len(bson.encode(d)) for d in docs)
        await db["tasks"].insert_many(docs)
        nodes = []
        for doc in docs:
            index = int(doc["_id"].split("-")[1])
            parent = f"bench-{index - 1:06d}" if index % 10 and index - 1 >= 0 else None
            if parent is not None and (index < small) != (index - 1 < small):
                parent = None  # forks stay inside their tenant
            nodes.append({"_id": doc["_id"], "tenant": doc["tenant"], "owner": doc["owner"],
                          "parent_id": parent, "root_id": parent or doc["_id"],
                          "ancestors": [parent] if parent else [], "depth": 1 if parent else 0})
        await db["dialog_nodes"].insert_many(nodes)
        payloads = [{"_id": hashlib.sha256(d["_id"].encode()).hexdigest()[:32], "tenant": d["tenant"], "task_id": d["_id"],
                     "message_id": "m000000", "path": "content.0.text", "sha256": "0" * 64,
                     "size": 65536, "data": bytes(range(256)) * 256}
                    for d in docs if int(d["_id"].split("-")[1]) % 20 == 0]
        if payloads:
            await db["payloads"].insert_many(payloads)
    return {"tasks": tasks, "small_tasks": small, "bson_bytes": bson_bytes}


async def _peak(coro: Any) -> tuple[Any, float, float]:
    """(result, peak MiB above the start, MiB still allocated at the end)."""
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    result = await coro
    current, peak = tracemalloc.get_traced_memory()
    return result, (peak - base) / MIB, (current - base) / MIB


verify_module = importlib.import_module("mindstore.backup.verify")  # the module, not the function


class _ParseCounter:
    """Counts the Extended JSON parses of backup records during one restore (the
    `decode_line` that the reading pass calls), to show each record is decoded once."""

    def __init__(self) -> None:
        self.count = 0
        self.original = verify_module.decode_line

        def counting(line: Any) -> Any:
            self.count += 1
            return self.original(line)

        verify_module.decode_line = counting  # type: ignore[assignment]

    def stop(self) -> int:
        verify_module.decode_line = self.original  # type: ignore[assignment]
        return self.count


async def _store() -> Any:
    return await mindstore.connect("embedded", database=f"bench_{uuid.uuid4().hex[:8]}")


async def run(results: dict[str, Any], *, messages: int = 100_000) -> None:
    source = await _store()
    try:
        shape = await _populate(source, messages)
        total_messages = shape["tasks"] * PER_TASK
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            # ------------------------------------------------------------ timings
            start = time.perf_counter()
            manifest = await backup(source, root / "b")
            backup_s = time.perf_counter() - start
            start = time.perf_counter()
            await verify(root / "b")
            verify_s = time.perf_counter() - start
            target = await _store()
            parses = _ParseCounter()
            start = time.perf_counter()
            try:
                report = await restore(target, root / "b")
            finally:
                restore_parses = parses.stop()
            restore_s = time.perf_counter() - start
            start = time.perf_counter()
            again = await restore(target, root / "b", mode="overwrite")  # all unchanged
            restore_again_s = time.perf_counter() - start
            await target.close()
            assert report.totals["inserted"] == sum(manifest.counts.values())
            assert again.totals["unchanged"] == sum(manifest.counts.values())
            file_bytes = sum(e.bytes for e in manifest.collections.values())

            # ------------------------------------------------------------ memory
            tracemalloc.start()
            try:
                _, backup_peak, _ = await _peak(backup(source, root / "m-all"))
                _, backup_small_peak, _ = await _peak(backup(source, root / "m-small", tenant="small"))
                _, verify_peak, _ = await _peak(verify(root / "m-all"))
                target = await _store()
                _, restore_peak, retained = await _peak(restore(target, root / "m-all"))
                await target.close()
            finally:
                tracemalloc.stop()
    finally:
        await source.close()

    results["backup"] = {
        "backend": "embedded",
        "messages": total_messages,
        "tasks": shape["tasks"],
        "records": manifest.counts,
        "data_mib_bson": round(shape["bson_bytes"] / MIB, 1),
        "backup_file_mib": round(file_bytes / MIB, 2),
        "backup_s": round(backup_s, 2),
        "backup_messages_per_s": round(total_messages / backup_s),
        "backup_mib_per_s_bson": round(shape["bson_bytes"] / MIB / backup_s, 1),
        "verify_s": round(verify_s, 2),
        "verify_messages_per_s": round(total_messages / verify_s),
        "restore_s": round(restore_s, 2),
        "restore_messages_per_s": round(total_messages / restore_s),
        "restore_again_unchanged_s": round(restore_again_s, 2),
        "restore_record_parses": restore_parses,
        "restore_parses_per_record": round(restore_parses / sum(manifest.counts.values()), 2),
        "backup_peak_mib": round(backup_peak, 1),
        "backup_peak_mib_small": round(backup_small_peak, 1),
        "small_tenant_messages": shape["small_tasks"] * PER_TASK,
        "verify_peak_mib": round(verify_peak, 1),
        "restore_peak_mib": round(restore_peak, 1),
        "restore_retained_mib": round(retained, 1),
        "restore_transient_mib": round(restore_peak - retained, 1),
    }


if __name__ == "__main__":
    out: dict[str, Any] = {}
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    asyncio.run(run(out, messages=count))
    print(json.dumps(out, indent=2))
