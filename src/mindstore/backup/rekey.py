"""The stored form restore writes: per-tenant task keys, and another tenant's ids (pure).

A task's identity is (tenant, task id), and its document key (and its dialog node's) is
``task_key(tenant, task_id)`` = ``"<tenant>/<task id>"``. Backups may hold either that form
or the bare task id that documents written before per-tenant ids used; restore always
writes the per-tenant form, so a legacy backup restores into the current form.

``as_tenant`` moves records into another tenant. Everything that names the tenant
changes with it, and nothing else:

* task and dialog-node ``_id``: ``task_key(new tenant, task id)``;
* dialog-node ``parent_id``, ``root_id``, ``ancestors`` and payload ``task_id``: bare ids
  stay bare (they are resolved within the record's tenant); a per-tenant key is re-keyed;
* a sealed page's ``task`` and ``_id``: its task's new key, and ``page_key`` of it;
* payload ``_id``: payload ids are hashes that include the tenant, so a payload moved to
  another tenant gets `moved_payload_id` (sha256 of the new tenant and the old id, 32 hex
  digits: deterministic, so restoring twice writes the same ids), and every payload
  marker in the task's messages is rewritten to it. With the same tenant the id is kept;
* a LangGraph saver document's ``_id`` (``"<tenant>/<thread>/..."``): the tenant part.
  Nothing else in it names the tenant: the thread segment is derived from the owner and
  the thread id, and the messages tasks it names (`ms.t`, write references) are bare ids;
* an agent's ``_id`` (``"<tenant>/<agent name>"``) and a policy's (the tenant): the tenant;
* a memory item's ``_id`` (``"<tenant>/<hash of its namespace and key>"``): the tenant part.

Each function takes a record and returns a new one (key order kept; the input is not
modified). They expect records that passed `mindstore.backup.shape`. ``keyed=False``
writes the legacy bare ``_id`` instead, for a database whose repositories still use it
(see `mindstore.backup.restore`); references are left as they are then.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mindstore.ids import KEY_SEPARATOR, page_key, task_id_of, task_key
from mindstore.payloads import MARKER_PREFIX

__all__ = [
    "moved_payload_id",
    "rekey_agent",
    "rekey_node",
    "rekey_page",
    "rekey_payload",
    "rekey_policy",
    "rekey_record",
    "rekey_saver",
    "rekey_task",
]


def moved_payload_id(tenant: str, payload_id: str) -> str:
    """The id of a payload moved to `tenant`: sha256 of ``"<tenant>\\x00<old id>"``, 32 hex."""
    return hashlib.sha256(f"{tenant}\x00{payload_id}".encode()).hexdigest()[:32]


def _target(record: dict[str, Any], as_tenant: str | None) -> tuple[str, str]:
    source = record["tenant"]
    return source, as_tenant if as_tenant is not None else source


def _ref(value: Any, source: str, target: str) -> Any:
    """A stored reference to a task or dialog: bare stays bare, a key is re-keyed."""
    if isinstance(value, str) and KEY_SEPARATOR in value:
        prefix, bare = value.split(KEY_SEPARATOR, 1)
        if prefix == source:
            return task_key(target, bare)
    return value


def _markers(value: Any, target: str) -> Any:
    """`value` with every payload marker pointing at the payload's id in `target`."""
    kind = type(value)
    if kind is str:
        if value.startswith(MARKER_PREFIX):
            return MARKER_PREFIX + moved_payload_id(target, value[len(MARKER_PREFIX) :])
        return value
    if kind is dict:
        return {key: _markers(item, target) for key, item in value.items()}
    if kind is list:
        return [_markers(item, target) for item in value]
    return value


