"""The one loop every import runs: read the whole source, map owners, write each
conversation through the framework's mindstore adapter, read it back, and count.

A source kind (`Kind`) knows its framework twice: how its own store lists and reads the
conversations (`Kind.read`, through the framework's library where it has a reader), and
how mindstore's adapter for that framework holds them (`Kind.writer`). The driver knows
neither; it gives each kind the same guarantees:

* **nothing half-written on a bad source**: the whole source is read, and every owner
  mapped, before the first write; a source that cannot be read is `UnreadableSource`
  naming it;
* **idempotent and resumable**: a writer first reads what the adapter already serves for
  the conversation and writes only what is missing, under ids derived from the source's
  ids (the adapters' own rule, `task_id_for`), so a second run writes nothing and a run
  after a crash at any point completes the rest;
* **verified**: after writing, the conversation is read back through the adapter and must
  equal what the framework's store returned (`Conflict` otherwise, naming it);
* **dry run**: reads the target, writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mindstore.errors import Conflict, ValidationError
from mindstore.ids import check_key
from mindstore.imports.errors import UnreadableSource
from mindstore.imports.mongo_sources import MongoSource
from mindstore.imports.receipt import Receipt, canonical_digest, redacted
from mindstore.store import Store, TenantStore
from mindstore.validation import check_owner

__all__ = [
    "Conversation", "Kind", "Step", "UnreadableSource", "Writer", "prefix_rest", "run",
    "text_source",
]  # fmt: skip


@dataclass(frozen=True)
class Conversation:
    """One conversation as the source's framework returns it."""

    id: str
    """The framework's conversation id (session id, thread id, chat key)."""
    canonical: Any
    """What the framework's store returns for it, as JSON in one canonical form: the
    writer's `served` returns the same form, so equal means carried whole."""
    counts: Mapping[str, int]
    """Per kind of record (messages, checkpoints, events, ...)."""
    payload: Any = None
    """The framework's own objects, for the writer."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """Values an owner can be taken from (`owner_from`): user_id, app_name, ..."""


@dataclass(frozen=True)
class Step:
    """One write done (`unit`: what it wrote) or one conversation finished
    (`unit == "conversation"`); `index` counts conversations from 0 out of `total`."""

    kind: str
    conversation: str
    index: int
    total: int
    unit: str


OnStep = Callable[[Step], None]


class Writer(Protocol):
    """Writes conversations through mindstore's adapter for one framework, in one view."""

    async def served(self, conversation: Conversation) -> Any:
        """What the adapter serves for `conversation` now, in its `canonical` form."""
        ...

    async def write(self, conversation: Conversation, step: Callable[[str], None]) -> Counter[str]:
        """Write what the adapter does not serve yet (idempotent: reads first), calling
        `step(unit)` after each write; the counts of what it wrote. A stored conversation
        that is not a beginning of the source's is `Conflict`, before any write."""
        ...


class Kind(Protocol):
    """A source kind: its name, how to read a source, how to write into a view."""

    name: str
    owner_fields: tuple[str, ...]
    """The fields `--owner-from` may name."""
    owns: bool
    """The adapter names each conversation's owner itself (ADK: the session's user): an
    `owner` cannot be given, and `owner_from` can only name that field."""

    async def read(self, source: str | MongoSource) -> list[Conversation]: ...

    def writer(self, view: TenantStore) -> Writer: ...


def owner_of(
    conversation: Conversation, owner: str | None, owner_from: str | None, kind: Kind
) -> str | None:
    """The owner a conversation is stored under: `owner`, or its `owner_from` field."""
    if owner_from is None:
        return owner
    if owner_from not in kind.owner_fields:
        raise ValidationError(
            f"owner_from: {kind.name} sources have no field {owner_from!r} "
            f"(one of: {', '.join(kind.owner_fields) or 'none'})"
        )
    value = conversation.fields.get(owner_from)
    if value is None:
        raise ValidationError(f"owner_from: conversation {conversation.id!r} has no {owner_from!r}")
    return check_owner(value, f"owner (from {owner_from} of conversation {conversation.id!r})")


