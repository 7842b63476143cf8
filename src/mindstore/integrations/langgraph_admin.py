"""`MindstoreSaver`'s thread-wide operations: delete, delete runs, copy, prune.

All of them work on whole documents, re-keyed or dropped by `_id` (one tenant; ids are
listed before a delete names them, as every multi-document write of mindstore does). A
thread's messages live in tasks: a copy gets its own copies of them (so deleting either
thread leaves the other whole), deleting and pruning drop the tasks nothing refers to any
more. A task is only ever deleted when its metadata says it holds this thread's messages.

A time-travel branch's task holds copies of messages another task of the thread owns
(`origin`, and that task in its metadata's `copied_from`): pruning keeps the owner task
while a kept task copies from it, so analytics still count those model calls once.
"""

from __future__ import annotations

from typing import Any

from mindstore.errors import NotFound
from mindstore.integrations import langgraph_keys as keys
from mindstore.integrations.langgraph_storage import ThreadStorage
from mindstore.integrations.langgraph_writes import REF
from mindstore.model.messages import MessageBase, Origin

CHUNK = 500


def _task_of(ident: str, ns: str, ms: dict[str, Any] | None) -> str | None:
    if not ms or ms.get("b"):
        return None
    return str(ms.get("t", keys.messages_task_id(ident, ns)))