def _replace(record: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    return {key: changes.get(key, value) for key, value in record.items()}


def _with_messages(record: dict[str, Any], changes: dict[str, Any], source: str,
                   target: str) -> dict[str, Any]:  # fmt: skip
    """`record` with `changes`, and the payload markers of its `messages` (a task's or a
    sealed page's) moved with the payloads when the tenant changes."""
    if target != source and "messages" in record:
        changes["messages"] = _markers(record["messages"], target)
    return _replace(record, changes)


def _key(target: str, stored: str, keyed: bool) -> str:
    bare = task_id_of(stored)
    return task_key(target, bare) if keyed else bare


def rekey_task(record: dict[str, Any], as_tenant: str | None = None, *,
               keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """A task record in the per-tenant form of its (new) tenant."""
    source, target = _target(record, as_tenant)
    changes: dict[str, Any] = {"_id": _key(target, record["_id"], keyed), "tenant": target}
    return _with_messages(record, changes, source, target)


def rekey_node(record: dict[str, Any], as_tenant: str | None = None, *,
               keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """A dialog node in the per-tenant form of its (new) tenant."""
    source, target = _target(record, as_tenant)
    changes: dict[str, Any] = {"_id": _key(target, record["_id"], keyed), "tenant": target}
    for key in ("parent_id", "root_id"):
        if key in record:
            changes[key] = _ref(record[key], source, target)
    if isinstance(record.get("ancestors"), list):
        changes["ancestors"] = [_ref(a, source, target) for a in record["ancestors"]]
    return _replace(record, changes)


def rekey_payload(record: dict[str, Any], as_tenant: str | None = None, *,
                  keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """A payload of the (new) tenant: a new id only when the tenant changes (its `_id` is
    a hash, not a task key, so `keyed` does not matter)."""
    source, target = _target(record, as_tenant)
    changes: dict[str, Any] = {"tenant": target}
    if target != source:
        changes["_id"] = moved_payload_id(target, record["_id"])
    if "task_id" in record:
        changes["task_id"] = _ref(record["task_id"], source, target)
    return _replace(record, changes)


def rekey_page(record: dict[str, Any], as_tenant: str | None = None, *,
               keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """A sealed page of a task in the (new) tenant: its task key and `_id` follow the task's
    (``page_key(task key, page)``), its payload markers move with the payloads."""
    source, target = _target(record, as_tenant)
    task = _key(target, record["task"], keyed)
    changes: dict[str, Any] = {
        "_id": page_key(task, record["page"]),
        "tenant": target,
        "task": task,
    }
    return _with_messages(record, changes, source, target)


def rekey_saver(record: dict[str, Any], as_tenant: str | None = None, *,
                keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """A LangGraph checkpoint, write or blob in the (new) tenant: its `_id`'s tenant part."""
    source, target = _target(record, as_tenant)
    doc_id = record["_id"]
    if target != source and doc_id.startswith(source + KEY_SEPARATOR):
        doc_id = target + doc_id[len(source) :]
    return _replace(record, {"_id": doc_id, "tenant": target})


def rekey_agent(record: dict[str, Any], as_tenant: str | None = None, *,
                keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """An agent's aliases in the (new) tenant (`_id` = ``"<tenant>/<agent name>"``)."""
    _, target = _target(record, as_tenant)
    return _replace(record, {"_id": f"{target}{KEY_SEPARATOR}{record['owner']}", "tenant": target})


def rekey_policy(record: dict[str, Any], as_tenant: str | None = None, *,
                 keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """A tenant's policy, as the (new) tenant's (`_id` = the tenant)."""
    _, target = _target(record, as_tenant)
    return _replace(record, {"_id": target, "tenant": target})


_BY_COLLECTION = {
    "tasks": rekey_task,
    "task_pages": rekey_page,
    "dialog_nodes": rekey_node,
    "payloads": rekey_payload,
    "langgraph_checkpoints": rekey_saver,
    "langgraph_writes": rekey_saver,
    "langgraph_blobs": rekey_saver,
    "agents": rekey_agent,
    "policies": rekey_policy,
    # `<tenant>/<hash of namespace and key>`: the hash names no tenant
    "memory_items": rekey_saver,
    # a wrapped data key is bound to its tenant: moved, it no longer unwraps, like the
    # content it sealed (docs/encryption.md, "Limits")
    "data_keys": rekey_saver,
}


def rekey_record(collection: str, record: dict[str, Any], as_tenant: str | None = None, *,
                 keyed: bool = True) -> dict[str, Any]:  # fmt: skip
    """The rekey function of the record's collection (`rekey_task`, `rekey_page`, ...)."""
    return _BY_COLLECTION[collection](record, as_tenant, keyed=keyed)