async def run(
    kind: Kind,
    store: Store,
    source: str | MongoSource,
    *,
    tenant: str,
    owner: str | None = None,
    owner_from: str | None = None,
    dry_run: bool = False,
    on_step: OnStep | None = None,
) -> Receipt:
    """Import `source` into `tenant` (see the module doc); the receipt."""
    check_key(tenant, "tenant")
    check_owner(owner)
    if owner is not None and owner_from is not None:
        raise ValidationError("owner and owner_from: give one of them")
    conversations = sorted(await kind.read(source), key=lambda c: c.id)
    ids = [c.id for c in conversations]
    if len(set(ids)) != len(ids):
        raise UnreadableSource(kind.name, str(source), "two conversations share one id")
    if kind.owns and owner is not None:
        raise ValidationError(
            f"owner: {kind.name} sessions are owned by their {kind.owner_fields[0]} "
            f"(mindstore's adapter's rule); pass no owner, or owner_from="
            f"{kind.owner_fields[0]!r} to check each one"
        )
    owners = {c.id: owner_of(c, owner, owner_from, kind) for c in conversations}
    read: Counter[str] = Counter(conversations=len(conversations))
    for conversation in conversations:
        read.update(conversation.counts)
    written: Counter[str] = Counter(dict.fromkeys(read, 0))
    served: list[tuple[str, Any]] = []
    unchanged = verified = 0
    total = len(conversations)
    for index, conversation in enumerate(conversations):

        def step(unit: str, conversation: Conversation = conversation, index: int = index) -> None:
            if on_step is not None:
                on_step(Step(kind.name, conversation.id, index, total, unit))

        scope = None if kind.owns else owners[conversation.id]
        writer = kind.writer(store.scoped(tenant, scope))
        async with _one_at_a_time(store, tenant, kind.name, conversation.id):
            now = await writer.served(conversation)
            if now == conversation.canonical:
                unchanged += 1
                verified += 1
            elif dry_run:
                written.update(conversations=1, **conversation.counts)
            else:
                written.update(await writer.write(conversation, step))
                written["conversations"] += 1
                now = await writer.served(conversation)
                if now != conversation.canonical:
                    raise Conflict(
                        f"{kind.name}: conversation {conversation.id!r} reads back from "
                        "mindstore unlike the source after the import"
                    )
                verified += 1
        served.append((conversation.id, now))
        step("conversation")
    return Receipt(
        kind=kind.name, source=redacted(str(source)), tenant=tenant, owner=owner,
        owner_from=owner_from, dry_run=dry_run, read=dict(read), written=dict(written),
        unchanged=unchanged, verified=verified,
        read_sha256=canonical_digest((c.id, c.canonical) for c in conversations),
        written_sha256=None if dry_run else canonical_digest(served),
        conversations=tuple(ids),
    )  # fmt: skip


_HELD: dict[tuple[int, int, str, str, str], tuple[asyncio.Lock, int]] = {}
"""The locks of conversations being imported now, with how many imports hold or await
each (a lock belongs to one event loop, so the loop is part of the key)."""


@contextlib.asynccontextmanager
async def _one_at_a_time(
    store: Store, tenant: str, kind: str, conversation: str
) -> AsyncIterator[None]:
    """Imports in this process write one conversation one at a time: a writer reads what
    the adapter serves, then writes the rest, and two of them interleaving would both
    write it (some adapters append without an id to recognise a repeat by). Imports from
    several processes at once are docs/import-export.md's matter."""
    key = (id(asyncio.get_running_loop()), id(store), tenant, kind, conversation)
    lock, users = _HELD.get(key, (asyncio.Lock(), 0))
    _HELD[key] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock, users = _HELD[key]
        if users == 1:
            del _HELD[key]
        else:
            _HELD[key] = (lock, users - 1)


def text_source(kind: str, source: str | MongoSource) -> str:
    """A file, folder or URL source as text; a `MongoSource` is not one."""
    if isinstance(source, MongoSource):
        raise UnreadableSource(kind, str(source), f"{kind} reads a file, folder or URL")
    return source


def prefix_rest(stored: Sequence[Any], source: Sequence[Any], what: str) -> list[Any]:
    """What of `source` is not stored yet, when `stored` is its beginning; else
    `Conflict` naming `what` (the target holds another conversation under that id)."""
    if len(stored) > len(source) or list(stored) != list(source[: len(stored)]):
        raise Conflict(
            f"{what}: mindstore already holds a different conversation under this id "
            f"({len(stored)} stored, {len(source)} in the source); nothing was written"
        )
    return list(source[len(stored) :])
