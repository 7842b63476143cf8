"""Which fields of the LangGraph saver's documents are sealed, and the pure walk that seals,
opens or inspects them (docs/encryption.md, "Integration data").

The saver (`mindstore.integrations.langgraph`) keeps checkpoints, pending writes and
channel blobs in collections of its own; everything else an integration stores is a task
(sealed by `crypto.fields` / `crypto.task_fields`). Sealed here:

* a checkpoint's serialized checkpoint (`c`) and serialized metadata (`mdb`), its inline
  channel values (`iv.<channel>`), the values of its metadata document (`md`) except
  `METADATA_CLEAR`, and the fingerprint chain of its messages (`ms.h`, a hash of their
  content);
* a pending write's serialized value (`w[i][3]`), and a write turned into a reference to
  task messages (its reference, whole);
* a blob's serialized value (`b`).

A serialized value is ``[serde type, bytes]``: only the bytes are sealed, so the stored
shape (a string and bytes: a ciphertext is a BSON binary) is what backup verify checks
without keys. Ids, thread ids, namespaces, parent ids, owners, channel names, task paths,
counts, change counters, a checkpoint's message record (`ms.t`, `ms.n`, ...) and a
reference-map blob's reference stay clear: the saver's queries, backups, erase and
retention read them on the server.

A ciphertext is bound to (tenant, collection and document `_id`, field path), the path
naming the write's index and channel and the serde type (``iv.answer:msgpack``): moved to
another document, field or channel, or given another serde type (which would make the
saver deserialize it otherwise), it does not open (`CryptoError`). The clear fields that
say where messages are read from are bound into a ciphertext beside them: a checkpoint's
message record into its chain `ms.h`, a reference-map blob's `k` and `r` into its `b`, so
pointing them at another task (another thread's messages) makes the read fail. Format-1
ciphertexts (`aead.LEGACY_FORMAT`) bound less: they open with their old path until the
sweep re-seals them. Pure: no I/O, keys given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mindstore.collection_names import LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES
from mindstore.crypto.aead import Context, is_current, is_sealed, open_value, seal_value
from mindstore.crypto.fields import KeySource, clear_refused
from mindstore.errors import CryptoError

__all__ = [
    "COLLECTIONS",
    "METADATA_CLEAR",
    "SEALED_FIELDS",
    "open_fields",
    "seal_fields",
    "stale_values",
]

METADATA_CLEAR = frozenset({"source", "step", "parents", "run_id"})
"""Checkpoint metadata keys whose values stay clear: LangGraph's own bookkeeping (what
wrote the checkpoint, its step, its parents' ids, the run id `delete_for_runs` queries);
every other value (the application's own metadata, configurable values) is sealed."""
SEALED_FIELDS: dict[str, tuple[str, ...]] = {
    LANGGRAPH_CHECKPOINTS: ("c", "mdb", "md", "iv", "ms"),
    LANGGRAPH_WRITES: ("w",),
    LANGGRAPH_BLOBS: ("b",),
}
"""The top-level fields of each collection that hold ciphertexts (the rest is clear)."""
COLLECTIONS = tuple(SEALED_FIELDS)

REF = "@ref"
REF_MAP = "@refmap"
"""The serde types the saver gives a pending write, and a blob, that refer to a messages
task (`integrations.langgraph_writes`: named here, which an integration may not be
imported into): the write's reference is sealed whole, the blob's (`k`, `r`, clear) bound."""

Leaf = Callable[[Any, str, str | None], Any]
"""(a value to seal or open, its field path, the path it had in format 1 where that
differs, else None) -> what is stored or read there."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def _typed(value: Any, path: str, leaf: Leaf) -> Any:
    """A ``[serde type, bytes]`` pair with its bytes handed to `leaf`, bound to the type
    (anything else is handed over whole: only a sealed-only tenant's check sees it)."""
    if type(value) is list and len(value) == 2 and type(value[0]) is str:
        return [value[0], leaf(value[1], f"{path}:{value[0]}", None)]
    return leaf(value, path, None)


def _messages(value: dict[str, Any], leaf: Leaf) -> dict[str, Any]:
    """A checkpoint's message record: its fingerprint chain `h` sealed, bound to the rest
    of the record (task `t`, count `n`, blob flag `b`, source `f`), so a record pointed at
    another task (another thread's messages) or count does not open (format 1: "ms.h")."""
    rest = {key: item for key, item in value.items() if key != "h"}
    chain = leaf(value.get("h"), f"ms.h{_canonical(rest)}", "ms.h")  # absent: checked too
    return {**value, "h": chain} if "h" in value else value


def _checkpoint(name: str, value: Any, leaf: Leaf) -> Any:
    if name in ("c", "mdb"):
        return _typed(value, name, leaf)
    if type(value) is not dict:
        return leaf(value, name, None)  # None is left clear; anything else only checked
    if name == "md":
        return {key: item if key in METADATA_CLEAR else leaf(item, f"md.{key}", None)
                for key, item in value.items()}  # fmt: skip
    if name == "iv":
        return {channel: _typed(item, f"iv.{channel}", leaf) for channel, item in value.items()}
    return _messages(value, leaf)  # "ms"


def _writes(value: Any, leaf: Leaf) -> Any:
    """Each ``[index, channel, serde type, value]``: the value handed to `leaf`, bound to
    the index, channel and type (whatever its type: a list of ints read as bytes is a
    value too); a reference (`REF`) is sealed whole (format 1 left it clear). An item of
    another shape is handed over whole."""
    if type(value) is not list:
        return leaf(value, "w", None)
    out: list[Any] = []
    for position, item in enumerate(value):
        if (
            type(item) is list
            and len(item) == 4
            and isinstance(item[0], int)
            and isinstance(item[2], str)
        ):  # (an index may come back as BSON's Int64, an int)
            index, channel, kind, data = item
            item = [index, channel, kind, leaf(data, f"w.{index}.{channel}:{kind}", None)]
        else:
            item = leaf(item, f"w.{position}", None)
        out.append(item)
    return out


def _blob(fields: dict[str, Any], value: Any, leaf: Leaf) -> Any:
    """A blob's bytes, bound to its serde type (`bt` once it is a reference map, whose key
    `k` and reference `r` stay clear and are bound too: format 1 bound only the type)."""
    kind = fields.get("bt") or fields.get("t") or ""
    path = f"b:{kind}"
    if fields.get("t") == REF_MAP:
        reference = _canonical({"k": fields.get("k"), "r": fields.get("r")})
        return leaf(value, f"{path}{reference}", path)
    return leaf(value, path, None)


def _walk(collection: str, fields: dict[str, Any], leaf: Leaf) -> dict[str, Any]:
    """`fields` (a whole document, a projection of one, or what an update sets) with every
    sealable value handed to `leaf`; a new dict, the input is not changed."""
    if collection not in SEALED_FIELDS:
        raise CryptoError(f"{collection!r} is not a collection of integration documents")
    out = dict(fields)
    for name in SEALED_FIELDS[collection]:
        if name not in out:
            continue
        if collection == LANGGRAPH_CHECKPOINTS:
            out[name] = _checkpoint(name, out[name], leaf)
        elif collection == LANGGRAPH_WRITES:
            out[name] = _writes(out[name], leaf)
        else:
            out[name] = _blob(fields, out[name], leaf)
    return out


def _left_clear(value: Any) -> bool:
    """None, and empty bytes (LangGraph's serialized `None`): nothing to hide but a length
    a ciphertext shows as well."""
    return value is None or (isinstance(value, bytes) and not is_sealed(value) and not value)


def _context(tenant: str, collection: str, doc_id: str, path: str) -> Context:
    return (tenant, f"{collection}/{doc_id}", "", path)


def seal_fields(
    collection: str, doc_id: str, fields: dict[str, Any], keys: KeySource, tenant: str
) -> dict[str, Any]:
    """What to store for `fields` of document `doc_id`: its sealable values sealed with
    the tenant's current data key (values already sealed, None and empty bytes are left as
    they are)."""
    version, key = keys.current()

    def seal(value: Any, path: str, _legacy: str | None) -> Any:
        if _left_clear(value) or is_sealed(value):
            return value
        return seal_value(value, key, version, _context(tenant, collection, doc_id, path))

    return _walk(collection, fields, seal)


def open_fields(
    collection: str, doc_id: str, document: dict[str, Any], keys: KeySource, tenant: str
) -> dict[str, Any]:
    """A stored document (or projection) with its ciphertexts opened; plaintext stored
    before the tenant was encrypted reads as it is (a sealed-only tenant's is refused,
    and so is a checkpoint's message record without its sealed chain). A ciphertext not
    sealed for its place: `CryptoError`; the tenant's keys shredded: `KeyShredded`."""

    def open_one(value: Any, path: str, legacy: str | None) -> Any:
        if not is_sealed(value):
            if keys.sealed_only and not _clear_allowed(value, path, keys):
                raise clear_refused(f"{path} of {collection} document {doc_id!r}", tenant)
            return value
        legacy_context = None if legacy is None else _context(tenant, collection, doc_id, legacy)
        return open_value(
            value,
            keys.key,
            _context(tenant, collection, doc_id, path),
            legacy_context=legacy_context,
            legacy=keys.legacy_bindings,
        )

    return _walk(collection, document, open_one)


def _clear_allowed(value: Any, path: str, keys: KeySource) -> bool:
    """Whether a sealed-only tenant may hold `value` in the clear at `path`: None and empty
    bytes, but not a message record's missing chain; a pending write's reference, which
    format 1 left clear, until the tenant's sweep re-sealed it (`legacy_bindings`)."""
    if path.startswith("ms.h"):
        return False
    if path.endswith(f":{REF}") and type(value) is dict:
        return keys.legacy_bindings
    return _left_clear(value)


def stale_values(collection: str, document: dict[str, Any], version: int) -> int:
    """How many sealable values of a stored document are not sealed with data key
    `version` (plaintext from before the tenant was encrypted, or an older key): what the
    re-encryption sweep re-seals."""
    stale = 0

    def count(value: Any, _path: str, _legacy: str | None) -> Any:
        nonlocal stale
        if not _left_clear(value) and not is_current(value, version):
            stale += 1
        return value

    _walk(collection, document, count)
    return stale
