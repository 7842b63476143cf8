"""The search index's catch-up: brought up to date by each search itself, then asked once.

Writes stay as they are: an append writes nothing for search. Each search first asks
which of the tenant's tasks changed since the index last saw them (one aggregate on
`tasks`: those updated since the tenant's watermark, less a margin for writers' clock
skew, whose version differs from the one `search_tasks` recorded, or whose indexing
another search has claimed and not finished, joined by `$lookup`), indexes what changed
(one append since: only the new messages; any other change: the whole task again), and
asks again until nothing is left to do; the last ask carries the postings of its terms
(a `$lookup` from the row of one known task, which returns the tenant's statistics too).
Each task's indexing is claimed first (a guarded update of its mark) and released last
(the same mark, guarded by the claim), so a search waits for a claim it cannot take, and
a claimer whose task was redacted or deleted meanwhile takes back what it wrote. So a
message is found, once, by every search that starts after its append returned, from any
store on the database, whatever other searches run. Every write names its documents by
`_id`, or by task within the tenant. docs/search.md.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pymongo import ReturnDocument, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from mindstore.clock import utcnow
from mindstore.collection_names import SEARCH_POSTINGS, SEARCH_TASKS, TASKS
from mindstore.errors import ConfigurationError, NotFound
from mindstore.ids import task_id_of

from .codec import Codec, codec_for, entry_for
from .entries import candidates, pack_chunks
from .lifecycle import delete_entries, drop_emptied, forget_task, pull_postings, task_postings
from .postings import (
    FORMAT,
    IndexState,
    Packed,
    as_ordinal,
    block_of,
    group_bytes,
    pack_group,
    pack_terms,
    postings_id,
    stats_filter,
    terms_id,
)
from .tokenize import TOKENIZER_VERSION
from .vector_index import embed_sources, sources_of, write_vectors

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher

    from .embedder import Embedder

MARGIN = timedelta(seconds=120)
"""How far before the watermark a search looks for changed tasks: the clock skew between
writers it tolerates (a task's `updated_at` is its writer's clock)."""

LEASE = timedelta(seconds=120)
"""How long a claim on a task's indexing holds before another search may take it over
(its claimer is taken to have died)."""

ROUNDS = 8
"""Catch-up rounds of one search (each: ask what changed, index it). A task changed again
while it was indexed is indexed again in the next round; past this many, the search
answers from the index as it stands, except for tasks a redaction pulled (`PULLED_ROUNDS`):
those are indexed again, since their postings are gone, not merely behind."""
PULLED_ROUNDS = 3 * ROUNDS
"""Rounds after which a search answers even with a pulled task (a writer redacting in one
task without pause would otherwise hold the search forever)."""

FLUSH = 500
"""Tasks claimed before their writes go out: a claim is held for the reads of at most
this many tasks (well inside `LEASE`), and a large catch-up is written in parts."""

REPLY_DOCUMENTS = 10_000
"""Documents the first reply of a change check or a postings lookup may hold (a server
also caps it at 16 MiB): a term's postings lie in one document per block, so a search of
a large tenant's common words reads hundreds of documents, which the default first
batch (101) would spread over several round trips."""

_WAIT_FIRST, _WAIT_MOST = 0.002, 0.2
"""Seconds between two asks while another search holds a claim (doubling)."""


@dataclass(frozen=True)
class _Claim:
    """One task this search claimed: what it wrote, to release the claim or take it back."""

    key: str
    task_id: str
    ordinal: int
    token: str
    version: int
    terms: tuple[str, ...]
    blocks: tuple[int, ...]
    chunks: tuple[str, ...]
    vectors: tuple[str, ...]
    """The `_id`s of the entries' chunks and vectors it wrote."""


