"""`MindstoreSaver`'s pending writes: one document per (checkpoint, task), items
`[index, channel, serde type, bytes]`.

A write to the `messages` channel carries the messages a node produced; the next
checkpoint appends those same messages to the thread's task. Rather than keep both copies,
that checkpoint's `put` turns the write into a reference to the task's messages
(`compact`): `[index, channel, "@ref", {"t": task, "i": first index, "n": count, "one": a
single message rather than a list, "noid": positions whose message had no id yet}]`.
Reading a checkpoint's pending writes resolves references with one read per task
(`load`); the value is the one the node wrote (ids the reducer assigned later removed).
The same is done for a blob the parent checkpoint wrote whose value is a dict holding the
messages under the channel's name (a graph's input, `{"messages": [...]}`): `REF_MAP`.
A write that does not match what was appended (a `RemoveMessage`, a rewrite) stays as it
was. Compaction is an optimisation: a write stored after its checkpoint's child (LangGraph
saves asynchronously) simply keeps its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict
from langgraph.checkpoint.base import WRITES_IDX_MAP, writes_sort_key

from mindstore.errors import Conflict
from mindstore.integrations import langgraph_keys as keys
from mindstore.integrations.langchain_messages import to_langchain
from mindstore.integrations.langgraph_storage import ThreadStorage

REF = "@ref"
REF_MAP = "@refmap"
"""A blob holding a dict (a graph's input, `{"messages": [...]}`) whose messages were
appended: `b` holds the rest of the dict (serialized, type in `bt`), `k` the key, `r` the
reference."""
ATTEMPTS = 100


async def put(
    storage: ThreadStorage,
    key: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> None:
    """Store a task's writes; an index already stored is kept (special channels replaced)."""
    items = [
        [WRITES_IDX_MAP.get(channel, index), channel, *storage.serde.dumps_typed(value)]
        for index, (channel, value) in enumerate(writes)
    ]
    query = {"_id": key, "tenant": storage.tenant}
    fields: dict[str, Any] = {"w": items}
    if task_path:
        fields["p"] = task_path
    result = await storage.writes.update_one(query, {"$setOnInsert": fields}, upsert=True)
    if result.upserted_id is not None:
        return
    for _ in range(ATTEMPTS):
        stored = await storage.writes.find_one(query)
        if stored is None:
            await storage.writes.update_one(query, {"$setOnInsert": fields}, upsert=True)
            continue
        merged = keys.merge_writes(stored.get("w") or [], items)
        if merged == stored.get("w"):
            return
        if await _replace(storage, query, stored, merged):
            return
    raise Conflict(f"put_writes: writes of task {task_id!r} kept changing")


async def _replace(
    storage: ThreadStorage, query: dict[str, Any], stored: dict[str, Any], items: list[Any]
) -> bool:
    """Replace a document's items, guarded by its change counter `v` (absent until the
    first change, so a document written once carries none)."""
    version = stored.get("v")
    guard = {"v": version} if version is not None else {"v": {"$exists": False}}
    done = await storage.writes.update_one(
        {**query, **guard}, {"$set": {"w": items, "v": int(version or 0) + 1}}
    )
    return bool(done.matched_count)


async def load(
    storage: ThreadStorage, checkpoint_keys: Sequence[str]
) -> dict[str, list[tuple[str, str, Any]]]:
    """Each checkpoint's pending writes, in `writes_sort_key` order, references resolved."""
    docs: list[dict[str, Any]] = []
    ranges = [{"_id": keys.prefix_range(key + "/")} for key in checkpoint_keys]
    for start in range(0, len(ranges), 50):
        query = {"tenant": storage.tenant, "$or": ranges[start : start + 50]}
        docs.extend(await storage.writes.find(query).to_list(length=None))
    stored = await read_refs(
        storage, [data for doc in docs for _, _, kind, data in doc.get("w") or [] if kind == REF]
    )
    found: dict[str, list[tuple[tuple[str, str, int], tuple[str, str, Any]]]] = {}
    for doc in docs:
        checkpoint_key, task_id = keys.split_writes_key(doc["_id"])
        for index, channel, kind, data in doc.get("w") or []:
            value = (
                resolve(data, stored)
                if kind == REF
                else storage.serde.loads_typed((kind, bytes(data)))
            )
            found.setdefault(checkpoint_key, []).append(
                (writes_sort_key(doc.get("p") or "", task_id, index), (task_id, channel, value))
            )
    return {
        key: [write for _, write in sorted(items, key=lambda item: item[0])]
        for key, items in found.items()
    }


Stored = dict[str, tuple[int, list[BaseMessage]]]


async def read_refs(storage: ThreadStorage, refs: Sequence[dict[str, Any]]) -> Stored:
    """The messages the references name: one read per task, of the span they cover."""
    spans: dict[str, tuple[int, int]] = {}
    for ref in refs:
        low, high = spans.get(ref["t"], (ref["i"], ref["i"]))
        spans[ref["t"]] = (min(low, ref["i"]), max(high, ref["i"] + ref["n"]))
    stored: Stored = {}
    for task, (low, high) in spans.items():
        stored[task] = (low, to_langchain(await storage.tasks.messages(task, low, high - low)))
    return stored


def resolve_blob(storage: ThreadStorage, blob: dict[str, Any], stored: Stored) -> Any:
    """A blob's value (a `REF_MAP` blob rebuilt from its rest and its messages)."""
    if blob.get("t") != REF_MAP:
        return storage.serde.loads_typed((blob["t"], bytes(blob["b"])))
    value = storage.serde.loads_typed((blob["bt"], bytes(blob["b"])))
    value[blob["k"]] = resolve(blob["r"], stored)
    return value


def resolve(ref: dict[str, Any], stored: Stored) -> Any:
    low, messages = stored[ref["t"]]
    picked = [m.model_copy() for m in messages[ref["i"] - low : ref["i"] - low + ref["n"]]]
    for position in ref.get("noid") or []:
        picked[position].id = None
    return picked[0] if ref.get("one") else picked


def match(written: Sequence[BaseMessage], appended: Sequence[BaseMessage]) -> int | None:
    """Where a write's messages sit, in order and contiguous, among the appended ones (a
    written message without an id matches the same message with the id the reducer gave it)."""
    if not written:
        return None
    wanted = [_form(m, m.id is None) for m in written]
    have = [_form(m, False) for m in appended]
    for start in range(len(have) - len(wanted) + 1):
        if all(_same(wanted[k], have[start + k]) for k in range(len(wanted))):
            return start
    return None


def _reference(
    task: str, start: int, value: Any, appended: Sequence[BaseMessage]
) -> dict[str, Any] | None:
    """A reference to `value` (a message or a list of them) among the appended messages."""
    one = isinstance(value, BaseMessage)
    written = [value] if one else value
    if not isinstance(written, list) or not all(isinstance(m, BaseMessage) for m in written):
        return None
    position = match(written, appended)
    if position is None:
        return None
    ref: dict[str, Any] = {"t": task, "i": start + position, "n": len(written)}
    if one:
        ref["one"] = True
    noid = [k for k, m in enumerate(written) if m.id is None]
    if noid:
        ref["noid"] = noid
    return ref


def _form(message: BaseMessage, without_id: bool) -> dict[str, Any]:
    data = message_to_dict(message)
    if without_id:
        data["data"] = {**data["data"], "id": None}
    return data


def _same(written: dict[str, Any], appended: dict[str, Any]) -> bool:
    if written["data"].get("id") is None:
        appended = {**appended, "data": {**appended["data"], "id": None}}
    return written == appended


async def compact(
    storage: ThreadStorage,
    parent_key: str,
    task: str,
    start: int,
    appended: Sequence[BaseMessage],
    blobs: Sequence[str] = (),
) -> None:
    """Turn the parent checkpoint's `messages` writes, and the blobs it wrote (`blobs`: their
    keys) that hold messages, into references to what was just appended (`appended` = the
    task's messages from index `start` on)."""
    if not appended:
        return
    docs = await storage.writes.find(
        {"tenant": storage.tenant, "_id": keys.prefix_range(parent_key + "/")}
    ).to_list(length=None)
    for doc in docs:
        items = [list(item) for item in doc.get("w") or []]
        changed = False
        for item in items:
            _, channel, kind, data = item
            if channel != storage.messages_channel or kind == REF:
                continue
            ref = _reference(task, start, storage.serde.loads_typed((kind, bytes(data))), appended)
            if ref is not None:
                item[2], item[3] = REF, ref
                changed = True
        if changed:
            await _replace(storage, {"_id": doc["_id"], "tenant": storage.tenant}, doc, items)
    for key in blobs:
        blob = await storage.blobs.find_one({"_id": key, "tenant": storage.tenant})
        if blob is None or blob.get("t") == REF_MAP:
            continue
        value = storage.serde.loads_typed((blob["t"], bytes(blob["b"])))
        if not isinstance(value, dict) or storage.messages_channel not in value:
            continue
        ref = _reference(task, start, value[storage.messages_channel], appended)
        if ref is None:
            continue
        rest = {k: v for k, v in value.items() if k != storage.messages_channel}
        kind, data = storage.serde.dumps_typed(rest)
        await storage.blobs.update_one(
            {"_id": key, "tenant": storage.tenant, "t": blob["t"]},
            {
                "$set": {
                    "t": REF_MAP,
                    "bt": kind,
                    "b": data,
                    "k": storage.messages_channel,
                    "r": ref,
                }
            },
        )
