"""What a backup record must look like before restore may write it (pure, no I/O).

The manifest's checksums prove that the files are the ones the manifest describes, not
that a mindstore wrote them: anyone can edit a record and recompute every hash. So each
record is also checked for the shape mindstore itself writes, and a record that could
act on the target database is refused:

* ids are plain strings in mindstore's id alphabets (`mindstore.ids`): a task's or dialog
  node's ``_id`` is either the bare task id (documents written before task ids were per
  tenant) or ``"<tenant>/<task id>"`` whose tenant part is the record's own ``tenant``;
  message, tool-call and entry ids and owners are names; payload ids are hex digests.
  An ``_id`` such as ``{"$gt": ""}`` would otherwise become a filter in restore;
* no top-level key starts with ``$`` (the server refuses such documents, half-way
  through a restore);
* a task's header agrees with its messages: it is recomputed from the messages with the
  planner (`derive_header`), and every stored header field (read as the repositories read
  it, `header_from_stored`), and each message's ``scope`` and ``depth``, must equal the
  recomputed value. A forged ``seq`` would otherwise make the task unwritable after the
  restore. The tail is not stored (it is the last message); a ``tail`` field left by an
  earlier version is ignored, as the repositories ignore it. Messages may be in the lean
  stored form or in the form written before it (every field written out,
  docs/data-model.md); ``size_bytes`` is the messages' exact BSON size, or, once a message
  of the earlier form was patched, at most that message's full form above it
  (`size_allowance`);
* every payload marker inside a task's messages is a well-formed payload id (that the
  payload itself is in the backup is checked by `verify`, which sees all files).

Each check raises `ShapeError` with a message that names the field; `verify` turns it into
`BackupCorrupt` with the file and line.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from typing import Any

import bson

from mindstore.crypto.fields import blanked, blanked_task
from mindstore.errors import MindstoreError
from mindstore.ids import KEY_SEPARATOR, check_key, is_name, task_key
from mindstore.model.header import (
    PAGING_FIELDS,
    STORED_HEADER_FIELDS,
    TaskHeader,
    TaskState,
    header_from_stored,
)
from mindstore.model.messages import AssistantMessage, ToolMessage
from mindstore.model.parts import ToolCallPart, ToolResultPart
from mindstore.model.plans import full_stored_doc, parse_stored, stored_doc
from mindstore.model.plans.core import Planner
from mindstore.model.stored_read import StoredRead, read_stored
from mindstore.payloads import find_markers

__all__ = [
    "PAYLOAD_ID",
    "NodeFacts",
    "PayloadFacts",
    "ShapeError",
    "TaskFacts",
    "check_node",
    "check_payload",
    "check_task",
    "stored_task_id",
]

#: A payload `_id`: a hex digest (mindstore writes 32 lowercase hex digits).
PAYLOAD_ID = re.compile(r"[0-9a-f]{16,64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_STATES = frozenset(state.value for state in TaskState)
_INTS = (int,)
#: MongoDB refuses larger documents.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024


class ShapeError(ValueError):
    """A record that mindstore would not have written."""


@dataclass(frozen=True)
class TaskFacts:
    """What verify needs to remember of a task record (never its messages)."""

    identity: str  # task_key(tenant, task id): unique per backup
    task_id: str
    tenant: str
    messages: int
    payload_ids: frozenset[str]


@dataclass(frozen=True)
class NodeFacts:
    identity: str
    task_id: str
    tenant: str
    parent_id: str | None  # bare dialog id


@dataclass(frozen=True)
class PayloadFacts:
    id: str
    tenant: str
    task_identity: str


# --------------------------------------------------------------------------- ids


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tenant(record: dict[str, Any]) -> str:
    tenant = record.get("tenant")
    try:
        return check_key(tenant, "tenant")
    except MindstoreError as exc:
        raise ShapeError(str(exc)) from None


def stored_task_id(value: Any, tenant: str, what: str) -> str:
    """The bare task (dialog) id of a stored key: ``"<id>"`` or ``"<tenant>/<id>"``.

    The per-tenant form must name the record's own tenant: a record of tenant A cannot
    carry a key of tenant B.
    """
    if not isinstance(value, str):
        raise ShapeError(f"{what} must be a string, got {_shown(value)}")
    bare = value
    if KEY_SEPARATOR in value:
        prefix, bare = value.split(KEY_SEPARATOR, 1)
        if prefix != tenant:
            raise ShapeError(
                f"{what} {_shown(value)} names tenant {_shown(prefix)}, "
                f"the record belongs to {tenant!r}"
            )
    try:
        return check_key(bare, what)
    except MindstoreError as exc:
        raise ShapeError(str(exc)) from None


def _name(value: Any, what: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not is_name(value):
        raise ShapeError(
            f"{what} must be 1-128 printable characters not starting with '$', got {_shown(value)}"
        )


def _top_level(record: Any) -> None:
    """An object without ``$`` top-level keys that MongoDB can store as it is."""
    if not isinstance(record, dict):
        raise ShapeError("a record must be an object")
    for key in record:
        if not isinstance(key, str) or key.startswith("$"):
            raise ShapeError(f"top-level key {_shown(key)} is not allowed (starts with '$')")
    try:
        size = len(bson.encode(record))
    except Exception as exc:  # lone surrogates, NUL in keys, ...: bson's assorted errors
        raise ShapeError(f"not storable as a BSON document: {str(exc)[:120]}") from None
    if size > MAX_DOCUMENT_BYTES:
        raise ShapeError(
            f"{size} bytes: larger than MongoDB's document limit ({MAX_DOCUMENT_BYTES} bytes)"
        )


def _optional(record: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> None:
    value = record.get(key)
    if value is not None and not isinstance(value, kind):
        raise ShapeError(f"{key} must be {what} or null, got {_shown(value)}")


def _count(value: Any, what: str) -> int:
    if not isinstance(value, _INTS) or isinstance(value, bool) or value < 0:
        raise ShapeError(f"{what} must be a non-negative integer, got {_shown(value)}")
    return int(value)


# --------------------------------------------------------------------------- tasks


def _task_fields(record: dict[str, Any]) -> None:
    _name(record.get("owner"), "owner", optional=True)
    _optional(record, "title", str, "a string")
    state = record.get("state", "running")
    if state not in _STATES:
        raise ShapeError(f"state must be one of {', '.join(sorted(_STATES))}, got {_shown(state)}")
    for key in ("created_at", "updated_at"):
        if not isinstance(record.get(key), _dt.datetime):
            raise ShapeError(f"{key} must be a date, got {_shown(record.get(key))}")
    _count(record.get("version", 0), "version")
    _optional(record, "metadata", dict, "an object")
    _optional(record, "content", list, "a list")
    _optional(record, "agent_state", dict, "an object")  # formats.agent_state, when saved


def _messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    messages = record.get("messages", [])
    if not isinstance(messages, list):
        raise ShapeError(f"messages must be a list, got {_shown(messages)}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ShapeError(f"message {index} is not an object")
        _name(message.get("id"), f"message {index} id")
    return messages


def _tool_call_ids(messages: list[Any]) -> None:
    for index, message in enumerate(messages):
        if isinstance(message, (AssistantMessage, ToolMessage)):
            for part in message.content:
                if isinstance(part, (ToolCallPart, ToolResultPart)):
                    _name(part.tool_call_id, f"message {index} tool call id")


def size_allowance(task_id: str, raw: list[dict[str, Any]], parsed: list[Any]) -> int:
    """How far `size_bytes` may lie above the messages' BSON size.

    A patch plans its size on the lean form; on a message stored before the lean form,
    which writes its defaults out, the patch may remove explicit defaults the plan never
    counted, so `size_bytes` can only over-count, and by no more than such a message's
    full form. Messages in the lean form allow nothing: there `size_bytes` is exact."""
    allowance = 0
    for document, message in zip(raw, parsed, strict=True):
        if len(bson.encode(document)) != len(bson.encode(stored_doc(message, task_id))):
            allowance += len(bson.encode(full_stored_doc(message)))
    return allowance


def _size_matches(stored: int, task_id: str, raw: list[dict[str, Any]], parsed: list[Any],
                  extra: int = 0) -> bool:  # fmt: skip
    """`stored` is the messages' size, or above it within their allowance (plus `extra`:
    the allowance of a paged task's sealed messages, see `SealedFold.allowance`)."""
    actual = sum(len(bson.encode(document)) for document in raw)
    if stored == actual:
        return True
    return actual < stored <= actual + size_allowance(task_id, raw, parsed) + extra


