"""The search index's I/O: brought up to date by the search itself, then asked once.

Writes stay as they are: an append writes nothing for search. Each search first asks
which of the tenant's tasks changed since the index last saw them (one aggregate on
`tasks`: those updated since the tenant's watermark, less a margin for writers' clock
skew, whose version differs from the one `search_tasks` recorded, joined by `$lookup`),
indexes what changed (a pure append: only the new messages; any other change: the whole
task again), then looks its terms up (one aggregate on `search_entries`). So a message is
found by every search that starts after its append returned, from any store on the
database, and a search that finds nothing new costs two round trips plus one for the
snippets of the page it returns. docs/search.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pymongo.errors import BulkWriteError, DuplicateKeyError

from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_TASKS, TASKS
from mindstore.crypto.aead import open_value, seal_value
from mindstore.errors import NotFound
from mindstore.ids import task_id_of, task_key
from mindstore.model.plans.redaction import redaction_of

from .blind import Blinder, derive_search_key
from .query import tool_term
from .text import searchable
from .tokenize import Stemmer, stemmer_for, tokens

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher
    from mindstore.model.messages import AnyMessage

__all__ = [
    "MARGIN",
    "Codec",
    "IndexState",
    "SearchStore",
    "forget_message",
    "forget_task",
    "forget_tenant",
    "reset_tenant",
    "stats_id",
]

MARGIN = timedelta(seconds=120)
"""How far before the watermark a search looks for changed tasks: the clock skew between
writers it tolerates (a task's `updated_at` is its writer's clock)."""
STATS_TERM = ""
"""The term the statistics document posts (no word is empty), so the lookup returns it."""


def stats_id(tenant: str) -> str:
    """The `_id` of a tenant's statistics document (no task key ends in ``/``)."""
    return f"{tenant}/"


@dataclass(frozen=True)
class IndexState:
    """A tenant's index, as the statistics document holds it."""

    watermark: datetime | None = None
    epoch: int = 0
    stemming: str | None = None
    key_version: int | None = None
    documents: int = 0
    length: int = 0

    @classmethod
    def of(cls, document: dict[str, Any] | None) -> IndexState:
        if not document:
            return cls()
        return cls(
            watermark=document.get("wm"),
            epoch=int(document.get("epoch") or 0),
            stemming=document.get("stem"),
            key_version=document.get("kv"),
            documents=int(document.get("docs") or 0),
            length=int(document.get("length") or 0),
        )


@dataclass
class Codec:
    """How terms and texts are stored for one tenant: as they are, or under its keys."""

    term: Callable[[str], str]
    seal: Callable[[str, str, str], Any]
    """(text, task id, message id) -> the stored form."""
    open: Callable[[Any, str, str], str]
    stem: Stemmer | None
    key_version: int | None


def _plain_codec(stem: Stemmer | None) -> Codec:
    return Codec(lambda t: t, lambda x, _t, _m: x, lambda x, _t, _m: str(x or ""), stem, None)


async def codec_for(tenant: str, cipher: TenantCipher | None, state: IndexState) -> Codec:
    """The tenant's codec: blind tokens and sealed texts under a keyring (docs/search.md).

    Raises:
        KeyShredded: The tenant's keys were destroyed: it cannot be searched.
    """
    stem = stemmer_for(state.stemming)
    if cipher is None:
        return _plain_codec(stem)
    keys = await cipher.ready(write=True)
    version, data_key = keys.current()
    blind = Blinder(derive_search_key(data_key, tenant))

    def seal(text: str, task_id: str, message_id: str) -> Any:
        return seal_value(text, data_key, version, (tenant, task_id, message_id, "search.x"))

    def opened(value: Any, task_id: str, message_id: str) -> str:
        return str(open_value(value, keys.key, (tenant, task_id, message_id, "search.x")))

    return Codec(blind, seal, opened, stem, version)


def entry_for(
    message: AnyMessage, index: int, tenant: str, task_id: str, owner: str | None, codec: Codec
) -> dict[str, Any] | None:
    """The index entry of one message (None: nothing of it is searchable, or redacted)."""
    if redaction_of(message) is not None:
        return None
    found = searchable(message)
    words = [t.term for t in tokens(found.text, codec.stem)]
    counts = Counter(codec.term(w) for w in words)
    for tool in found.tools:
        counts[codec.term(tool_term(tool))] += 0  # a filter, not a scored word
    if not counts:
        return None
    message_id = str(getattr(message, "id", ""))
    return {
        "_id": f"{task_key(tenant, task_id)}/{index}",
        "tenant": tenant,
        "task": task_id,
        "i": index,
        "m": message_id,
        "r": str(getattr(message, "role", "unknown")),
        "o": owner,
        "ts": float(getattr(message, "started_ts", 0) or 0),
        "p": [{"t": term, "c": count} for term, count in counts.items()],
        "n": len(words),
        "x": codec.seal(found.text, task_id, message_id),
    }


