"""LangGraph checkpoint tuples in one canonical JSON form, whichever saver returned them.

Two savers hold the same thread when their `list` gives equal tuples: the same
checkpoints (id, channel values, versions, versions seen), metadata, parents and pending
writes. `canonical_tuple` turns one tuple into JSON so that the comparison, and the
receipt's digests, see exactly that: LangChain messages by their `message_to_dict` form,
pydantic models and dataclasses by their fields, bytes by their base64, anything else by
its type and `repr` (so two values that differ never compare equal); pending writes in
the order LangGraph applies them (`in_write_order`).
"""

from __future__ import annotations

import base64
import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict
from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointTuple
from pydantic import BaseModel

__all__ = ["canonical_tuple", "jsonable", "unstorable"]

STORABLE_INTEGERS = range(-(2**63), 2**64)
"""The integers LangGraph's serializer (msgpack) stores: signed or unsigned 64 bits."""


def jsonable(value: Any) -> Any:
    """`value` as canonical JSON (see the module doc)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, BaseMessage):
        return {"__message__": jsonable(message_to_dict(value))}
    if isinstance(value, Mapping):
        return {str(key): jsonable(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return {"__set__": sorted((jsonable(item) for item in value), key=repr)}
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, BaseModel):
        return {"__model__": type(value).__qualname__, "fields": jsonable(value.model_dump())}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"__dataclass__": type(value).__qualname__, "fields": jsonable(fields)}
    return {"__repr__": f"{type(value).__module__}.{type(value).__qualname__}", "v": repr(value)}


def canonical_tuple(item: CheckpointTuple) -> dict[str, Any]:
    """One checkpoint tuple as canonical JSON: where it is, its parent, the checkpoint,
    its metadata and its pending writes."""
    configurable = item.config["configurable"]
    parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return {
        "thread_id": str(configurable["thread_id"]),
        "checkpoint_ns": configurable.get("checkpoint_ns") or "",
        "checkpoint_id": configurable["checkpoint_id"],
        "parent_checkpoint_id": parent,
        "checkpoint": jsonable(item.checkpoint),
        "metadata": jsonable(item.metadata),
        "pending_writes": jsonable(in_write_order(list(item.pending_writes or []))),
    }


def in_write_order(writes: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
    """Pending writes by (task, index): the order LangGraph applies them in, which savers
    return in their own order (`SqliteSaver` by task and index, `MongoDBSaver` as
    inserted). A special channel's index is fixed (`WRITES_IDX_MAP`: an interrupt, a
    resume value); the others count from 0 within their task, in the order given."""
    counters: dict[str, int] = defaultdict(int)
    keyed = []
    for position, (task_id, channel, value) in enumerate(writes):
        if channel in WRITES_IDX_MAP:
            index = WRITES_IDX_MAP[channel]
        else:
            index = counters[task_id]
            counters[task_id] += 1
        keyed.append(((task_id, index, position), (task_id, channel, value)))
    return [write for _, write in sorted(keyed, key=lambda pair: pair[0])]


def unstorable(item: CheckpointTuple) -> str | None:
    """What of `item` LangGraph's serializer cannot store, if anything: an integer
    outside 64 bits, as a channel's plain value or in the metadata. Only a saver that
    keeps JSON numbers outside its serializer (`PostgresSaver`: plain channel values and
    metadata in JSONB, where a float of 2**64 or more reads back as an integer) returns
    one."""
    for channel, value in item.checkpoint["channel_values"].items():
        if isinstance(value, int) and value not in STORABLE_INTEGERS:
            return f"channel {channel!r} holds an integer beyond 64 bits"
    found = _big_integer(item.metadata, "metadata")
    return f"{found} holds an integer beyond 64 bits" if found else None


def _big_integer(value: Any, where: str) -> str | None:
    if isinstance(value, int):
        return where if value not in STORABLE_INTEGERS else None
    if isinstance(value, Mapping):
        items: Any = ((f"{where}[{key!r}]", v) for key, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{index}]", v) for index, v in enumerate(value))
    else:
        return None
    for inner, v in items:
        found = _big_integer(v, inner)
        if found:
            return found
    return None
