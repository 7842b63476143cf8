"""What a backup record of a LangGraph thread, an agent or a tenant's policy must look like
before restore may write it (pure, no I/O; the task records are `mindstore.backup.shape`).

The rules are those of the code that writes these documents:

* every saver document's `_id` starts ``"<tenant>/<thread segment>/<namespace segment>/"``
  with the record's own tenant (`mindstore.integrations.langgraph_keys`): a thread segment
  is the thread id when it is a key, else ``h-`` and 24 hex digits; a namespace segment is
  empty or 16 hex digits; a checkpoint id is a name without ``/`` or ``~``. A checkpoint's
  owner (`o`) and thread id (`th`) must give back its segment (a forged `o` would move the
  thread to another owner), and its namespace (`ns`) its namespace segment;
* the serialized values (``[serde type, bytes]``) are opaque: only their form is checked;
* an agent's `_id` is ``"<tenant>/<agent name>"`` of its `owner`, its aliases are keys,
  its active alias one of them; a policy's `_id` is its tenant.

Unknown fields are allowed (only ``$`` top-level keys are refused, by `shape`), so a field a
later version adds to these small documents does not make its backups unreadable.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any

from mindstore.collection_names import (
    AGENTS,
    DATA_KEYS,
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    MEMORY_ITEMS,
    POLICIES,
)
from mindstore.crypto.keyring import TENANT_KEK
from mindstore.errors import MindstoreError
from mindstore.ids import KEY_SEPARATOR, is_name
from mindstore.integrations import langgraph_keys as keys
from mindstore.memory import rules as memory_rules

from .manifest import is_key
from .shape import ShapeError, _count, _shown, _tenant, _top_level
from .threads import prefix_of

__all__ = ["UnitFacts", "check_unit"]

_HASHED = re.compile(r"h-[0-9a-f]{24}")
_NAMESPACE = re.compile(r"(|[0-9a-f]{16})")


@dataclass(frozen=True)
class UnitFacts:
    """What verify keeps of a thread, agent or policy record."""

    id: str
    tenant: str
    owner: str | None = None
    prefix: str | None = None  # the thread, for saver documents
    updated_at: _dt.datetime | None = None


def _checkpoint_id(value: str, what: str) -> str:
    if not is_name(value) or "/" in value or "~" in value:
        raise ShapeError(f"{what} must be a name without '/' or '~', got {_shown(value)}")
    return value


def _segments(record: dict[str, Any], tenant: str, pieces: int) -> list[str]:
    """The `_id` split into `pieces` parts at ``/``, checked up to the checkpoint id."""
    doc_id = record.get("_id")
    if not isinstance(doc_id, str):
        raise ShapeError(f"_id must be a string, got {_shown(doc_id)}")
    parts = doc_id.split("/", pieces - 1)
    if len(parts) != pieces or parts[0] != tenant:
        raise ShapeError(f"_id {_shown(doc_id)} is not a key of a thread of tenant {tenant!r}")
    segment, namespace = parts[1], parts[2]
    if not (_HASHED.fullmatch(segment) or keys.KEY.fullmatch(segment)):
        raise ShapeError(f"_id {_shown(doc_id)}: {_shown(segment)} is not a thread segment")
    if not _NAMESPACE.fullmatch(namespace):
        raise ShapeError(f"_id {_shown(doc_id)}: {_shown(namespace)} is not a namespace segment")
    return parts


def _typed(value: Any, what: str) -> None:
    """A serialized value: ``[serde type, bytes]``."""
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], bytes)):  # fmt: skip
        raise ShapeError(f"{what} must be [type, bytes], got {_shown(value)}")


def _mapping(record: dict[str, Any], key: str) -> dict[str, Any]:
    value = record.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ShapeError(f"{key} must be an object or null, got {_shown(value)}")
    return value


def check_checkpoint(record: Any) -> UnitFacts:
    _top_level(record)
    tenant = _tenant(record)
    _, segment, namespace, checkpoint_id = _segments(record, tenant, 4)
    _checkpoint_id(checkpoint_id, "checkpoint id")
    owner, thread = record.get("o"), record.get("th")
    if owner is not None and not is_name(owner):
        raise ShapeError(f"o must be an owner name or null, got {_shown(owner)}")
    if thread is not None and not isinstance(thread, str):
        raise ShapeError(f"th must be a thread id or null, got {_shown(thread)}")
    prefix = f"{tenant}/{segment}/"
    if prefix_of(tenant, owner, thread if thread is not None else segment) != prefix:
        raise ShapeError(
            f"_id {_shown(record['_id'])} is not the key of thread {_shown(thread or segment)} "
            f"of owner {_shown(owner)}"
        )
    ns = record.get("ns") or ""
    if not isinstance(ns, str) or keys.ns_segment(ns) != namespace:
        raise ShapeError(f"ns {_shown(ns)} does not give the namespace segment of the _id")
    parent = record.get("p")
    if parent is not None and not (isinstance(parent, bytes) and len(parent) == 16):
        if not isinstance(parent, str):
            raise ShapeError(f"p must be a checkpoint id or null, got {_shown(parent)}")
        _checkpoint_id(parent, "p")
    _typed(record.get("c"), "c")
    if record.get("mdb") is not None:
        _typed(record["mdb"], "mdb")
    _mapping(record, "md")
    messages = _mapping(record, "ms")
    if messages:
        _count(messages.get("n"), "ms.n")
        if not isinstance(messages.get("h"), bytes):
            raise ShapeError(f"ms.h must be bytes, got {_shown(messages.get('h'))}")
        if messages.get("t") is not None and not is_key(messages["t"]):
            raise ShapeError(f"ms.t must be a task id, got {_shown(messages['t'])}")
    for channel, writer in _mapping(record, "b").items():
        _checkpoint_id(writer if isinstance(writer, str) else "", f"b.{channel}")
    for channel, value in _mapping(record, "iv").items():
        _typed(value, f"iv.{channel}")
    return UnitFacts(record["_id"], tenant, owner, prefix)


def check_write(record: Any) -> UnitFacts:
    _top_level(record)
    tenant = _tenant(record)
    _, segment, _, checkpoint_id, task = _segments(record, tenant, 5)
    _checkpoint_id(checkpoint_id, "checkpoint id")
    if not task:
        raise ShapeError(f"_id {_shown(record['_id'])} names no task")
    items = record.get("w", [])
    if not isinstance(items, list):
        raise ShapeError(f"w must be a list, got {_shown(items)}")
    for index, item in enumerate(items):
        if not (isinstance(item, list) and len(item) == 4 and type(item[0]) is int
                and isinstance(item[1], str) and isinstance(item[2], str)
                and isinstance(item[3], (bytes, dict))):  # fmt: skip
            raise ShapeError(f"w[{index}] must be [index, channel, type, value]: {_shown(item)}")
    if record.get("p") is not None and not isinstance(record["p"], str):
        raise ShapeError(f"p must be a task path or null, got {_shown(record['p'])}")
    if record.get("v") is not None:
        _count(record["v"], "v")
    return UnitFacts(record["_id"], tenant, prefix=f"{tenant}/{segment}/")


def check_blob(record: Any) -> UnitFacts:
    _top_level(record)
    tenant = _tenant(record)
    _, segment, _, rest = _segments(record, tenant, 4)
    writer, _, channel = rest.partition("~")
    _checkpoint_id(writer, "writer checkpoint id")
    if not channel:
        raise ShapeError(f"_id {_shown(record['_id'])} names no channel")
    if not isinstance(record.get("t"), str) or not isinstance(record.get("b"), bytes):
        raise ShapeError("a blob needs a type t and its bytes b")
    return UnitFacts(record["_id"], tenant, prefix=f"{tenant}/{segment}/")


def check_agent(record: Any) -> UnitFacts:
    _top_level(record)
    tenant = _tenant(record)
    owner = record.get("owner")
    if not is_name(owner):
        raise ShapeError(f"owner must be an agent name, got {_shown(owner)}")
    if record.get("_id") != f"{tenant}{KEY_SEPARATOR}{owner}":
        raise ShapeError(f"_id {_shown(record.get('_id'))} is not agent {owner!r} of {tenant!r}")
    dialogs = record.get("dialogs", [])
    if not isinstance(dialogs, list):
        raise ShapeError(f"dialogs must be a list, got {_shown(dialogs)}")
    aliases = set()
    for index, entry in enumerate(dialogs):
        if not (isinstance(entry, dict) and is_key(entry.get("alias"))
                and is_name(entry.get("dialog_id"))):  # fmt: skip
            raise ShapeError(f"dialogs[{index}] must name an alias and a dialog id")
        aliases.add(entry["alias"])
    active = record.get("active_alias")
    if active is not None and active not in aliases:
        raise ShapeError(f"active_alias {_shown(active)} is not one of the agent's aliases")
    _count(record.get("version", 0), "version")
    updated = record.get("updated_at")
    for key in ("created_at", "updated_at"):
        if record.get(key) is not None and not isinstance(record[key], _dt.datetime):
            raise ShapeError(f"{key} must be a date or null, got {_shown(record[key])}")
    return UnitFacts(record["_id"], tenant, owner, updated_at=updated)


def check_policy(record: Any) -> UnitFacts:
    _top_level(record)
    tenant = _tenant(record)
    if record.get("_id") != tenant:
        raise ShapeError(f"_id {_shown(record.get('_id'))} must be the policy's tenant")
    retention = record.get("retention")
    updated = None
    if retention is not None:
        if not isinstance(retention, dict):
            raise ShapeError(f"retention must be an object or null, got {_shown(retention)}")
        days = retention.get("max_age_days")
        if days is not None and (type(days) is not int or not 1 <= days <= 100_000):
            raise ShapeError(f"retention.max_age_days must be 1-100000 or null, got {_shown(days)}")
        updated = retention.get("updated_at")
        if not isinstance(updated, _dt.datetime):
            raise ShapeError(f"retention.updated_at must be a date, got {_shown(updated)}")
    return UnitFacts(tenant, tenant, updated_at=updated)


def check_data_key(record: Any) -> UnitFacts:
    """A wrapped data key (wrapped by the tenant's key in a provider) or a shred's
    tombstone: its `_id` names its tenant and version; no key material is in the clear."""
    _top_level(record)
    tenant = _tenant(record)
    kind = record.get("kind")
    if kind == "shredded":
        if record.get("_id") != f"{tenant}/shredded":
            raise ShapeError(f"_id {_shown(record.get('_id'))} must be '<tenant>/shredded'")
        return UnitFacts(record["_id"], tenant)
    if kind != "key":
        raise ShapeError(f"kind must be 'key' or 'shredded', got {_shown(kind)}")
    version = record.get("version")
    if type(version) is not int or not 1 <= version <= 2**31 - 1:
        raise ShapeError(f"version must be a positive integer, got {_shown(version)}")
    if record.get("_id") != f"{tenant}/v{version}":
        raise ShapeError(f"_id {_shown(record.get('_id'))} must be '<tenant>/v<version>'")
    if record.get("kek") != TENANT_KEK:
        raise ShapeError("a backup holds only data keys wrapped by the tenant's own key")
    if not isinstance(record.get("wrapped"), bytes):
        raise ShapeError("wrapped must be binary")
    return UnitFacts(record["_id"], tenant)


def check_memory_item(record: Any) -> UnitFacts:
    """A long-term memory item (`mindstore.memory`): its `_id` the hash of its namespace
    and key, its path their join, its value and embeddings bytes (ciphertexts under a
    keyring), its times dates."""
    _top_level(record)
    tenant = _tenant(record)
    try:
        namespace = memory_rules.check_namespace(record.get("ns"), "ns")
        key = memory_rules.check_key(record.get("k"), "k")
    except MindstoreError as exc:
        raise ShapeError(str(exc)) from None
    if record.get("_id") != memory_rules.item_id(tenant, namespace, key):
        raise ShapeError(f"_id {_shown(record.get('_id'))} is not the item's (namespace, key)")
    if record.get("p") != memory_rules.path_of(namespace):
        raise ShapeError(f"p {_shown(record.get('p'))} is not the path of ns")
    owner = record.get("owner")
    if owner is not None and not is_name(owner):
        raise ShapeError(f"owner must be an owner or null, got {_shown(owner)}")
    if not isinstance(record.get("v"), bytes):
        raise ShapeError("v must be binary")
    if record.get("e") is not None:
        if not isinstance(record["e"], bytes):
            raise ShapeError("e must be binary or null")
        _count(record.get("d"), "d")
    for name in ("c", "updated_at", "x"):
        if record.get(name) is not None and not isinstance(record[name], _dt.datetime):
            raise ShapeError(f"{name} must be a date or null, got {_shown(record[name])}")
    ttl = record.get("t")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))):
        raise ShapeError(f"t must be a number of minutes or null, got {_shown(ttl)}")
    return UnitFacts(record["_id"], tenant, owner, updated_at=record.get("updated_at"))


_CHECKS = {
    DATA_KEYS: check_data_key,
    LANGGRAPH_CHECKPOINTS: check_checkpoint,
    LANGGRAPH_WRITES: check_write,
    LANGGRAPH_BLOBS: check_blob,
    AGENTS: check_agent,
    POLICIES: check_policy,
    MEMORY_ITEMS: check_memory_item,
}


def check_unit(collection: str, record: Any) -> UnitFacts:
    """The shape of a record of `collection` (a thread, agent or policy collection)."""
    return _CHECKS[collection](record)