def _same(field: str, stored: Any, derived: Any) -> bool:
    if field == "usage":
        stored_cost, derived_cost = stored.cost, derived.cost
        if not math.isclose(stored_cost, derived_cost, rel_tol=1e-9, abs_tol=1e-9):
            return False
        return bool(
            stored.model_copy(update={"cost": 0.0}) == derived.model_copy(update={"cost": 0.0})
        )
    return bool(stored == derived)


@dataclass
class SealedFold:
    """What verify folded from a paged task's pages (`mindstore.backup.pages`): the header
    planner after the sealed messages, and their count and stored size."""

    planner: Any  # mindstore.model.plans.core.Planner, replaying the history
    messages: int = 0
    size_bytes: int = 0
    allowance: int = 0
    """`size_allowance` of the sealed messages. A page's own size is exact (a seal and a
    fold measure the stored messages), but the task's `sealed_bytes` and `size_bytes`
    add what a patch planned: for a message stored before the lean form, patched while
    sealed or before it was sealed, that is above the exact change. So the task's
    counters may lie above the pages by at most this much (docs/backup.md)."""


def start_fold(task_id: str) -> SealedFold:
    """An empty fold for the task `task_id` (its pages are fed in page order)."""
    return SealedFold(Planner(TaskHeader(), task_id, replay=True))


