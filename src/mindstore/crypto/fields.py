"""Which fields of a stored document are sealed, and the pure walks that seal and open them.

The split (docs/encryption.md, "Threat model"): content is sealed, the fields that
analytics, boundaries, paging, windows and guards read on the server stay in the clear.

* A message: every top-level field is sealed whole except `MESSAGE_CLEAR` (ids, role,
  timestamps, status, usage and token counts, model id, scope, depth, origin, the
  redaction record) and `content`, whose parts are sealed field by field.
* A part: every field is sealed whole except `PART_CLEAR` (type, tool call id and name,
  flags, timestamps, kinds, the compression part's indexes and id lists, a config's model
  name and numeric settings); a task entry's `initial_task_config` is a part itself. A
  compression part keeps its `metadata` (the checkpoint: message ids the server-side
  window filters by) and seals its `cache` (the summary). A streamed part's chunk list
  (`CHUNKS_KEY`) is a list of ciphertexts, one per chunk, each bound to its index
  (``content.2.§more.0``): a stream `$push`es each chunk sealed on its own.

A sealed value is bound to (tenant, task id, message id, path in the message), so a
message keeps its ciphertexts when it moves into a sealed page (the path is relative to
the message) and a patch seals exactly what a whole-message seal would put there.
Markers of offloaded payloads stay in the clear (they are ids; the payload is sealed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.crypto.aead import blank, is_sealed, open_value, seal_value
from mindstore.errors import CryptoError
from mindstore.model.storage_form import CHUNKS_KEY
from mindstore.payloads import MARKER_PREFIX

__all__ = [
    "ENCRYPTED",
    "MESSAGE_CLEAR",
    "OWN_FIELDS",
    "PART_CLEAR",
    "KeySource",
    "blanked",
    "blanked_task",
    "clear_refused",
    "open_document",
    "open_value_at",
    "refuse_clear",
    "seal_at",
    "seal_document",
    "seal_part",
]

MESSAGE_CLEAR = frozenset({
    "id", "role", "task_id", "started_ts", "finished_ts", "world_state_id",
    "world_state_hash", "usage", "scope", "depth", "origin", "status", "cost",
    "cache_writes", "cache_reads", "tokens_in", "tokens_out", "model_id", "is_ui_hidden",
    "redaction", "\u00a7derived",
})  # fmt: skip
"""Message fields stored in the clear (the rest is sealed; `content` part by part)."""
PART_CLEAR = frozenset({
    "type", "tool_call_id", "tool_name", "is_loading", "is_approval_pending",
    "is_approved", "is_error", "has_feedback", "terminate", "started_ts", "finished_ts",
    "kind", "is_visible_ai", "is_visible_ui", "informational_type", "error_type",
    "start_message_idx", "end_message_idx", "strategies", "compressed_message_ids",
    "kept_message_ids", "trigger_call_id", "answer_id", "mime_type", "model_name",
    "max_tokens", "thinking_budget_tokens", "reasoning_effort", "enable_parallel_tools",
    "enable_auto_tools", "enable_search", "compression_config", "dialect_name",
    "sample_rate", "channels", "tool_metadata",
})  # fmt: skip
"""Part fields stored in the clear (the rest is sealed whole)."""
ENCRYPTED = "encrypted"
"""A task-document field: True on every task of an encrypted tenant (set where a store
with a keyring creates it, and by the re-encryption sweep), so a store without a keyring
refuses to write into it (`KeyringRequired`) rather than add content in the clear."""
OWN_FIELDS = ("title", "metadata", "content", "agent_state")
"""A task document's own sealed fields beside its messages (`crypto.task_fields`)."""
NESTED_PART = "initial_task_config"
"""A part field that is a part itself (a task entry's config: its model name stays clear)."""


class KeySource(Protocol):
    """A tenant's data keys, as the pure walks need them (`Keyring` gives one)."""

    def current(self) -> tuple[int, AESGCM]:
        """(version, key) that new ciphertexts are sealed with."""
        ...

    def key(self, version: int) -> AESGCM:
        """The key of `version` (raises `KeyShredded` or `CryptoError` if it is gone)."""
        ...

    @property
    def sealed_only(self) -> bool:
        """A value the split seals that is in the clear is tampering (`refuse_clear`)."""
        ...

    @property
    def legacy_bindings(self) -> bool:
        """Format-1 ciphertexts still open, with the binding they were sealed under
        (`aead.open_value`'s `legacy`): False once the tenant's sweep re-sealed them."""
        ...