async def _rows(
    storage: ThreadStorage, prefix: str, projection: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    query = {**storage.scope(), "_id": keys.prefix_range(prefix)}
    return await storage.checkpoints.find(query, projection).to_list(length=None)


async def _ids(collection: Any, tenant: str, prefix: str) -> list[str]:
    rows = await collection.find(
        {"tenant": tenant, "_id": keys.prefix_range(prefix)}, {"_id": 1}
    ).to_list(length=None)
    return [row["_id"] for row in rows]


async def _delete(collection: Any, tenant: str, ids: list[str]) -> None:
    for start in range(0, len(ids), CHUNK):
        await collection.delete_many({"tenant": tenant, "_id": {"$in": ids[start : start + CHUNK]}})


async def _delete_task(storage: ThreadStorage, task: str, thread: str) -> None:
    try:
        record = await storage.tasks.get(task)
    except NotFound:
        return
    metadata = record.metadata or {}
    if metadata.get("integration") == keys.MARKER and metadata.get("thread_id") == thread:
        await storage.tasks.delete(task)


async def _copied_from(storage: ThreadStorage, tasks: set[str]) -> dict[str, str]:
    """The tasks that own the messages `tasks` hold copies of, with their namespace (a
    copy keeps the first origin, so one step finds them all)."""
    found: dict[str, str] = {}
    for task in sorted(tasks):
        try:
            record = await storage.tasks.get(task)
        except NotFound:
            continue
        metadata = record.metadata or {}
        sources = metadata.get("copied_from")
        if isinstance(sources, list):
            ns = str(metadata.get("checkpoint_ns") or "")
            found.update({source: ns for source in sources if isinstance(source, str)})
    return found


def _referenced(docs: list[dict[str, Any]]) -> set[str]:
    """Tasks the writes documents refer to."""
    return {data["t"] for doc in docs for _, _, kind, data in doc.get("w") or [] if kind == REF}


async def delete_thread(storage: ThreadStorage, thread: str) -> None:
    ident = storage.ident(thread)
    prefix = keys.thread_prefix(storage.tenant, ident)
    rows = await _rows(storage, prefix, {"ms": 1, "ns": 1, "th": 1})
    tasks = {keys.messages_task_id(ident, ""), storage.home(thread, ident, "")}
    for row in rows:
        _, ns, _ = keys.row_where(row)
        tasks.add(keys.messages_task_id(ident, ns))
        task = _task_of(ident, ns, row.get("ms"))
        if task is not None:
            tasks.add(task)
    writes = await storage.writes.find(
        {"tenant": storage.tenant, "_id": keys.prefix_range(prefix)}
    ).to_list(length=None)
    tasks |= _referenced(writes)
    tasks |= set(await _copied_from(storage, tasks))
    await _delete(storage.checkpoints, storage.tenant, [row["_id"] for row in rows])
    await _delete(storage.writes, storage.tenant, [doc["_id"] for doc in writes])
    await _delete(storage.blobs, storage.tenant, await _ids(storage.blobs, storage.tenant, prefix))
    for task in sorted(tasks):
        await _delete_task(storage, task, thread)
    storage.forget_heads(prefix)


async def delete_for_runs(storage: ThreadStorage, run_ids: list[str]) -> None:
    if not run_ids:
        return
    found = await storage.checkpoints.find(
        {**storage.scope(), "md.run_id": {"$in": run_ids}}, {"_id": 1}
    ).to_list(length=None)
    for row in found:
        await _delete(
            storage.writes,
            storage.tenant,
            await _ids(storage.writes, storage.tenant, row["_id"] + "/"),
        )
    await _delete(storage.checkpoints, storage.tenant, [row["_id"] for row in found])
    storage.forget_heads()


async def copy_thread(storage: ThreadStorage, source: str, target: str) -> None:
    source_ident, target_ident = storage.ident(source), storage.ident(target)
    source_prefix = keys.thread_prefix(storage.tenant, source_ident)
    target_prefix = keys.thread_prefix(storage.tenant, target_ident)
    rows = await _rows(storage, source_prefix)
    writes = await storage.writes.find(
        {"tenant": storage.tenant, "_id": keys.prefix_range(source_prefix)}
    ).to_list(length=None)
    wanted: dict[str, str] = {}
    for row in rows:
        _, ns, _ = keys.row_where(row)
        task = _task_of(source_ident, ns, row.get("ms"))
        if task is not None:
            wanted.setdefault(task, ns)
    for task in _referenced(writes):
        wanted.setdefault(task, "")
    for task, ns in (await _copied_from(storage, set(wanted))).items():
        wanted.setdefault(task, ns)
    renamed: dict[str, str] = {}
    for task, ns in wanted.items():
        homes = (keys.messages_task_id(source_ident, ns), storage.home(source, source_ident, ns))
        renamed[task] = (
            storage.home(target, target_ident, ns)
            if task in homes
            else keys.branch_task_id(target_ident, ns, task)
        )
    for task, ns in wanted.items():
        messages = await storage.tasks.messages(task)
        for message in messages:  # the copy's copies point at the copy's own tasks
            if not isinstance(message, MessageBase) or message.origin is None:
                continue
            origin = message.origin
            if origin.task_id in renamed:
                message.origin = Origin(task_id=renamed[origin.task_id], index=origin.index)
        await storage.create_messages_task(renamed[task], target, ns, messages)
    for row in rows:
        _, ns, _ = keys.row_where(row)
        document = {key: value for key, value in row.items() if key not in ("_id", "th")}
        task = _task_of(source_ident, ns, row.get("ms"))
        if task is not None:
            moved = {key: value for key, value in row["ms"].items() if key != "t"}
            if renamed[task] != keys.messages_task_id(target_ident, ns):
                moved["t"] = renamed[task]
            document["ms"] = moved
        elif (row.get("ms") or {}).get("f") in renamed:
            document["ms"] = {**row["ms"], "f": renamed[row["ms"]["f"]]}
        if keys.thread_segment(target_ident) != target:
            document["th"] = target
        key = target_prefix + row["_id"][len(source_prefix) :]
        await storage.checkpoints.update_one(
            {"_id": key, "tenant": storage.tenant}, {"$set": document}, upsert=True
        )
    for doc in writes:
        items = [
            [index, channel, kind, {**data, "t": renamed[data["t"]]} if kind == REF else data]
            for index, channel, kind, data in doc.get("w") or []
        ]
        fields = {key: value for key, value in doc.items() if key != "_id"}
        fields["w"] = items
        key = target_prefix + doc["_id"][len(source_prefix) :]
        await storage.writes.update_one(
            {"_id": key, "tenant": storage.tenant}, {"$set": fields}, upsert=True
        )
    blobs = await storage.blobs.find(
        {"tenant": storage.tenant, "_id": keys.prefix_range(source_prefix)}
    ).to_list(length=None)
    for doc in blobs:
        key = target_prefix + doc.pop("_id")[len(source_prefix) :]
        await storage.blobs.update_one(
            {"_id": key, "tenant": storage.tenant}, {"$set": doc}, upsert=True
        )


async def prune(storage: ThreadStorage, thread: str, strategy: str) -> None:
    if strategy == "delete":
        await delete_thread(storage, thread)
        return
    ident = storage.ident(thread)
    prefix = keys.thread_prefix(storage.tenant, ident)
    rows = await _rows(storage, prefix)
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        _, ns, checkpoint_id = keys.row_where(row)
        if ns not in latest or keys.row_where(latest[ns])[2] < checkpoint_id:
            latest[ns] = row
    kept = {row["_id"] for row in latest.values()}
    kept_blobs: set[str] = set()
    kept_tasks: set[str] = set()
    for row in latest.values():
        _, ns, _ = keys.row_where(row)
        for channel, writer in (row.get("b") or {}).items():
            kept_blobs.add(keys.blob_key(storage.tenant, ident, ns, writer, channel))
        task = _task_of(ident, ns, row.get("ms"))
        if task is not None:
            kept_tasks.add(task)
    writes = await storage.writes.find(
        {"tenant": storage.tenant, "_id": keys.prefix_range(prefix)}
    ).to_list(length=None)
    kept_writes = [doc for doc in writes if keys.split_writes_key(doc["_id"])[0] in kept]
    kept_tasks |= _referenced(kept_writes)
    kept_tasks |= set(await _copied_from(storage, kept_tasks))
    dropped = [row for row in rows if row["_id"] not in kept]
    await _delete(
        storage.writes, storage.tenant, [doc["_id"] for doc in writes if doc not in kept_writes]
    )
    await _delete(storage.checkpoints, storage.tenant, [row["_id"] for row in dropped])
    blobs = await _ids(storage.blobs, storage.tenant, prefix)
    await _delete(storage.blobs, storage.tenant, [key for key in blobs if key not in kept_blobs])
    gone = {
        task
        for row in dropped
        for task in [_task_of(ident, keys.row_where(row)[1], row.get("ms"))]
        if task
    }
    gone |= _referenced([doc for doc in writes if doc not in kept_writes])
    for task in sorted(gone - kept_tasks):
        await _delete_task(storage, task, thread)
    storage.forget_heads(prefix)
