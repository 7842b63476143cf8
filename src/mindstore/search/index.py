"""One tenant's search index (`SearchStore`): its state, its catch-up, its lookups.

A search brings the index up to date itself (`catchup`: writes stay as they are), then
asks it once. The index's parts live by job beside this module: `postings` (ids,
blocks, the packing of postings: pure), `codec` (a message's entry under the tenant's
codec), `catchup` (the change checks, claims, batched writes and take-backs of a
catch-up), `lifecycle` (what a delete, a redaction, an erase or a restore removes). The
names this module held before they moved are imported here as themselves (`X as X`), so
their import path still works. docs/search.md.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mindstore.collection_names import (
    SEARCH_ENTRIES,
    SEARCH_POSTINGS,
    SEARCH_TASKS,
    SEARCH_VECTORS,
)

from .catchup import FLUSH as FLUSH
from .catchup import LEASE, MARGIN, REPLY_DOCUMENTS, CatchUp
from .catchup import ROUNDS as ROUNDS
from .codec import Codec, entry_for
from .codec import codec_for as codec_for
from .entries import Entry as Entry
from .entries import StoredText, TaskTable, entry_id, holding, key_of, tables_of, unpack_chunk
from .lifecycle import forget_message, forget_task, forget_tenant, reset_tenant
from .lifecycle import pull_postings as pull_postings
from .lifecycle import task_terms as task_terms
from .postings import (
    BLOCK_BYTES,
    FORMAT,
    IndexState,
    postings_id,
    stats_filter,
    stats_id,
)
from .postings import ROLE_CODES as ROLE_CODES
from .postings import ROLES_BY_CODE as ROLES_BY_CODE
from .postings import Packed as Packed
from .postings import micros as micros
from .postings import pack_group as pack_group
from .postings import terms_id as terms_id
from .postings import unpack as unpack
from .tokenize import TOKENIZER_VERSION

TABLE_ORDINALS = 50_000
"""The most ordinals one tables read names (some 600 KB of command): a tenant of millions
of tasks whose common word is in most of them reads its tables in several finds, never
in one command near a server's 16 MiB."""

TABLE_REPLY_DOCUMENTS = 100_000
"""Chunks the first reply of a tables read may hold: every chunk of the tasks a query's
postings name (two for a task of 100 messages, some 350 bytes each), so a search of a
million messages reads its 20,000 in the first reply (a server caps it at 16 MiB), not
in one more round trip per 10,000."""

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher

    from .embedder import Embedder

__all__ = [
    "BLOCK_BYTES",
    "FORMAT",
    "LEASE",
    "MARGIN",
    "Codec",
    "IndexState",
    "SearchStore",
    "entry_for",
    "forget_message",
    "forget_task",
    "forget_tenant",
    "postings_id",
    "reset_tenant",
    "stats_id",
]