Sealer = Callable[[Any, str], Any]
"""(value, path in the message) -> its sealed form."""


def _leave_clear(value: Any) -> bool:
    return value is None or (type(value) is str and value.startswith(MARKER_PREFIX))


def _sealer(keys: KeySource, tenant: str, task_id: str, message_id: str) -> Sealer:
    version, key = keys.current()

    def seal(value: Any, path: str) -> Any:
        if _leave_clear(value) or is_sealed(value):
            return value
        return seal_value(value, key, version, (tenant, task_id, message_id, path))

    return seal


def _chunks(chunks: list[Any], path: str, seal: Sealer) -> list[Any]:
    """A streamed part's chunks (`CHUNKS_KEY`), each sealed on its own and bound to its
    index: a stream pushes them one by one, and a chunk moved to another place in the
    list (or to another part) does not open."""
    return [seal(chunk, f"{path}.{i}") for i, chunk in enumerate(chunks)]


def _part(part: dict[str, Any], path: str, seal: Sealer) -> dict[str, Any]:
    compression = part.get("type") == "compression"
    out: dict[str, Any] = {}
    for name, value in part.items():
        at = f"{path}.{name}"
        if name in PART_CLEAR or (compression and name == "metadata"):
            out[name] = value
        elif name == NESTED_PART and type(value) is dict:
            out[name] = _part(value, at, seal)
        elif name == CHUNKS_KEY and type(value) is list:
            out[name] = _chunks(value, at, seal)
        else:
            out[name] = seal(value, at)
    return out


def _content(content: Any, path: str, seal: Sealer) -> Any:
    if type(content) is not list:
        return seal(content, path)
    return [_part(item, f"{path}.{i}", seal) if type(item) is dict else seal(item, f"{path}.{i}")
            for i, item in enumerate(content)]  # fmt: skip


def _message(document: dict[str, Any], seal: Sealer) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in document.items():
        if name in MESSAGE_CLEAR:
            out[name] = value
        elif name == "content":
            out[name] = _content(value, name, seal)
        else:
            out[name] = seal(value, name)
    return out


def seal_document(
    document: dict[str, Any], keys: KeySource, tenant: str, task_id: str
) -> dict[str, Any]:
    """A stored message document with its content sealed (a new dict; see the module doc)."""
    return _message(document, _sealer(keys, tenant, task_id, str(document.get("id", ""))))


def seal_part(
    part: dict[str, Any], keys: KeySource, tenant: str, task_id: str, path: str
) -> dict[str, Any]:
    """A part that is not in a message (a task's own `content`), bound to `path`."""
    return _part(part, path, _sealer(keys, tenant, task_id, ""))


def seal_at(
    value: Any, path: str, keys: KeySource, tenant: str, task_id: str, message_id: str
) -> Any:
    """What a patch stores at `path` of a message: what `seal_document` would put there.

    `path` is relative to the message (``""``: the whole message, ``content.3``,
    ``content.3.text``, ``finished_ts``). A path inside a value sealed whole cannot be
    patched in place: CryptoError (no planner writes one)."""
    seal = _sealer(keys, tenant, task_id, message_id)
    steps = path.split(".") if path else []
    if not steps:
        return _message(value, seal) if type(value) is dict else seal(value, path)
    if steps[0] in MESSAGE_CLEAR:
        return value
    if steps[0] != "content":
        if len(steps) > 1:
            raise CryptoError(f"cannot patch inside the sealed field {steps[0]!r}")
        return seal(value, path)
    if len(steps) == 1:
        return _content(value, path, seal)
    if len(steps) == 2:
        return _part(value, path, seal) if type(value) is dict else seal(value, path)
    return _in_part(value, steps, 2, seal)


def _in_part(value: Any, steps: list[str], at: int, seal: Sealer) -> Any:
    """A patch at `steps[at:]` inside the part at `steps[:at]`."""
    name, path = steps[at], ".".join(steps)
    if name in PART_CLEAR:
        return value
    if name == NESTED_PART:
        if len(steps) == at + 1:
            return _part(value, path, seal) if type(value) is dict else seal(value, path)
        return _in_part(value, steps, at + 1, seal)
    if name == CHUNKS_KEY:  # the chunk list, or one chunk (`CHUNKS_KEY.<i>`)
        if len(steps) == at + 1 and type(value) is list:
            return _chunks(value, path, seal)
        if len(steps) == at + 2 and steps[-1].isdigit():
            return seal(value, path)
    if len(steps) > at + 1:
        raise CryptoError(f"cannot patch inside the sealed part field {name!r}")
    return seal(value, path)


