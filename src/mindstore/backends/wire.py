"""What a wire command says, on either backend: pure functions over command documents.

Which commands are housekeeping rather than work mindstore asked for, which fields are
per-connection gossip the driver or server adds, the `RecordedCommand` fields (collection,
filter, update, ...) a command document describes, and pymongo's listener kinds. Shared by
the recorder's `RecorderListener` (a real server) and the embedded backend's reporting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import bson
from pymongo import monitoring

__all__ = [
    "COMMAND_OVERHEAD_FIELDS",
    "IGNORED_COMMANDS",
    "LISTENER_TYPES",
    "REPLY_OVERHEAD_FIELDS",
    "EventListener",
    "bson_size",
    "cursor_info",
    "describe_command",
    "split_overhead",
]

#: Commands that are handshakes, heartbeats, authentication or housekeeping, not work
#: mindstore asked for. Compared in lower case.
IGNORED_COMMANDS = frozenset(
    {
        "hello",
        "ismaster",
        "ping",
        "buildinfo",
        "endsessions",
        "saslstart",
        "saslcontinue",
        "authenticate",
        "getnonce",
        "getlasterror",
        "logout",
        "killallsessions",
        "refreshsessions",
        "serverstatus",
        "getparameter",
        "getcmdlineopts",
        "connectionstatus",
        "replsetgetstatus",
    }
)

#: The listener kinds pymongo accepts in a client's ``event_listeners``.
LISTENER_TYPES = (
    monitoring.CommandListener,
    monitoring.ServerListener,
    monitoring.ServerHeartbeatListener,
    monitoring.TopologyListener,
    monitoring.ConnectionPoolListener,
)
#: Any of them (pymongo's own name for the union is private).
EventListener: TypeAlias = (
    monitoring.CommandListener
    | monitoring.ServerListener
    | monitoring.ServerHeartbeatListener
    | monitoring.TopologyListener
    | monitoring.ConnectionPoolListener
)

#: Fields the driver adds to commands that carry no payload of the operation.
COMMAND_OVERHEAD_FIELDS = ("lsid", "$clusterTime", "txnNumber", "$readPreference")
#: Fields a server adds to replies that carry no payload of the operation.
REPLY_OVERHEAD_FIELDS = (
    "$clusterTime",
    "operationTime",
    "electionId",
    "opTime",
    "$gleStats",
    "lastCommittedOpTime",
    "$configServerState",
    "$topologyTime",
)


def bson_size(document: Mapping[str, Any]) -> int:
    """`len(bson.encode(document))`."""
    return len(bson.encode(document))


def split_overhead(doc: Mapping[str, Any], fields: tuple[str, ...]) -> tuple[int, int]:
    """(payload size, overhead size) of a command or reply document."""
    try:
        total = bson_size(doc)
        if any(f in doc for f in fields):
            stripped = {k: v for k, v in doc.items() if k not in fields}
            payload = bson_size(stripped)
        else:
            payload = total
    except Exception:  # pragma: no cover - best effort on exotic documents
        return 0, 0
    return payload, total - payload


def describe_command(name: str, command: Mapping[str, Any]) -> dict[str, Any]:
    """The RecordedCommand fields (collection, filter, update, ...) of a wire command."""
    fields: dict[str, Any] = {}
    target = command.get(name) if name in command else next(iter(command.values()), None)
    if isinstance(target, str):
        fields["collection"] = target
    lname = name.lower()
    if lname == "find":
        fields["filter"] = command.get("filter")
        fields["projection"] = command.get("projection")
        fields["sort"] = _sort(command.get("sort"))
    elif lname == "aggregate":
        fields["pipeline"] = list(command.get("pipeline") or [])
    elif lname == "update":
        updates = list(command.get("updates") or [])
        fields["statements"] = len(updates)
        fields["writes"] = [
            {"q": u.get("q"), "u": u.get("u"), "multi": bool(u.get("multi"))}
            | ({"sort": _sort(u["sort"])} if u.get("sort") else {})
            for u in updates
        ]
        if updates:
            fields["filter"] = updates[0].get("q")
            fields["update"] = updates[0].get("u")
    elif lname == "delete":
        deletes = list(command.get("deletes") or [])
        fields["statements"] = len(deletes)
        fields["writes"] = [{"q": d.get("q"), "limit": int(d.get("limit") or 0)} for d in deletes]
        if deletes:
            fields["filter"] = deletes[0].get("q")
    elif lname == "insert":
        docs = list(command.get("documents") or [])
        fields["statements"] = len(docs)
        fields["documents"] = docs
    elif lname == "findandmodify":
        fields["filter"] = command.get("query")
        fields["update"] = command.get("update")
        fields["projection"] = command.get("fields")
        fields["sort"] = _sort(command.get("sort"))
    elif lname in ("count", "distinct"):
        fields["filter"] = command.get("query")
        if lname == "distinct" and isinstance(command.get("key"), str):
            fields["key"] = command["key"]
    return fields


def _sort(spec: Any) -> list[tuple[str, Any]] | None:
    """A command's sort document as ``[(field, direction), ...]`` in its order (None: none)."""
    if not isinstance(spec, Mapping) or not spec:
        return None
    return [(str(field), direction) for field, direction in spec.items()]


def cursor_info(reply: Mapping[str, Any]) -> tuple[int | None, int]:
    cursor = reply.get("cursor")
    if not isinstance(cursor, Mapping):
        return None, 0
    batch = cursor.get("firstBatch", cursor.get("nextBatch")) or []
    return cursor.get("id"), len(batch)