def fold_messages(fold: SealedFold, task_id: str, raw: list[dict[str, Any]], read: StoredRead,
                  what: str = "message") -> list[Any]:  # fmt: skip
    """Feed stored messages to the fold; check each one's `scope` and `depth` against its
    level. Returns the parsed messages (their size allowance needs them)."""
    try:
        parsed = parse_stored(read, task_id=task_id)
        _tool_call_ids(parsed)
        for parsed_message in parsed:
            fold.planner.append(parsed_message)
    except MindstoreError as exc:
        raise ShapeError(f"messages do not form a valid history: {exc}") from None
    fold.planner.appended.clear()  # a replay never patches back: keep no messages
    fold.planner.docs.clear()
    for index, (message, folded) in enumerate(zip(raw, parsed, strict=True)):
        if message.get("scope") != folded.scope or message.get("depth", 0) != folded.depth:
            raise ShapeError(
                f"{what} {index} scope/depth ({_shown(message.get('scope'))}, "
                f"{_shown(message.get('depth'))}) do not match its level"
            )
    fold.messages += len(raw)
    return parsed


def _header(record: dict[str, Any], task_id: str, raw: list[dict[str, Any]],
            read: StoredRead, sealed: SealedFold | None = None) -> None:  # fmt: skip
    """The stored header must be the one the planner folds from the stored messages (a
    paged task's: its pages, folded by verify, then its open page)."""
    for key in ("seq", "size_bytes"):
        _count(record.get(key, 0), key)
    fold = sealed if sealed is not None else start_fold(task_id)
    before = fold.messages
    if record.get("seq", 0) != before + len(raw):
        held = f"{before} sealed and {len(raw)} open" if sealed is not None else str(len(raw))
        raise ShapeError(
            f"header seq is {_shown(record.get('seq', 0))} but the task holds {held} messages"
        )
    parsed = fold_messages(fold, task_id, raw, read)
    derived = fold.planner.header
    try:
        stored = header_from_stored(record)
    except Exception as exc:  # pydantic's ValidationError
        first = str(exc).splitlines()[0]
        raise ShapeError(f"header fields are malformed: {first}") from None
    for field in STORED_HEADER_FIELDS:
        if field in PAGING_FIELDS:  # checked against the pages (page continuity)
            continue
        if field == "size_bytes":
            open_bytes = stored.size_bytes - fold.size_bytes
            if not _size_matches(open_bytes, task_id, raw, parsed, fold.allowance):
                raise ShapeError(
                    f"header field size_bytes does not match the messages "
                    f"(stored {_shown(record.get(field))})"
                )
            continue
        if not _same(field, getattr(stored, field), getattr(derived, field)):
            raise ShapeError(
                f"header field {field} does not match the messages "
                f"(stored {_shown(record.get(field))})"
            )