# ------------------------------------------------------------------------------ opening


def _opened(value: Any, path: str, open_one: Callable[[Any, str], Any]) -> Any:
    """`value` with every ciphertext in it opened; the same object when it holds none."""
    if is_sealed(value):
        return open_one(value, path)
    if type(value) is dict:
        out: dict[str, Any] | None = None
        for name, item in value.items():
            opened = _opened(item, f"{path}.{name}" if path else str(name), open_one)
            if opened is not item:
                if out is None:
                    out = dict(value)
                out[name] = opened
        return value if out is None else out
    if type(value) is list:
        changed: list[Any] | None = None
        for index, item in enumerate(value):
            opened = _opened(item, f"{path}.{index}" if path else str(index), open_one)
            if opened is not item:
                if changed is None:
                    changed = list(value)
                changed[index] = opened
        return value if changed is None else changed
    return value


def clear_refused(where: str, tenant: str) -> CryptoError:
    """The error for a value in the clear where a sealed-only tenant holds ciphertexts."""
    return CryptoError(
        f"{where} (tenant {tenant!r}) is stored in the clear, but the tenant is "
        "sealed-only: refused as tampering"
    )


def refuse_clear(document: dict[str, Any], tenant: str, task_id: str) -> None:
    """CryptoError naming the first field of a stored message that the split seals but
    that holds a value in the clear (a sealed-only tenant: written or changed by someone
    without its keys). Ids, markers and None stay clear by design and pass."""
    message_id = str(document.get("id", ""))

    def check(value: Any, path: str) -> Any:
        if _leave_clear(value) or is_sealed(value):
            return value
        where = f"{path or 'value'} of message {message_id!r} of task {task_id!r}"
        raise clear_refused(where, tenant)

    _message(document, check)


def open_document(document: Any, keys: KeySource, tenant: str, task_id: str) -> Any:
    """A stored message document with every ciphertext opened (the same object when it
    holds none: documents stored before the tenant was encrypted read as they are, until
    the tenant is sealed-only: then a value in the clear is refused, `refuse_clear`)."""
    if type(document) is not dict:
        return document
    if keys.sealed_only:
        refuse_clear(document, tenant, task_id)
    message_id = str(document.get("id", ""))

    def open_one(value: Any, path: str) -> Any:
        context = (tenant, task_id, message_id, path)
        return open_value(value, keys.key, context, legacy=keys.legacy_bindings)

    return _opened(document, "", open_one)


def blanked(documents: list[Any]) -> list[Any]:
    """Stored documents with every ciphertext replaced by an empty value of its kind
    (`aead.blank`), to check their shape without the keys (backup verify). The clear
    fields are untouched; a document without ciphertexts is returned as it is."""
    return [_opened(document, "", lambda value, _path: blank(value)) for document in documents]


def blanked_task(record: Any) -> Any:
    """A task document with its own sealed fields (title, metadata values, content,
    agent state) blanked as `blanked` does; its messages are left as they are."""
    if type(record) is not dict:
        return record
    own = {name: record[name] for name in OWN_FIELDS if name in record}
    return {**record, **blanked([own])[0]}


def open_value_at(
    value: Any,
    path: str,
    keys: KeySource,
    tenant: str,
    task_id: str,
    message_id: str = "",
    *,
    legacy_path: str | None = None,
) -> Any:
    """A value stored at `path` (of message `message_id`, or of the task) with its
    ciphertexts opened. `legacy_path`: what `path` was in format 1, where format 2 binds
    more (a task's own content part: ``task.content`` before its index was bound)."""

    def open_one(sealed: Any, at: str) -> Any:
        legacy = None
        if legacy_path is not None:
            legacy = (tenant, task_id, message_id, legacy_path + at[len(path) :])
        return open_value(
            sealed,
            keys.key,
            (tenant, task_id, message_id, at),
            legacy_context=legacy,
            legacy=keys.legacy_bindings,
        )

    return _opened(value, path, open_one)