@dataclass
class _Batch:
    """The writes of one catch-up round, gathered across its tasks."""

    documents: list[dict[str, Any]] = field(default_factory=list)
    """The entries' chunks (`entries.pack_chunks`)."""
    gone_chunks: list[str] = field(default_factory=list)
    gone_vectors: list[str] = field(default_factory=list)
    """Chunks and vectors of tasks indexed whole again (every `_id` they may hold, from
    their marks' counts): deleted before the new ones go in."""
    pulls: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    """(term, block) -> the ordinals of the tasks indexed whole again, pulled from it."""
    pushes: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    """(term, block) -> groups ``{t: ordinal, p: <packed postings>}`` (`pack_group`)."""
    start: int = 0
    written: int = 0
    """The tenant's counter of postings bytes written, as this batch advanced it: each
    group goes to the block the counter stood at (`postings.block_of`)."""
    terms: list[UpdateOne] = field(default_factory=list)
    """Each indexed task's terms document: what a later re-index or delete pulls."""
    claims: list[_Claim] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    vectors: list[dict[str, Any]] = field(default_factory=list)
    """The entries' vector documents (`vector_index`), and the model key they are of."""
    model: str | None = None
    docs: int = 0
    length: int = 0

    @classmethod
    def at(cls, written: int) -> _Batch:
        """A batch starting where the tenant's counter of written bytes stands."""
        return cls(start=written, written=written)


async def _bulk(collection: Any, requests: Sequence[Any], *, ordered: bool = False) -> Any:
    """`requests` in chunks of 1,000; the last chunk's result (None: nothing sent)."""
    result = None
    for chunk in range(0, len(requests), 1000):
        part = list(requests[chunk : chunk + 1000])
        try:
            result = await collection.bulk_write(part, ordered=ordered)
        except BulkWriteError as error:
            # two upserts of one new postings document racing on a server: the loser's
            # insert fails on the `_id`; sent again, it updates the winner's document
            failed = error.details.get("writeErrors", [])
            if ordered or any(e.get("code") != 11000 for e in failed):
                raise
            result = await collection.bulk_write([part[e["index"]] for e in failed])
    return result


def _pulled(row: dict[str, Any]) -> bool:
    """Whether a change-check row's task had its postings pulled by a redaction (its mark
    reset to -1) and not indexed since: an answer without it would miss all its messages."""
    mark = (row.get("s") or [None])[0]
    return mark is not None and int(mark.get("v", 0)) == -1


def _mark(row: dict[str, Any]) -> dict[str, Any] | None:
    """A change-check row's task mark (None: never indexed)."""
    marks: list[dict[str, Any]] = row.get("s") or []
    return marks[0] if marks else None


def _ordinal_of(mark: dict[str, Any] | None) -> int | None:
    """The ordinal a task's mark holds (None: none given yet)."""
    return as_ordinal((mark or {}).get("r"))


def _current(row: dict[str, Any]) -> bool:
    """Whether a change-check row's task is indexed at its version, claim released."""
    return int(row.get("same") or 0) > 0


def _expired(mark: dict[str, Any]) -> bool:
    """Whether a claim is older than `LEASE` (its claimer is taken to have died)."""
    at = mark.get("wa")
    if not isinstance(at, datetime):
        return True
    now = utcnow()
    if at.tzinfo is None and now.tzinfo is not None:
        at = at.replace(tzinfo=now.tzinfo)
    return now - at > LEASE


class TenantIndex(Protocol):
    """What a catch-up needs of one tenant's index (`index.SearchStore`): its collections,
    read at each use (the store's own attributes are what a catch-up writes through), its
    state (this process's copy, shared by the store's views), a reset, and the `_id`s a
    lookup reads."""

    tenant: str
    database: Any
    tasks: Any
    cipher: TenantCipher | None
    entries: Any
    postings: Any
    task_marks: Any
    vectors: Any
    embedder: Embedder | None
    embed_failure: Exception | None

    def forget_state(self) -> None: ...

    async def state(self, *, fresh: bool = False) -> IndexState: ...

    def held(self, default: IndexState) -> IndexState: ...

    def remember(self, state: IndexState) -> None: ...

    async def reset(self, *, stemming: str | None, key_version: int | None = None) -> None: ...

    def lookup_ids(self, stored_terms: Sequence[str]) -> list[str]: ...


