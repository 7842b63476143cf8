"""The LangGraph saver's keys and small decisions, pure (no I/O, no LangGraph import).

Every document of the saver is keyed by a string `_id` that starts with the tenant and the
thread, so one tenant's thread is a contiguous `_id` range (found with `$gt`/`$lt` and the
tenant by equality, which routes on a cluster sharded on `(tenant, _id)`):

    checkpoint  <tenant>/<thread>/<ns>/<checkpoint id>
    writes      <tenant>/<thread>/<ns>/<checkpoint id>/<task id>
    blob        <tenant>/<thread>/<ns>/<checkpoint id>~<channel>

`<thread>` is the thread id when it is a key (``[A-Za-z0-9_-.:]``, at most 100
characters), else ``h-`` and a hash of it (the id itself is then kept in the document);
`<ns>` is empty for the root namespace and a hash of the namespace otherwise. A blob is
keyed by the checkpoint that wrote that version of the channel; every later checkpoint
holding the same version names that writer, so a value is stored once however many
checkpoints hold it (and two branches that both write "version 5" never share a key).

The `messages` channel lives in mindstore tasks: the root namespace's messages in the task
`task_id_for(thread)` names (`conversation_ids`; a checkpoint row that names no task means
`messages_task_id`, which is the same task for a thread id that is a key on a view without
owner, and the task rows stored before that rule used), a sub-graph's in a task per
namespace, a time-travel branch's or a rewritten list's in a task per checkpoint. A
checkpoint records which task, how many of its messages, and a fingerprint chain over
them (`chain`), so a later step can tell whether its messages extend what is stored
(append the new ones) or rewrote it (start a task holding that version).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from mindstore.errors import ValidationError
from mindstore.ids import check_name, is_name

MARKER = "langgraph"
"""`metadata["integration"]` of the tasks that hold LangGraph threads' messages."""
KEY = re.compile(r"[A-Za-z0-9_\-.:]{1,100}")
SIMPLE_FILTER_KEY = re.compile(r"[A-Za-z0-9_\-]{1,100}")
EMPTY_CHAIN = b"\x00" * 8


def _hash(*parts: str, size: int = 12) -> str:
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"), digest_size=size)
    return digest.hexdigest()


def thread_segment(thread_id: str) -> str:
    """The thread's part of every key (the id itself when it is a key, else a hash)."""
    return thread_id if KEY.fullmatch(thread_id) else "h-" + _hash(thread_id)


def ns_segment(checkpoint_ns: str) -> str:
    return "" if checkpoint_ns == "" else _hash(checkpoint_ns, size=8)


def scope_prefix(tenant: str, thread_id: str, checkpoint_ns: str) -> str:
    """What every key of one (thread, namespace) starts with, ending in `/`."""
    return f"{tenant}/{thread_segment(thread_id)}/{ns_segment(checkpoint_ns)}/"


def thread_prefix(tenant: str, thread_id: str) -> str:
    return f"{tenant}/{thread_segment(thread_id)}/"