def markers(read: StoredRead) -> frozenset[str]:
    """The payload ids the messages refer to: found by the same read that parses them,
    plus any marker-shaped string in a derived-field list (refused like any other)."""
    found = set(read.markers)
    find_markers(list(read.derived.values()), found)
    for payload_id in found:
        if not PAYLOAD_ID.fullmatch(payload_id):
            raise ShapeError(f"payload marker names an invalid payload id {_shown(payload_id)}")
    return frozenset(found)


def check_task(record: Any, sealed: SealedFold | None = None) -> TaskFacts:
    """Check a task record (see the module docstring); what verify must remember of it.

    A paged task's header covers its pages too: verify folds them first (`sealed`), and
    the open page continues that fold."""
    _top_level(record)
    tenant = _tenant(record)
    task_id = stored_task_id(record.get("_id"), tenant, "task _id")
    _task_fields(blanked_task(record))
    raw = _messages(record)
    # ciphertexts stand as empty values of their kind (mindstore.crypto: shape, not content)
    read = read_stored(blanked(raw), strings=False)  # one walk at most: keys, markers
    _header(record, task_id, raw, read, sealed)
    return TaskFacts(task_key(tenant, task_id), task_id, tenant, len(raw), markers(read))


# --------------------------------------------------------------------------- dialog nodes


def check_node(record: Any) -> NodeFacts:
    """A dialog-tree node: ids in the key alphabet, and a consistent place in its tree
    (``depth`` = number of ancestors, parent = last ancestor, root = first ancestor)."""
    _top_level(record)
    tenant = _tenant(record)
    dialog_id = stored_task_id(record.get("_id"), tenant, "dialog node _id")
    _name(record.get("owner"), "owner", optional=True)
    _name(record.get("at_message_id"), "at_message_id", optional=True)
    ancestors = record.get("ancestors", [])
    if not isinstance(ancestors, list):
        raise ShapeError(f"ancestors must be a list, got {_shown(ancestors)}")
    chain = [stored_task_id(a, tenant, f"ancestor {i}") for i, a in enumerate(ancestors)]
    parent = record.get("parent_id")
    parent_id = None if parent is None else stored_task_id(parent, tenant, "parent_id")
    root_id = stored_task_id(record.get("root_id"), tenant, "root_id")
    depth = _count(record.get("depth", 0), "depth")
    if depth != len(chain) or parent_id != (chain[-1] if chain else None) or \
            root_id != (chain[0] if chain else dialog_id) or dialog_id in chain:  # fmt: skip
        raise ShapeError(
            "depth, parent_id, root_id and ancestors do not describe one place in a tree"
        )
    for key in ("split_point", "first_k", "last_n"):
        if record.get(key) is not None:
            _count(record[key], key)
    return NodeFacts(task_key(tenant, dialog_id), dialog_id, tenant, parent_id)


# --------------------------------------------------------------------------- payloads


def check_payload(record: Any) -> PayloadFacts:
    """A payload: a hex ``_id``, its task in the key alphabet, typed bookkeeping fields."""
    _top_level(record)
    tenant = _tenant(record)
    payload_id = record.get("_id")
    if not isinstance(payload_id, str) or not PAYLOAD_ID.fullmatch(payload_id):
        raise ShapeError(
            f"payload _id must be 16-64 lowercase hex digits, got {_shown(payload_id)}"
        )
    task_id = stored_task_id(record.get("task_id"), tenant, "payload task_id")
    _name(record.get("message_id"), "payload message_id", optional=True)
    _optional(record, "path", str, "a string")
    sha = record.get("sha256")
    if sha is not None and not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
        raise ShapeError(f"payload sha256 must be 64 lowercase hex digits, got {_shown(sha)}")
    if record.get("size") is not None:
        _count(record["size"], "payload size")
    return PayloadFacts(payload_id, tenant, task_key(tenant, task_id))