class CatchUp:
    """One search's catch-up of a tenant's index: the change checks, the claims, the
    batched writes, the releases and the take-backs."""

    def __init__(self, index: TenantIndex) -> None:
        self.index = index
        self.tenant = index.tenant

    async def run(
        self, wanted: Callable[[Codec], Sequence[str]] | None = None
    ) -> tuple[Codec, list[dict[str, Any]] | None]:
        """Index every task changed since the watermark (`SearchStore.refresh`, which says
        what it returns).

        Rounds: ask what changed (tasks claimed by another search and not released count
        as changed), index what this search can claim, and ask again, until nothing is
        left; a claim held by another is waited for (then taken over once its `LEASE` ran
        out). The postings ride on the last ask: its pipeline always returns the row of
        one known task (the carrier), whose `$lookup` reads the postings by `_id`."""
        state = await self.index.state()
        if state.tokenizer > TOKENIZER_VERSION:  # a newer mindstore's: never mix terms
            raise ConfigurationError(
                f"search: the index of {self.tenant} was built by a newer mindstore "
                f"(tokenizer {state.tokenizer}, this one {TOKENIZER_VERSION}): upgrade"
            )
        codec = await codec_for(self.tenant, self.index.cipher, state)
        if (
            codec.key_version != state.key_version
            or state.format != FORMAT
            or state.tokenizer != TOKENIZER_VERSION
        ):
            await self.index.reset(stemming=state.stemming, key_version=codec.key_version)
            state = await self.index.state(fresh=True)
        mine: dict[str, str] = {}  # tasks this search indexed: key -> id (are they still there?)
        pause = _WAIT_FIRST
        worked = 0
        while True:
            state = self.index.held(state)
            rows = await self._changed(state, codec, wanted, list(mine))
            present = {row["_id"] for row in rows}
            vanished = [key for key in mine if key not in present]
            for key in vanished:  # deleted while this search indexed it
                await forget_task(self.index.database, self.tenant, mine.pop(key))
            stale = [row for row in {r["_id"]: r for r in rows}.values() if not _current(row)]
            if worked >= ROUNDS:  # answer from the index as it stands, but for pulled tasks
                stale = [row for row in stale if _pulled(row)] if worked < PULLED_ROUNDS else []
            if not stale:
                carrier = state.carrier if wanted is not None else None
                if vanished or carrier is None or carrier not in present:
                    return codec, None
                return codec, [r["p"] for r in rows if r["_id"] == carrier and "p" in r]
            batch, claimed, busy = _Batch.at(self.index.held(state).written), 0, 0
            ordinals = await self._ordinals(sum(_ordinal_of(_mark(r)) is None for r in stale))
            for at, row in enumerate(stale):
                busy += not await self._index_task(row, codec, batch, ordinals)
                if batch.claims and (len(batch.claims) >= FLUSH or at == len(stale) - 1):
                    await self._apply(batch, self.index.held(state))
                    mine.update((claim.key, claim.task_id) for claim in batch.claims)
                    claimed += len(batch.claims)
                    batch = _Batch.at(self.index.held(state).written)
            if claimed or not busy:
                worked += 1
                pause = _WAIT_FIRST
            else:  # another search is indexing them: wait for it to release its claims
                await asyncio.sleep(pause)
                pause = min(pause * 2, _WAIT_MOST)

    async def _ordinals(self, count: int) -> Iterator[int]:
        """`count` task ordinals never handed out before in the tenant (one `$inc` of its
        counter, ``r``; none: no write). A task keeps its ordinal while its mark lives; an
        ordinal a lost claim took is not handed out again."""
        if not count:
            return iter(())
        after = await self.index.postings.find_one_and_update(
            stats_filter(self.tenant),
            {"$inc": {"r": count}},
            projection={"r": 1},
            upsert=True,  # erased meanwhile: a document without a form, rebuilt next time
            return_document=ReturnDocument.AFTER,
        )
        last = int(after["r"])
        return iter(range(last - count + 1, last + 1))

    async def _changed(
        self,
        state: IndexState,
        codec: Codec,
        wanted: Callable[[Codec], Sequence[str]] | None,
        also: list[str],
    ) -> list[dict[str, Any]]:
        """The change check: rows of the tasks updated since the watermark (less `MARGIN`),
        of the tasks `also` names and of the carrier, each with its marks (`s`) and `same`
        (1: indexed at its version, no claim pending); the carrier's row with the postings
        of `wanted`'s terms, one output row per postings document (`p`)."""
        carrier = state.carrier if wanted is not None else None
        named = [*also, *([carrier] if carrier is not None else [])]
        # the time bound is a second `$match` after the projection: a server moves it up
        # and merges the two (one `tenant_updated` scan); the embedded backend runs the
        # first `$match` and its projection as a find, copying only the projected fields
        recent: list[dict[str, Any]] = []
        if state.watermark is not None:
            since: dict[str, Any] = {"updated_at": {"$gte": state.watermark - MARGIN}}
            if named:
                since = {"$or": [since, {"_id": {"$in": named}}]}
            recent = [{"$match": since}]
        done = {"$and": [{"$eq": ["$$x.v", "$version"]}, {"$eq": ["$$x.w", ""]}]}
        same = {"$size": {"$filter": {"input": "$s", "as": "x", "cond": done}}}
        shown: dict[str, Any] = {
            "version": 1, "seq": 1, "owner": 1, "updated_at": 1, "s": 1, "same": same
        }  # fmt: skip
        keep: dict[str, Any] = {"same": 0}
        if named:
            keep = {"$or": [keep, {"_id": {"$in": named}}]}
        ride: list[dict[str, Any]] = []
        if carrier is not None and wanted is not None:
            ids = self.index.lookup_ids(wanted(codec))
            is_carrier = {"$eq": ["$_id", {"$literal": carrier}]}
            # only the carrier's row looks postings up; "" names no postings document
            shown["k"] = {"$cond": [is_carrier, {"$literal": ids}, {"$literal": [""]}]}
            ride = [
                {
                    "$lookup": {
                        "from": SEARCH_POSTINGS,
                        "localField": "k",
                        "foreignField": "_id",
                        "as": "p",
                    }
                },
                # one output document per postings document: none grows with their sizes
                {"$unwind": {"path": "$p", "preserveNullAndEmptyArrays": True}},
                {"$project": {"k": 0}},  # the ids it asked for, not sent back with each
            ]
        pipeline = [
            {"$match": {"tenant": self.tenant}},
            {"$project": {"version": 1, "seq": 1, "owner": 1, "updated_at": 1}},
            *recent,
            {
                "$lookup": {
                    "from": SEARCH_TASKS,
                    "localField": "_id",
                    "foreignField": "_id",
                    "as": "s",
                }
            },
            {"$project": shown},
            {"$match": keep},
            *ride,
        ]
        found = await self.index.database[TASKS].aggregate(pipeline, batchSize=REPLY_DOCUMENTS)
        return list(await found.to_list(None))

    async def _index_task(
        self, row: dict[str, Any], codec: Codec, batch: _Batch, ordinals: Iterator[int]
    ) -> bool:
        """Read what changed of one task, claim it, and add its writes to `batch`; False:
        another search holds its claim (or took it first). A task without an ordinal
        takes the next of `ordinals`."""
        key = row["_id"]
        task_id = task_id_of(key)
        old = _mark(row)
        ordinal = _ordinal_of(old) or next(ordinals)
        claimed_by = str(old.get("w") or "") if old else ""
        if old is not None and claimed_by and not _expired(old):
            return False
        seq, version = int(row.get("seq") or 0), int(row.get("version") or 0)
        old_s = int(old.get("s", 0)) if old else 0
        # one write since, which added messages: an append (several writes could be a part
        # added to an indexed message and a two-message append: versions and counts alike)
        appended = (
            old is not None
            and not claimed_by
            and version - int(old.get("v", 0)) == 1
            and seq > old_s
        )
        start = old_s if appended else 0
        try:  # only what the change check saw: a later change is the next round's
            messages = await self.index.tasks.read_range(task_id, start, max(start, seq))
        except NotFound:
            await forget_task(self.index.database, self.tenant, task_id)
            return True
        owner = row.get("owner")
        made = [
            entry_for(m, start + n, self.tenant, task_id, codec) for n, m in enumerate(messages)
        ]
        entries = [e for e in made if e is not None]
        # embedded before the claim (an embedder's failure is kept, `embed_sources`)
        sources = sources_of(self.index.embedder, messages, made, task_id, owner)
        model, vectors = await embed_sources(self.index, sources)
        new_terms = sorted({term for e in entries for term in e.postings})
        kept_d = int(old.get("d", 0)) if appended and old else 0
        kept_l = int(old.get("l", 0)) if appended and old else 0
        total_d = kept_d + len(entries)
        total_l = kept_l + sum(e.length for e in entries)
        token = secrets.token_hex(8)
        mark = {
            "r": ordinal,
            "v": version,
            "s": start + len(messages),
            "d": total_d,
            "l": total_l,
            "u": row.get("updated_at"),
            "w": token,
            "wa": utcnow(),
        }
        # claim the work first: of two searches indexing one change, one writes postings
        guard: dict[str, Any] = {"_id": key, "tenant": self.tenant}
        try:
            if old is None:
                await self.index.task_marks.insert_one({**guard, **mark})
            else:
                done = await self.index.task_marks.update_one(
                    {**guard, "v": old.get("v"), "w": claimed_by}, {"$set": mark}
                )
                if done.matched_count == 0:
                    return False
        except DuplicateKeyError:
            return False
        if not appended and old is not None:
            old_terms, old_blocks, pulled = await task_postings(
                self.index.database, self.tenant, key
            )
            for term in old_terms:
                for block in old_blocks:
                    batch.pulls.setdefault((term, block), []).append(pulled or ordinal)
            old_chunks, old_vectors = candidates(key, old_s)
            batch.gone_chunks += old_chunks
            batch.gone_vectors += old_vectors
        written = pack_chunks(entries, self.tenant, task_id, owner, codec.seal, ordinal)
        batch.documents += written
        grouped: dict[str, list[Packed]] = {}
        for entry in entries:
            for term, posting in entry.postings.items():
                grouped.setdefault(term, []).append(posting)
        blocks: set[int] = set()
        for term, packed in grouped.items():
            for group in pack_group(ordinal, term, packed, codec.seal_places):
                block = block_of(batch.written)
                batch.written += group_bytes(group)
                batch.pushes.setdefault((term, block), []).append(group)
                blocks.add(block)
        ordered = sorted(blocks)
        packed_terms = [pack_terms(new_terms)] if new_terms else []
        terms: dict[str, Any] = (
            {"$push": {"k": {"$each": packed_terms}}, "$addToSet": {"b": {"$each": ordered}},
             "$set": {"r": ordinal}}
            if appended
            else {"$set": {"k": packed_terms, "b": ordered, "r": ordinal}}
        )  # fmt: skip
        batch.terms.append(
            UpdateOne({"_id": terms_id(key), "tenant": self.tenant}, terms, upsert=True)
        )
        batch.claims.append(
            _Claim(
                key, task_id, ordinal, token, version, tuple(new_terms), tuple(ordered),
                tuple(c["_id"] for c in written), tuple(e.id for e in entries),
            )
        )  # fmt: skip
        batch.vectors += vectors
        batch.model = model or batch.model
        batch.rows.append(row)
        batch.docs += total_d - (int(old.get("d", 0)) if old else 0)
        batch.length += total_l - (int(old.get("l", 0)) if old else 0)
        return True

    async def _apply(self, batch: _Batch, state: IndexState) -> None:
        """The writes of one round, grouped (each postings document is written at most
        twice: a pull, then a push), then the claims released; a claim found invalidated
        (its task redacted or deleted meanwhile) takes back what it wrote."""
        tenant = self.tenant
        if batch.pulls:
            pulled = [postings_id(tenant, term, part) for term, part in batch.pulls]
            pulls: list[Any] = [
                UpdateOne(
                    {"_id": postings_id(tenant, term, part), "tenant": tenant},
                    {"$pull": {"e": {"t": {"$in": ordinals}}}},
                )
                for (term, part), ordinals in batch.pulls.items()
            ]
            await _bulk(self.index.postings, [*pulls, drop_emptied(tenant, pulled)], ordered=True)
        await delete_entries(self.index.database, tenant, batch.gone_chunks, batch.gone_vectors)
        for chunk in range(0, len(batch.documents), 1000):
            await self._insert(batch.documents[chunk : chunk + 1000])
        await write_vectors(self.index, batch.vectors)  # with the entries, before releases
        writes: list[Any] = [
            UpdateOne(
                {"_id": postings_id(tenant, term, part), "tenant": tenant},
                {"$push": {"e": {"$each": postings}}},
                upsert=True,
            )
            for (term, part), postings in batch.pushes.items()
        ]
        stats: dict[str, Any] = {}
        grown = batch.written - batch.start
        if batch.docs or batch.length or grown:
            stats["$inc"] = {"docs": batch.docs, "length": batch.length, "q": grown}
        top = max((block for _term, block in batch.pushes), default=0)
        if batch.pushes:  # the last block written, whatever this process's count said
            stats["$max"] = {"qb": top}
        state = replace(state, written=max(state.written, batch.written), top=max(state.top, top))
        self.index.remember(state)
        marked = [row for row in batch.rows if row.get("updated_at") is not None]
        if marked:
            last = max(marked, key=lambda row: row["updated_at"])
            stats["$max"] = {**stats.get("$max", {}), "wm": last["updated_at"]}
            stats["$set"] = {"wt": last["_id"]}
            held = state.watermark
            watermark = last["updated_at"] if held is None else max(last["updated_at"], held)
            self.index.remember(replace(state, watermark=watermark, carrier=last["_id"]))
        if batch.model is not None:
            stats.setdefault("$set", {})["vm"] = batch.model  # the tenant's model, recorded
        if stats:
            writes.append(UpdateOne(stats_filter(tenant), stats))
        await _bulk(self.index.postings, writes)
        # the terms first, then the release: whoever claims the task next pulls them
        releases = [
            UpdateOne(
                {"_id": c.key, "tenant": tenant, "v": c.version, "w": c.token},
                {"$set": {"w": ""}},
            )
            for c in batch.claims
        ]
        result = await _bulk(self.index.task_marks, [*batch.terms, *releases], ordered=True)
        released = result.matched_count + result.upserted_count - len(batch.terms)
        if len(batch.terms) + len(releases) <= 1000 and released == len(releases):
            return  # every claim released (one chunk: its counts tell)
        await self._take_back(batch.claims)

    async def _take_back(self, claims: Sequence[_Claim]) -> None:
        """Remove what a claim wrote if its task was redacted (its mark reset to -1) or
        deleted (its mark gone) while it indexed: the words it read must not outlive the
        change. A mark at the claim's version or a later one (released, or claimed again
        since) is left alone; so is one taken over (`LEASE`) at the same version, whose
        new claimer writes the same postings."""
        keys = [c.key for c in claims]
        marks = {
            m["_id"]: m
            async for m in self.index.task_marks.find({"tenant": self.tenant, "_id": {"$in": keys}})
        }
        for claim in claims:
            mark = marks.get(claim.key)
            if mark is not None and int(mark.get("v", 0)) >= claim.version:
                continue
            await pull_postings(
                self.index.database, self.tenant, claim.ordinal, claim.terms, claim.blocks
            )
            await delete_entries(self.index.database, self.tenant, claim.chunks, claim.vectors)
            terms = {"_id": terms_id(claim.key), "tenant": self.tenant}
            if mark is None:
                await self.index.task_marks.delete_one(terms)
                continue
            await self.index.task_marks.update_one(terms, {"$set": {"k": [], "b": []}})
            await self.index.task_marks.update_one(
                {"_id": claim.key, "tenant": self.tenant, "w": claim.token}, {"$set": {"w": ""}}
            )

    async def _insert(self, documents: list[dict[str, Any]]) -> None:
        try:
            await self.index.entries.insert_many(documents, ordered=False)
        except BulkWriteError as error:  # left by an indexing cut short: the same ids
            if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
                raise