def checkpoint_key(tenant: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    return scope_prefix(tenant, thread_id, checkpoint_ns) + checkpoint_id


def writes_key(
    tenant: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str
) -> str:
    return f"{checkpoint_key(tenant, thread_id, checkpoint_ns, checkpoint_id)}/{pack_task(task_id)}"


def pack_task(task_id: str) -> str:
    """A task id as the last segment of a writes key: a canonical UUID (LangGraph's task
    ids) as ``=`` and its 16 bytes in base64url; an id holding ``/`` or starting with ``=``
    or ``~`` as ``~`` and its UTF-8 in base64url; any other id as it is."""
    try:
        parsed = uuid.UUID(task_id)
    except ValueError:
        parsed = None
    if parsed is not None and str(parsed) == task_id:
        return "=" + base64.urlsafe_b64encode(parsed.bytes).decode().rstrip("=")
    if "/" in task_id or task_id[:1] in ("=", "~"):
        return "~" + base64.urlsafe_b64encode(
            task_id.encode("utf-8", "surrogatepass")
        ).decode().rstrip("=")
    return task_id


def unpack_task(segment: str) -> str:
    if segment[:1] in ("=", "~"):
        data = base64.urlsafe_b64decode(segment[1:] + "=" * (-len(segment[1:]) % 4))
        return (
            str(uuid.UUID(bytes=data))
            if segment[0] == "="
            else data.decode("utf-8", "surrogatepass")
        )
    return segment


def split_writes_key(key: str) -> tuple[str, str]:
    """(checkpoint key, task id) of a writes key."""
    checkpoint, segment = key.rsplit("/", 1)
    return checkpoint, unpack_task(segment)


CHECKPOINT_FIELDS = ("v", "ts", "channel_versions", "versions_seen", "updated_channels")


def pack_checkpoint(checkpoint: Mapping[str, Any]) -> list[Any]:
    """A checkpoint without its id and values, without repeated names: the channels are
    listed once and `versions_seen` / `updated_channels` refer to them by position."""
    versions = dict(checkpoint.get("channel_versions") or {})
    names = list(versions)
    position = {name: index for index, name in enumerate(names)}

    def ref(channel: str) -> Any:
        return position.get(channel, channel)

    seen = [
        [node, [[ref(channel), version] for channel, version in channels.items()]]
        for node, channels in (checkpoint.get("versions_seen") or {}).items()
    ]
    updated = checkpoint.get("updated_channels")
    rest = {
        key: value
        for key, value in checkpoint.items()
        if key not in (*CHECKPOINT_FIELDS, "id", "channel_values")
    }
    return [
        checkpoint.get("v"),
        pack_ts(checkpoint.get("ts")),
        names,
        list(versions.values()),
        seen,
        None if updated is None else [ref(channel) for channel in updated],
        rest,
    ]


def unpack_checkpoint(packed: Sequence[Any]) -> dict[str, Any]:
    """The checkpoint `pack_checkpoint` packed (without `id` and `channel_values`)."""
    version, ts, names, values, seen, updated, rest = packed

    def name(channel: Any) -> str:
        return names[channel] if isinstance(channel, int) else channel  # type: ignore[no-any-return]

    return {
        **rest,
        "v": version,
        "ts": unpack_ts(ts),
        "channel_versions": dict(zip(names, values, strict=True)),
        "versions_seen": {
            node: {name(channel): v for channel, v in channels} for node, channels in seen
        },
        "updated_channels": None if updated is None else [name(channel) for channel in updated],
    }


def blob_key(tenant: str, thread_id: str, checkpoint_ns: str, writer: str, channel: str) -> str:
    return f"{scope_prefix(tenant, thread_id, checkpoint_ns)}{writer}~{channel}"


def prefix_range(prefix: str) -> dict[str, str]:
    """`_id` strictly inside `prefix` (which ends in `/`): `$gt` the prefix, `$lt` it with
    its last character bumped (`/` -> `0`)."""
    return {"$gt": prefix, "$lt": prefix[:-1] + chr(ord(prefix[-1]) + 1)}


def messages_task_id(thread_id: str, checkpoint_ns: str) -> str:
    """The task holding a (thread, namespace)'s messages (the thread id for the root)."""
    segment = thread_segment(thread_id)
    if checkpoint_ns == "" and not segment.startswith("h-"):
        return segment
    return "lg-" + _hash(thread_id, checkpoint_ns, size=16)


def branch_task_id(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """The task of a branch started at a checkpoint (time travel from an earlier step)."""
    return "lg-" + _hash(thread_id, checkpoint_ns, checkpoint_id, size=16)


def chain(hashes: Iterable[bytes], start: bytes = EMPTY_CHAIN) -> list[bytes]:
    """The fingerprint chain: element k covers the first k items (element 0 is `start`)."""
    out = [start]
    for item in hashes:
        out.append(hashlib.blake2b(out[-1] + item, digest_size=8).digest())
    return out


def fingerprint(value: Any) -> bytes:
    """A message's fingerprint (its dict form, any key order)."""
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), default=repr, ensure_ascii=False
    )
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def merge_writes(stored: Sequence[Sequence[Any]], new: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """A task's writes after another `put_writes`: an index already stored is kept unless it
    is a special channel's (negative index: errors, interrupts, resumes), which is replaced."""
    by_index: dict[int, list[Any]] = {int(item[0]): list(item) for item in stored}
    for item in new:
        index = int(item[0])
        if index >= 0 and index in by_index:
            continue
        by_index[index] = list(item)
    return [by_index[index] for index in sorted(by_index, key=lambda i: (i < 0, abs(i)))]


def split_filter(filter: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(query on stored metadata, all conditions): only plain keys with scalar values go
    into the query; every condition is checked again on the decoded metadata."""
    query: dict[str, Any] = {}
    conditions = dict(filter or {})
    for key, value in conditions.items():
        if (
            isinstance(key, str)
            and SIMPLE_FILTER_KEY.fullmatch(key)
            and (value is None or isinstance(value, (str, bool, int, float)))
        ):
            query[f"md.{key}"] = value
    return query, conditions


def matches(metadata: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    return all(metadata.get(key) == value for key, value in conditions.items())


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def pack_ts(value: Any) -> Any:
    """An ISO UTC timestamp as microseconds since the epoch when that gives it back exactly."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
        if moment.tzinfo is not None and moment.utcoffset() == timedelta(0):
            packed = (moment - EPOCH) // timedelta(microseconds=1)
            if unpack_ts(packed) == value:
                return packed
    return value


def unpack_ts(value: Any) -> Any:
    return (EPOCH + timedelta(microseconds=value)).isoformat() if isinstance(value, int) else value


def pack_id(value: str | None) -> str | bytes | None:
    """A checkpoint id as its 16 bytes when it is a canonical UUID (LangGraph's are)."""
    if value is None:
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return value
    return parsed.bytes if str(parsed) == value else value


def unpack_id(value: Any) -> str | None:
    return str(uuid.UUID(bytes=bytes(value))) if isinstance(value, (bytes, bytearray)) else value


def check_checkpoint_id(value: Any) -> str:
    checked = check_name(value, "checkpoint_id")
    if "/" in checked or "~" in checked:
        raise ValidationError(f"invalid checkpoint_id: no '/' or '~', got {checked!r}")
    return checked


def row_where(row: dict[str, Any]) -> tuple[str, str, str]:
    """(thread id, namespace, checkpoint id) of a checkpoint row."""
    _, thread_part, _, checkpoint_id = row["_id"].split("/", 3)
    return row.get("th") or thread_part, row.get("ns") or "", checkpoint_id


class Identified(Protocol):
    """A LangChain message as `message_ids` reads it: its id only."""

    @property
    def id(self) -> str | None: ...


def message_ids(
    value: Sequence[Identified], start: int, stop: int, fingerprints: Sequence[bytes]
) -> list[str | None]:
    """The message id of each of `value[start:stop]`: its LangChain id when that is a name
    not used before in `value` (None: `from_langchain` keeps it), else one derived from
    the fingerprint chain at its position, so a retried put stores the same ids."""
    seen = {m.id for m in value[:start] if isinstance(m.id, str)}
    out: list[str | None] = []
    for index in range(start, stop):
        lc_id = value[index].id
        if isinstance(lc_id, str) and is_name(lc_id) and lc_id not in seen:
            out.append(None)
            seen.add(lc_id)
        else:
            out.append("lg-" + fingerprints[index + 1].hex())
    return out