class SearchStore:
    """One tenant's index: its state, bringing it up to date, the lookup, the texts."""

    def __init__(
        self,
        database: Any,
        tenant: str,
        tasks: Any,
        cipher: TenantCipher | None,
        states: dict[str, IndexState],
        embedder: Embedder | None = None,
    ) -> None:
        self.database = database
        self.tenant = tenant
        self.tasks = tasks
        self.cipher = cipher
        self._states = states
        self.entries = database[SEARCH_ENTRIES]
        self.postings = database[SEARCH_POSTINGS]
        self.task_marks = database[SEARCH_TASKS]
        self.vectors = database[SEARCH_VECTORS]
        self.embedder = embedder
        """The store's embedder: a catch-up embeds what it indexes (None: no vectors)."""
        self.embed_failure: Exception | None = None
        """The embedder's last error in a catch-up (`vector_index.embed_sources`)."""

    # ------------------------------------------------------------------ state
    async def state(self, *, fresh: bool = False) -> IndexState:
        """The tenant's index state (this process's copy unless `fresh`)."""
        held = self._states.get(self.tenant)
        if held is not None and not fresh:
            return held
        document = await self.postings.find_one(stats_filter(self.tenant))
        if document is None:
            await self.postings.update_one(
                stats_filter(self.tenant),
                {"$setOnInsert": {"docs": 0, "length": 0, "epoch": 1, "stem": None, "kv": None,
                                  "f": FORMAT, "tv": TOKENIZER_VERSION, "q": 0}},
                upsert=True,
            )  # fmt: skip
            document = {"epoch": 1, "f": FORMAT, "tv": TOKENIZER_VERSION}
        state = IndexState.of(document)
        self.remember(state)
        return state

    def forget_state(self) -> None:
        self._states.pop(self.tenant, None)

    def held(self, default: IndexState) -> IndexState:
        """This process's copy of the state (shared by the store's views), else `default`."""
        return self._states.get(self.tenant, default)

    def remember(self, state: IndexState) -> None:
        self._states[self.tenant] = state

    # ------------------------------------------------------------------ catching up
    async def refresh(
        self, wanted: Callable[[Codec], Sequence[str]] | None = None
    ) -> tuple[Codec, list[dict[str, Any]] | None]:
        """Index every task changed since the watermark (`CatchUp.run`); return the tenant's
        codec and, when the last change check could answer it, the postings documents of
        `wanted(codec)`'s terms (with the statistics document), else None (then ask
        `lookup`)."""
        codec, found = await CatchUp(self).run(wanted)
        if found is not None and wanted is not None:
            found = await self._complete(wanted(codec), found)
        return codec, found

    # ------------------------------------------------------------------ asking
    def lookup_ids(self, stored_terms: Sequence[str], first: int = 0) -> list[str]:
        """The `_id`s of the postings documents of `stored_terms` in blocks `first` up to
        the last this process knows of (`IndexState.written`), and of the statistics
        document."""
        last = self.held(IndexState()).last_block
        wanted = [
            postings_id(self.tenant, term, block)
            for term in dict.fromkeys(stored_terms)
            for block in range(first, last + 1)
        ]
        return [*wanted, stats_id(self.tenant)]

    async def lookup(self, stored_terms: Sequence[str]) -> list[dict[str, Any]]:
        """Every postings document of `stored_terms` and the statistics document: one
        `_id` lookup (two when another process wrote a block this one did not know of)."""
        asked = self.lookup_ids(stored_terms)
        found = self.postings.find(
            {"tenant": self.tenant, "_id": {"$in": asked}}, batch_size=REPLY_DOCUMENTS
        )
        return await self._complete(stored_terms, [document async for document in found])

    async def _complete(
        self, stored_terms: Sequence[str], found: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """`found` (read from the blocks this process knew of), with the blocks the
        statistics document read with them shows another process has begun since: this
        process's copy of the counter moves on, so the next search asks them at once."""
        stats = next((d for d in found if d.get("_id") == stats_id(self.tenant)), None)
        if stats is None:
            return found
        held = self.held(IndexState())
        seen = IndexState.of(stats)
        if seen.written <= held.written and seen.top <= held.top:
            return found
        known = held.last_block
        self.remember(
            replace(held, written=max(held.written, seen.written), top=max(held.top, seen.top))
        )
        if seen.last_block <= known:
            return found
        more = self.lookup_ids(stored_terms, first=known + 1)[:-1]
        extra = self.postings.find(
            {"tenant": self.tenant, "_id": {"$in": more}}, batch_size=REPLY_DOCUMENTS
        )
        return [*found, *[document async for document in extra]]

    async def tables(self, wanted: Mapping[int, Collection[int]]) -> dict[int, TaskTable]:
        """The tables of the tasks of `wanted`'s ordinals, with the rows of the message
        indexes it names (`entries.tables_of`): one find of their chunks' clear fields (no
        text), by ordinal within the tenant. Scope (owner, tasks) is applied to them by
        the search, as it was to postings, which hold every owner's tasks."""
        ordinals = sorted(wanted)
        tables: dict[int, TaskTable] = {}
        for part in range(0, len(ordinals), TABLE_ORDINALS):  # all of one ordinal in one part
            found = self.entries.find(
                {"tenant": self.tenant, "r": {"$in": ordinals[part : part + TABLE_ORDINALS]}},
                {"r": 1, "o": 1, "l": 1, "g": 1, "m": 1},
                batch_size=TABLE_REPLY_DOCUMENTS,
            )
            tables.update(tables_of([chunk async for chunk in found], wanted))
        return tables

    async def texts(
        self, ids: Sequence[str], codec: Codec, chunks: Mapping[str, str] | None = None
    ) -> dict[str, StoredText]:
        """The texts and message ids of the messages named `ids` (``<task key>/<index>``),
        opened: one read of the chunks holding them, at most one per message, each
        bounded (`entries.CHUNK_SPAN`, `entries.CHUNK_TEXT`). With `chunks` (name -> the
        `_id` of the chunk a table read saw holding it, for every name) the chunks are
        read by `_id`; else, and for a message not found there (its task was chunked
        anew meanwhile), by the range that holds it (`entries.holding`). A message no
        chunk holds (redacted or deleted meanwhile) is left out."""
        wanted = set(ids)
        if not wanted:
            return {}
        out: dict[str, StoredText] = {}
        if chunks is not None and wanted <= set(chunks):
            named = sorted({chunks[name] for name in wanted})
            await self._open_chunks({"_id": {"$in": named}}, wanted, codec, out)
            wanted -= set(out)
            if not wanted:
                return out
        clauses = [holding(name) for name in sorted(wanted)]
        await self._open_chunks({"$or": clauses}, wanted, codec, out)
        return out

    async def _open_chunks(
        self, query: dict[str, Any], wanted: set[str], codec: Codec, out: dict[str, StoredText]
    ) -> None:
        """Read the chunks `query` finds in the tenant; add the `wanted` messages to `out`."""
        found = self.entries.find(
            {"tenant": self.tenant, **query}, {"task": 1, "z": 1}, batch_size=len(wanted) + 1
        )
        async for chunk in found:
            key, task = key_of(str(chunk["_id"])), str(chunk.get("task"))
            opened = codec.open(chunk.get("z"), task, str(chunk["_id"]))
            for index, message_id, text in unpack_chunk(chunk, opened):
                name = entry_id(key, index)
                if name in wanted:
                    out[name] = StoredText(task, message_id, text)

    # ------------------------------------------------------------------ operators
    async def reset(self, *, stemming: str | None, key_version: int | None = None) -> None:
        """Drop the tenant's index; the next search rebuilds it (a new epoch). The counter of
        task ordinals carries on: an ordinal is never handed out twice (a catch-up that
        began before the reset still names its tasks by the ones it was given)."""
        state = await self.state(fresh=True)
        await forget_tenant(self.database, self.tenant)
        await self.postings.update_one(
            stats_filter(self.tenant),
            {
                "$max": {"r": state.ordinals},
                "$set": {
                    "docs": 0,
                    "length": 0,
                    "epoch": state.epoch + 1,
                    "stem": stemming,
                    "kv": key_version,
                    "f": FORMAT,
                    "tv": TOKENIZER_VERSION,
                    "q": 0,
                },
                "$unset": {"wm": ""},
            },
            upsert=True,
        )
        self.forget_state()