class SearchStore:
    """One tenant's index: its state, bringing it up to date, the lookup, the texts."""

    def __init__(
        self,
        database: Any,
        tenant: str,
        tasks: Any,
        cipher: TenantCipher | None,
        states: dict[str, IndexState],
    ) -> None:
        self.database = database
        self.tenant = tenant
        self.tasks = tasks
        self.cipher = cipher
        self._states = states
        self.entries = database[SEARCH_ENTRIES]
        self.task_marks = database[SEARCH_TASKS]

    # ------------------------------------------------------------------ state
    async def state(self, *, fresh: bool = False) -> IndexState:
        """The tenant's index state (this process's copy unless `fresh`)."""
        held = self._states.get(self.tenant)
        if held is not None and not fresh:
            return held
        document = await self.entries.find_one(
            {"_id": stats_id(self.tenant), "tenant": self.tenant}
        )
        if document is None:
            await self.entries.update_one(
                {"_id": stats_id(self.tenant), "tenant": self.tenant},
                {
                    "$setOnInsert": {
                        "p": [{"t": STATS_TERM, "c": 0}],
                        "docs": 0,
                        "length": 0,
                        "epoch": 1,
                        "stem": None,
                        "kv": None,
                    }
                },
                upsert=True,
            )
            document = {"epoch": 1}
        state = IndexState.of(document)
        self._states[self.tenant] = state
        return state

    def forget_state(self) -> None:
        self._states.pop(self.tenant, None)

    # ------------------------------------------------------------------ catching up
    async def refresh(self) -> Codec:
        """Index every task changed since the watermark; return the tenant's codec."""
        state = await self.state()
        codec = await codec_for(self.tenant, self.cipher, state)
        if codec.key_version != state.key_version and (
            codec.key_version is not None or state.key_version is not None
        ):
            await self.reset(stemming=state.stemming, key_version=codec.key_version)
            state = await self.state(fresh=True)
        query: dict[str, Any] = {"tenant": self.tenant}
        if state.watermark is not None:
            query["updated_at"] = {"$gte": state.watermark - MARGIN}
        pipeline = [
            {"$match": query},
            {"$project": {"version": 1, "seq": 1, "owner": 1, "updated_at": 1}},
            {
                "$lookup": {
                    "from": SEARCH_TASKS,
                    "localField": "_id",
                    "foreignField": "_id",
                    "as": "s",
                }
            },
            {
                "$project": {
                    "version": 1,
                    "seq": 1,
                    "owner": 1,
                    "updated_at": 1,
                    "s": 1,
                    "same": {
                        "$size": {
                            "$filter": {
                                "input": "$s",
                                "as": "x",
                                "cond": {"$eq": ["$$x.v", "$version"]},
                            }
                        }
                    },
                }
            },
            {"$match": {"same": 0}},
        ]
        stale = await (await self.database[TASKS].aggregate(pipeline)).to_list(None)
        if not stale:
            return codec
        for row in stale:
            await self._index_task(row, codec)
        marks = [row["updated_at"] for row in stale if row.get("updated_at") is not None]
        if marks:
            high = max(marks)
            await self.entries.update_one(
                {"_id": stats_id(self.tenant), "tenant": self.tenant}, {"$max": {"wm": high}}
            )
            if state.watermark is None or high > state.watermark:
                self._states[self.tenant] = replace(state, watermark=high)
        return codec

    async def _index_task(self, row: dict[str, Any], codec: Codec) -> None:
        key = row["_id"]
        task_id = task_id_of(key)
        old = (row.get("s") or [None])[0]
        seq, version = int(row.get("seq") or 0), int(row.get("version") or 0)
        appended = (
            old is not None
            and seq >= int(old.get("s", 0))
            and version - int(old.get("v", 0)) <= seq - int(old.get("s", 0))
        )
        start = int(old["s"]) if appended and old is not None else 0
        try:
            messages = await self.tasks.read_range(task_id, start)
        except NotFound:
            await forget_task(self.database, self.tenant, task_id)
            return
        owner = row.get("owner")
        made = [
            entry_for(m, start + n, self.tenant, task_id, owner, codec)
            for n, m in enumerate(messages)
        ]
        entries = [e for e in made if e is not None]
        if not appended:
            await self.entries.delete_many({"tenant": self.tenant, "task": task_id})
        if entries:
            try:
                await self.entries.insert_many(entries, ordered=False)
            except BulkWriteError as error:  # another search indexed them first: same ids
                if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
                    raise
        kept_d = int(old.get("d", 0)) if appended and old is not None else 0
        kept_l = int(old.get("l", 0)) if appended and old is not None else 0
        total_d = kept_d + len(entries)
        total_l = kept_l + sum(e["n"] for e in entries)
        mark = {
            "v": version,
            "s": start + len(messages),
            "d": total_d,
            "l": total_l,
            "u": row.get("updated_at"),
        }
        guard: dict[str, Any] = {"_id": key, "tenant": self.tenant}
        try:
            if old is None:
                await self.task_marks.insert_one({**guard, **mark})
            else:
                done = await self.task_marks.update_one(
                    {**guard, "v": old.get("v")}, {"$set": mark}
                )
                if done.matched_count == 0:
                    return  # another search recorded it: it counted the statistics
        except DuplicateKeyError:
            return
        before_d = int(old.get("d", 0)) if old is not None else 0
        before_l = int(old.get("l", 0)) if old is not None else 0
        await self.entries.update_one(
            {"_id": stats_id(self.tenant), "tenant": self.tenant},
            {"$inc": {"docs": total_d - before_d, "length": total_l - before_l}},
        )

    # ------------------------------------------------------------------ asking
    async def lookup(self, stored_terms: Sequence[str]) -> list[dict[str, Any]]:
        """Every entry holding one of `stored_terms`, with only those postings, and the
        statistics document: one aggregate."""
        wanted = [*dict.fromkeys(stored_terms), STATS_TERM]
        pipeline = [
            {"$match": {"tenant": self.tenant, "p.t": {"$in": wanted}}},
            {
                "$project": {
                    "task": 1,
                    "i": 1,
                    "m": 1,
                    "r": 1,
                    "o": 1,
                    "ts": 1,
                    "n": 1,
                    "docs": 1,
                    "length": 1,
                    "epoch": 1,
                    "stem": 1,
                    "kv": 1,
                    "wm": 1,
                    "p": {
                        "$filter": {
                            "input": "$p",
                            "as": "e",
                            "cond": {"$in": ["$$e.t", {"$literal": wanted}]},
                        }
                    },
                }
            },
        ]
        return list(await (await self.entries.aggregate(pipeline)).to_list(None))

    async def texts(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored texts of entries, by `_id`."""
        if not ids:
            return {}
        found = self.entries.find(
            {"tenant": self.tenant, "_id": {"$in": list(ids)}}, {"x": 1, "task": 1, "m": 1}
        )
        return {d["_id"]: d async for d in found}

    # ------------------------------------------------------------------ operators
    async def reset(self, *, stemming: str | None, key_version: int | None = None) -> None:
        """Drop the tenant's index; the next search rebuilds it (a new epoch)."""
        state = await self.state(fresh=True)
        await forget_tenant(self.database, self.tenant)
        await self.entries.update_one(
            {"_id": stats_id(self.tenant), "tenant": self.tenant},
            {
                "$set": {
                    "p": [{"t": STATS_TERM, "c": 0}],
                    "docs": 0,
                    "length": 0,
                    "epoch": state.epoch + 1,
                    "stem": stemming,
                    "kv": key_version,
                },
                "$unset": {"wm": ""},
            },
            upsert=True,
        )
        self.forget_state()


async def forget_task(database: Any, tenant: str, task_id: str) -> None:
    """Remove a deleted task from the tenant's index (its entries, its mark, its counts)."""
    key = task_key(tenant, task_id)
    entries, marks = database[SEARCH_ENTRIES], database[SEARCH_TASKS]
    mark = await marks.find_one({"_id": key, "tenant": tenant})
    await entries.delete_many({"tenant": tenant, "task": task_id})
    if mark is None:
        return
    done = await marks.delete_one({"_id": key, "tenant": tenant})
    if done.deleted_count:
        await entries.update_one(
            {"_id": stats_id(tenant), "tenant": tenant},
            {"$inc": {"docs": -int(mark.get("d", 0)), "length": -int(mark.get("l", 0))}},
        )


async def forget_message(database: Any, tenant: str, task_id: str, message_id: str) -> None:
    """Remove one (redacted) message from the index at once, before any search runs."""
    entries, marks = database[SEARCH_ENTRIES], database[SEARCH_TASKS]
    found = await entries.find(
        {"tenant": tenant, "task": task_id, "m": message_id}, {"n": 1}
    ).to_list(None)
    for entry in found:
        done = await entries.delete_one({"_id": entry["_id"], "tenant": tenant})
        if not done.deleted_count:
            continue
        n = int(entry.get("n", 0))
        await marks.update_one(
            {"_id": task_key(tenant, task_id), "tenant": tenant}, {"$inc": {"d": -1, "l": -n}}
        )
        await entries.update_one(
            {"_id": stats_id(tenant), "tenant": tenant}, {"$inc": {"docs": -1, "length": -n}}
        )


async def forget_tenant(database: Any, tenant: str) -> None:
    """Remove everything the index holds for `tenant` (erase, shred, rebuild)."""
    await database[SEARCH_ENTRIES].delete_many({"tenant": tenant})
    await database[SEARCH_TASKS].delete_many({"tenant": tenant})


async def reset_tenant(database: Any, tenant: str) -> None:
    """Make the next search of `tenant` look at every task again (after a restore wrote
    tasks older than its watermark): the watermark is cleared and the epoch moves on, so
    stores that hold the old state notice at their next lookup."""
    await database[SEARCH_ENTRIES].update_one(
        {"_id": stats_id(tenant), "tenant": tenant},
        {"$unset": {"wm": ""}, "$inc": {"epoch": 1}},
    )
