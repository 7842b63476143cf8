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
from mindstore.integrations.langgraph_writes import REF
from mindstore.model.messages import MessageBase, Origin

MindstoreSaver = Any
"""The saver these functions serve (`mindstore.integrations.langgraph.MindstoreSaver`;
named here without importing it, which would be a cycle)."""

CHUNK = 500


def _task_of(ident: str, ns: str, ms: dict[str, Any] | None) -> str | None:
    if not ms or ms.get("b"):
        return None
    return str(ms.get("t", keys.messages_task_id(ident, ns)))


async def _rows(
    saver: MindstoreSaver, prefix: str, projection: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    query = {**saver._scope(), "_id": keys.prefix_range(prefix)}
    return await saver._checkpoints.find(query, projection).to_list(length=None)  # type: ignore[no-any-return]


async def _ids(collection: Any, tenant: str, prefix: str) -> list[str]:
    rows = await collection.find(
        {"tenant": tenant, "_id": keys.prefix_range(prefix)}, {"_id": 1}
    ).to_list(length=None)
    return [row["_id"] for row in rows]


async def _delete(collection: Any, tenant: str, ids: list[str]) -> None:
    for start in range(0, len(ids), CHUNK):
        await collection.delete_many({"tenant": tenant, "_id": {"$in": ids[start : start + CHUNK]}})


async def _delete_task(saver: MindstoreSaver, task: str, thread: str) -> None:
    try:
        record = await saver._tasks.get(task)
    except NotFound:
        return
    metadata = record.metadata or {}
    if metadata.get("integration") == keys.MARKER and metadata.get("thread_id") == thread:
        await saver._tasks.delete(task)


async def _copied_from(saver: MindstoreSaver, tasks: set[str]) -> dict[str, str]:
    """The tasks that own the messages `tasks` hold copies of, with their namespace (a
    copy keeps the first origin, so one step finds them all)."""
    found: dict[str, str] = {}
    for task in sorted(tasks):
        try:
            record = await saver._tasks.get(task)
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


async def delete_thread(saver: MindstoreSaver, thread: str) -> None:
    ident = saver._ident(thread)
    prefix = keys.thread_prefix(saver.tenant, ident)
    rows = await _rows(saver, prefix, {"ms": 1, "ns": 1, "th": 1})
    tasks = {keys.messages_task_id(ident, ""), saver._home(thread, ident, "")}
    for row in rows:
        _, ns, _ = keys.row_where(row)
        tasks.add(keys.messages_task_id(ident, ns))
        task = _task_of(ident, ns, row.get("ms"))
        if task is not None:
            tasks.add(task)
    writes = await saver._writes.find(
        {"tenant": saver.tenant, "_id": keys.prefix_range(prefix)}
    ).to_list(length=None)
    tasks |= _referenced(writes)
    tasks |= set(await _copied_from(saver, tasks))
    await _delete(saver._checkpoints, saver.tenant, [row["_id"] for row in rows])
    await _delete(saver._writes, saver.tenant, [doc["_id"] for doc in writes])
    await _delete(saver._blobs, saver.tenant, await _ids(saver._blobs, saver.tenant, prefix))
    for task in sorted(tasks):
        await _delete_task(saver, task, thread)
    saver._heads = {k: v for k, v in saver._heads.items() if not k.startswith(prefix)}


async def delete_for_runs(saver: MindstoreSaver, run_ids: list[str]) -> None:
    if not run_ids:
        return
    found = await saver._checkpoints.find(
        {**saver._scope(), "md.run_id": {"$in": run_ids}}, {"_id": 1}
    ).to_list(length=None)
    for row in found:
        await _delete(
            saver._writes, saver.tenant, await _ids(saver._writes, saver.tenant, row["_id"] + "/")
        )
    await _delete(saver._checkpoints, saver.tenant, [row["_id"] for row in found])
    saver._heads.clear()


async def copy_thread(saver: MindstoreSaver, source: str, target: str) -> None:
    source_ident, target_ident = saver._ident(source), saver._ident(target)
    source_prefix = keys.thread_prefix(saver.tenant, source_ident)
    target_prefix = keys.thread_prefix(saver.tenant, target_ident)
    rows = await _rows(saver, source_prefix)
    writes = await saver._writes.find(
        {"tenant": saver.tenant, "_id": keys.prefix_range(source_prefix)}
    ).to_list(length=None)
    wanted: dict[str, str] = {}
    for row in rows:
        _, ns, _ = keys.row_where(row)
        task = _task_of(source_ident, ns, row.get("ms"))
        if task is not None:
            wanted.setdefault(task, ns)
    for task in _referenced(writes):
        wanted.setdefault(task, "")
    for task, ns in (await _copied_from(saver, set(wanted))).items():
        wanted.setdefault(task, ns)
    renamed: dict[str, str] = {}
    for task, ns in wanted.items():
        homes = (keys.messages_task_id(source_ident, ns), saver._home(source, source_ident, ns))
        renamed[task] = (
            saver._home(target, target_ident, ns)
            if task in homes
            else keys.branch_task_id(target_ident, ns, task)
        )
    for task, ns in wanted.items():
        messages = await saver._tasks.messages(task)
        for message in messages:  # the copy's copies point at the copy's own tasks
            origin = message.origin if isinstance(message, MessageBase) else None
            if origin is not None and origin.task_id in renamed:
                message.origin = Origin(task_id=renamed[origin.task_id], index=origin.index)
        await saver._create(renamed[task], target, ns, messages)
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
        await saver._checkpoints.update_one(
            {"_id": key, "tenant": saver.tenant}, {"$set": document}, upsert=True
        )
    for doc in writes:
        items = [
            [index, channel, kind, {**data, "t": renamed[data["t"]]} if kind == REF else data]
            for index, channel, kind, data in doc.get("w") or []
        ]
        fields = {key: value for key, value in doc.items() if key != "_id"}
        fields["w"] = items
        key = target_prefix + doc["_id"][len(source_prefix) :]
        await saver._writes.update_one(
            {"_id": key, "tenant": saver.tenant}, {"$set": fields}, upsert=True
        )
    blobs = await saver._blobs.find(
        {"tenant": saver.tenant, "_id": keys.prefix_range(source_prefix)}
    ).to_list(length=None)
    for doc in blobs:
        key = target_prefix + doc.pop("_id")[len(source_prefix) :]
        await saver._blobs.update_one(
            {"_id": key, "tenant": saver.tenant}, {"$set": doc}, upsert=True
        )


async def prune(saver: MindstoreSaver, thread: str, strategy: str) -> None:
    if strategy == "delete":
        await delete_thread(saver, thread)
        return
    ident = saver._ident(thread)
    prefix = keys.thread_prefix(saver.tenant, ident)
    rows = await _rows(saver, prefix)
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
            kept_blobs.add(keys.blob_key(saver.tenant, ident, ns, writer, channel))
        task = _task_of(ident, ns, row.get("ms"))
        if task is not None:
            kept_tasks.add(task)
    writes = await saver._writes.find(
        {"tenant": saver.tenant, "_id": keys.prefix_range(prefix)}
    ).to_list(length=None)
    kept_writes = [doc for doc in writes if keys.split_writes_key(doc["_id"])[0] in kept]
    kept_tasks |= _referenced(kept_writes)
    kept_tasks |= set(await _copied_from(saver, kept_tasks))
    dropped = [row for row in rows if row["_id"] not in kept]
    await _delete(
        saver._writes, saver.tenant, [doc["_id"] for doc in writes if doc not in kept_writes]
    )
    await _delete(saver._checkpoints, saver.tenant, [row["_id"] for row in dropped])
    blobs = await _ids(saver._blobs, saver.tenant, prefix)
    await _delete(saver._blobs, saver.tenant, [key for key in blobs if key not in kept_blobs])
    gone = {
        task
        for row in dropped
        for task in [_task_of(ident, keys.row_where(row)[1], row.get("ms"))]
        if task
    }
    gone |= _referenced([doc for doc in writes if doc not in kept_writes])
    for task in sorted(gone - kept_tasks):
        await _delete_task(saver, task, thread)
    saver._heads = {k: v for k, v in saver._heads.items() if not k.startswith(prefix)}
