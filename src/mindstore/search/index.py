"""The search index's I/O: brought up to date by the search itself, then asked once.

Writes stay as they are: an append writes nothing for search. Each search first asks
which of the tenant's tasks changed since the index last saw them (one aggregate on
`tasks`: those updated since the tenant's watermark, less a margin for writers' clock
skew, whose version differs from the one `search_tasks` recorded, joined by `$lookup`),
indexes what changed (a pure append: only the new messages; any other change: the whole
task again), then reads the postings of its terms (an `_id` lookup on `search_postings`,
which returns the tenant's statistics too). When nothing changed, that lookup rides on
the change check itself (a `$lookup` from the row of one known task). So a message is
found by every search that starts after its append returned, from any store on the
database, and a search that finds nothing new costs one round trip, plus one for the
snippets of the page it returns. Every write names its documents by `_id`. docs/search.md.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pymongo import UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS, TASKS
from mindstore.crypto.aead import open_value, seal_value
from mindstore.errors import ConfigurationError, NotFound
from mindstore.ids import task_id_of, task_key
from mindstore.model.plans.redaction import redaction_of

from .blind import Blinder, derive_search_key
from .query import tool_term
from .text import searchable
from .tokenize import TOKENIZER_VERSION, Stemmer, stemmer_for, terms

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher
    from mindstore.model.messages import AnyMessage

__all__ = [
    "MARGIN",
    "PARTITIONS",
    "Codec",
    "IndexState",
    "SearchStore",
    "entry_for",
    "forget_message",
    "forget_task",
    "forget_tenant",
    "partition",
    "postings_id",
    "reset_tenant",
    "stats_id",
]

PARTITIONS = 8
"""Postings documents per term: a term's postings are split by task so that no document
grows past a few MB before a tenant holds millions of messages, and an indexing write
touches a small document. (Beanie's documents are not imported here: `import mindstore`
does not load Beanie.)"""

MARGIN = timedelta(seconds=120)
"""How far before the watermark a search looks for changed tasks: the clock skew between
writers it tolerates (a task's `updated_at` is its writer's clock)."""


def stats_id(tenant: str) -> str:
    """The `_id` of a tenant's statistics document (no postings `_id` ends in ``/``)."""
    return f"{tenant}/"


def partition(task_id: str) -> int:
    """The postings partition of a task's messages (stable across processes)."""
    digest = hashlib.blake2b(task_id.encode("utf-8", "surrogatepass"), digest_size=4)
    return int.from_bytes(digest.digest(), "big") % PARTITIONS


def postings_id(tenant: str, term: str, part: int) -> str:
    """The `_id` of partition `part` of `term`'s postings."""
    return f"{tenant}/{term}/{part}"


@dataclass(frozen=True)
class IndexState:
    """A tenant's index, as the statistics document holds it."""

    watermark: datetime | None = None
    epoch: int = 0
    stemming: str | None = None
    key_version: int | None = None
    documents: int = 0
    length: int = 0
    carrier: str | None = None
    """The key of one of the tenant's tasks (the last a catch-up indexed): the change
    check always returns its row, which carries the postings lookup (`SearchStore.refresh`)."""
    tokenizer: int = TOKENIZER_VERSION
    """The `TOKENIZER_VERSION` the index was built with (1: built before it was recorded)."""

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
            carrier=document.get("wt"),
            tokenizer=int(document.get("tv") or 1),
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


@dataclass
class _Batch:
    """The writes of one catch-up, gathered across its tasks."""

    documents: list[dict[str, Any]] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    pulls: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    pushes: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    """(term, partition) -> groups ``{t: task, o: owner, p: "posting;posting"}``."""
    terms: list[UpdateOne] = field(default_factory=list)
    """Each indexed task's terms document: what a later re-index or delete pulls."""
    docs: int = 0
    length: int = 0


def terms_id(key: str) -> str:
    """The `_id` of a task's terms document in `search_tasks` (beside its mark, `key`: a
    `$lookup` of marks by task key never copies the terms)."""
    return f"{key}~terms"


async def task_terms(database: Any, tenant: str, key: str) -> list[str]:
    """The terms a task's postings were written under."""
    found = await database[SEARCH_TASKS].find_one({"_id": terms_id(key), "tenant": tenant})
    return list((found or {}).get("k") or [])


async def _bulk(collection: Any, requests: list[UpdateOne]) -> None:
    for chunk in range(0, len(requests), 1000):
        await collection.bulk_write(requests[chunk : chunk + 1000], ordered=False)


@dataclass
class Entry:
    """One message as the index holds it: its entry document and its postings."""

    document: dict[str, Any]
    postings: dict[str, str]
    """Term -> its packed posting (`pack`)."""
    owner: str | None = None


def entry_for(
    message: AnyMessage, index: int, tenant: str, task_id: str, owner: str | None, codec: Codec
) -> Entry | None:
    """The index entry of one message (None: nothing of it is searchable, or redacted)."""
    if redaction_of(message) is not None:
        return None
    found = searchable(message)
    words = terms(found.text, codec.stem)
    counts = Counter(codec.term(w) for w in words)
    for tool in found.tools:
        counts[codec.term(tool_term(tool))] += 0  # a filter, not a scored word
    if not counts:
        return None
    message_id = str(getattr(message, "id", ""))
    role = str(getattr(message, "role", "unknown"))
    ts = float(getattr(message, "started_ts", 0) or 0)
    length = len(words)
    document = {
        "_id": f"{task_key(tenant, task_id)}/{index}",
        "tenant": tenant,
        "task": task_id,
        "i": index,
        "m": message_id,
        "o": owner,
        "n": length,
        "x": codec.seal(found.text, task_id, message_id),
    }
    postings = {term: pack(index, count, length, role, ts) for term, count in counts.items()}
    return Entry(document, postings)


ROLE_CODES = {
    "system": "s", "user": "u", "assistant": "a", "tool": "t", "informational": "i",
    "compression": "c", "taskconfig": "g", "taskentry": "e", "taskexit": "x",
}  # fmt: skip
"""A known role is stored as one letter; another (an unknown message's) as it is."""
ROLES_BY_CODE = {code: role for role, code in ROLE_CODES.items()}
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36_slow(number: int) -> str:
    if number <= 0:
        return "0" if number == 0 else "-" + _base36_slow(-number)
    out = []
    while number:
        number, digit = divmod(number, 36)
        out.append(_DIGITS[digit])
    return "".join(reversed(out))


_SMALL = [_base36_slow(n) for n in range(36 * 36)]
"""Indexes, counts and lengths are mostly below 1,296: their digits are looked up."""


def _base36(number: int) -> str:
    return _SMALL[number] if 0 <= number < 1296 else _base36_slow(number)


def pack(index: int, count: int, length: int, role: str, ts: float) -> str:
    """One posting as stored: ``index,count,length,role,time`` (a string, so a postings
    document is a few values per task, not a sub-document per message): numbers in base
    36, the role as one letter, the time in milliseconds."""
    code = ROLE_CODES.get(role, role.replace(",", "_").replace(";", "_"))
    millis = round(ts * 1000)
    return f"{_base36(index)},{_base36(count)},{_base36(length)},{code},{_base36(millis)}"


@dataclass(frozen=True)
class Posting:
    """One message holding a term: where, how often, how long, whose, when."""

    task: str
    owner: str | None
    index: int
    count: int
    length: int
    role: str
    ts: float


def unpack(group: dict[str, Any]) -> list[Posting]:
    """The postings of one task's group in a postings document (``{t, o, p}``)."""
    task, owner = str(group.get("t")), group.get("o")
    out = []
    for item in str(group.get("p") or "").split(";"):
        if not item:
            continue
        index, count, length, code, millis = item.split(",", 4)
        out.append(Posting(task, owner, int(index, 36), int(count, 36), int(length, 36),
                           ROLES_BY_CODE.get(code, code), int(millis, 36) / 1000))  # fmt: skip
    return out


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
        self.postings = database[SEARCH_POSTINGS]
        self.task_marks = database[SEARCH_TASKS]

    def _stats(self) -> dict[str, str]:
        return {"_id": stats_id(self.tenant), "tenant": self.tenant}

    # ------------------------------------------------------------------ state
    async def state(self, *, fresh: bool = False) -> IndexState:
        """The tenant's index state (this process's copy unless `fresh`)."""
        held = self._states.get(self.tenant)
        if held is not None and not fresh:
            return held
        document = await self.postings.find_one(self._stats())
        if document is None:
            await self.postings.update_one(
                self._stats(),
                {"$setOnInsert": {"docs": 0, "length": 0, "epoch": 1, "stem": None, "kv": None,
                                  "tv": TOKENIZER_VERSION}},
                upsert=True,
            )  # fmt: skip
            document = {"epoch": 1, "tv": TOKENIZER_VERSION}
        state = IndexState.of(document)
        self._states[self.tenant] = state
        return state

    def forget_state(self) -> None:
        self._states.pop(self.tenant, None)

    # ------------------------------------------------------------------ catching up
    async def refresh(
        self, wanted: Callable[[Codec], Sequence[str]] | None = None
    ) -> tuple[Codec, list[dict[str, Any]] | None]:
        """Index every task changed since the watermark; return the tenant's codec and, when
        the change check could answer it, the postings documents of `wanted(codec)`'s terms
        (with the statistics document), else None (then ask `lookup`).

        The postings ride on the change check: its pipeline always returns the row of one
        known task (the carrier), whose `$lookup` reads the postings by `_id`, so a search
        that finds nothing new reads its postings in the same round trip. When something
        changed, the postings are read after the indexing (None here)."""
        state = await self.state()
        if state.tokenizer > TOKENIZER_VERSION:  # a newer mindstore's: never mix terms
            raise ConfigurationError(
                f"search: the index of {self.tenant} was built by a newer mindstore "
                f"(tokenizer {state.tokenizer}, this one {TOKENIZER_VERSION}): upgrade"
            )
        codec = await codec_for(self.tenant, self.cipher, state)
        if codec.key_version != state.key_version or state.tokenizer != TOKENIZER_VERSION:
            await self.reset(stemming=state.stemming, key_version=codec.key_version)
            state = await self.state(fresh=True)
        carrier = state.carrier if wanted is not None else None
        # the time bound is a second `$match` after the projection: a server moves it up
        # and merges the two (one `tenant_updated` scan); the embedded backend runs the
        # first `$match` and its projection as a find, copying only the projected fields
        recent: list[dict[str, Any]] = []
        if state.watermark is not None:
            since: dict[str, Any] = {"updated_at": {"$gte": state.watermark - MARGIN}}
            if carrier is not None:
                since = {"$or": [since, {"_id": carrier}]}
            recent = [{"$match": since}]
        same = {
            "$size": {"$filter": {"input": "$s", "as": "x", "cond": {"$eq": ["$$x.v", "$version"]}}}
        }
        shown: dict[str, Any] = {
            "version": 1, "seq": 1, "owner": 1, "updated_at": 1, "s": 1, "same": same
        }  # fmt: skip
        keep: dict[str, Any] = {"same": 0}
        ride: list[dict[str, Any]] = []
        if carrier is not None and wanted is not None:
            ids = self.lookup_ids(wanted(codec))
            is_carrier = {"$eq": ["$_id", {"$literal": carrier}]}
            # only the carrier's row looks postings up; "" names no postings document
            shown["k"] = {"$cond": [is_carrier, {"$literal": ids}, {"$literal": [""]}]}
            keep = {"$or": [keep, {"_id": carrier}]}
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
        rows = await (await self.database[TASKS].aggregate(pipeline)).to_list(None)
        stale = list({r["_id"]: r for r in rows if r.get("same") == 0}.values())
        if not stale:
            if carrier is None or not any(r["_id"] == carrier for r in rows):
                return codec, None
            return codec, [r["p"] for r in rows if r["_id"] == carrier and "p" in r]
        batch = _Batch()
        for row in stale:
            await self._index_task(row, codec, batch)
        await self._apply(batch)
        marked = [row for row in stale if row.get("updated_at") is not None]
        if marked:
            last = max(marked, key=lambda row: row["updated_at"])
            high = last["updated_at"]
            await self.postings.update_one(
                self._stats(), {"$max": {"wm": high}, "$set": {"wt": last["_id"]}}
            )
            watermark = high if state.watermark is None else max(high, state.watermark)
            self._states[self.tenant] = replace(state, watermark=watermark, carrier=last["_id"])
        return codec, None

    async def _index_task(self, row: dict[str, Any], codec: Codec, batch: _Batch) -> None:
        """Read what changed of one task, claim it, and add its writes to `batch`."""
        key = row["_id"]
        task_id = task_id_of(key)
        old: dict[str, Any] | None = (row.get("s") or [None])[0]
        seq, version = int(row.get("seq") or 0), int(row.get("version") or 0)
        old_s = int(old.get("s", 0)) if old else 0
        appended = (
            old is not None and seq >= old_s and version - int(old.get("v", 0)) <= seq - old_s
        )
        start = old_s if appended else 0
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
        old_terms: list[str] = []
        if old is not None and not appended:
            old_terms = await task_terms(self.database, self.tenant, key)
        new_terms = sorted({term for e in entries for term in e.postings})
        kept_d = int(old.get("d", 0)) if appended and old else 0
        kept_l = int(old.get("l", 0)) if appended and old else 0
        total_d = kept_d + len(entries)
        total_l = kept_l + sum(e.document["n"] for e in entries)
        mark = {
            "v": version,
            "s": start + len(messages),
            "d": total_d,
            "l": total_l,
            "u": row.get("updated_at"),
        }
        # claim the work first: of two searches indexing one change, one writes postings
        guard: dict[str, Any] = {"_id": key, "tenant": self.tenant}
        try:
            if old is None:
                await self.task_marks.insert_one({**guard, **mark})
            else:
                done = await self.task_marks.update_one(
                    {**guard, "v": old.get("v")}, {"$set": mark}
                )
                if done.matched_count == 0:
                    return
        except DuplicateKeyError:
            return
        if not appended and old is not None:
            part = partition(task_id)
            for term in old_terms:
                batch.pulls.setdefault((term, part), []).append(task_id)
            batch.gone += [f"{key}/{i}" for i in range(old_s)]
        part = partition(task_id)
        grouped: dict[str, list[str]] = {}
        for entry in entries:
            batch.documents.append(entry.document)
            for term, posting in entry.postings.items():
                grouped.setdefault(term, []).append(posting)
        for term, packed in grouped.items():
            group = {"t": task_id, "o": owner, "p": ";".join(packed)}
            batch.pushes.setdefault((term, part), []).append(group)
        terms = (
            {"$addToSet": {"k": {"$each": new_terms}}} if appended else {"$set": {"k": new_terms}}
        )
        batch.terms.append(
            UpdateOne({"_id": terms_id(key), "tenant": self.tenant}, terms, upsert=True)
        )
        batch.docs += total_d - (int(old.get("d", 0)) if old else 0)
        batch.length += total_l - (int(old.get("l", 0)) if old else 0)

    async def _apply(self, batch: _Batch) -> None:
        """The writes of one catch-up, grouped: each postings document is written at most
        twice (a pull, then a push), whatever the number of tasks."""
        tenant = self.tenant
        pulls = [
            UpdateOne(
                {"_id": postings_id(tenant, term, part), "tenant": tenant},
                {"$pull": {"e": {"t": {"$in": tasks}}}},
            )
            for (term, part), tasks in batch.pulls.items()
        ]
        await _bulk(self.postings, pulls)
        for chunk in range(0, len(batch.gone), 1000):
            await self.entries.delete_many(
                {"tenant": tenant, "_id": {"$in": batch.gone[chunk : chunk + 1000]}}
            )
        for chunk in range(0, len(batch.documents), 1000):
            await self._insert(batch.documents[chunk : chunk + 1000])
        await _bulk(self.task_marks, batch.terms)
        pushes = [
            UpdateOne(
                {"_id": postings_id(tenant, term, part), "tenant": tenant},
                {"$push": {"e": {"$each": postings}}},
                upsert=True,
            )
            for (term, part), postings in batch.pushes.items()
        ]
        await _bulk(self.postings, pushes)
        if batch.docs or batch.length:
            await self.postings.update_one(
                self._stats(), {"$inc": {"docs": batch.docs, "length": batch.length}}
            )

    async def _insert(self, documents: list[dict[str, Any]]) -> None:
        try:
            await self.entries.insert_many(documents, ordered=False)
        except BulkWriteError as error:  # left by an indexing cut short: the same ids
            if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
                raise

    # ------------------------------------------------------------------ asking
    def lookup_ids(self, stored_terms: Sequence[str]) -> list[str]:
        """The `_id`s of every postings document of `stored_terms` and of the statistics
        document."""
        wanted = [
            postings_id(self.tenant, term, part)
            for term in dict.fromkeys(stored_terms)
            for part in range(PARTITIONS)
        ]
        return [*wanted, stats_id(self.tenant)]

    async def lookup(self, stored_terms: Sequence[str]) -> list[dict[str, Any]]:
        """Every postings document of `stored_terms` and the statistics document: one
        `_id` lookup."""
        found = self.postings.find(
            {"tenant": self.tenant, "_id": {"$in": self.lookup_ids(stored_terms)}}
        )
        return [document async for document in found]

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
        await self.postings.update_one(
            self._stats(),
            {
                "$set": {
                    "docs": 0,
                    "length": 0,
                    "epoch": state.epoch + 1,
                    "stem": stemming,
                    "kv": key_version,
                    "tv": TOKENIZER_VERSION,
                },
                "$unset": {"wm": ""},
            },
            upsert=True,
        )
        self.forget_state()


async def pull_postings(database: Any, tenant: str, task_id: str, terms: Iterable[str]) -> None:
    """Pull a task's postings from the documents of `terms`."""
    condition: dict[str, Any] = {"t": task_id}
    part = partition(task_id)
    requests = [
        UpdateOne(
            {"_id": postings_id(tenant, term, part), "tenant": tenant}, {"$pull": {"e": condition}}
        )
        for term in terms
    ]
    await _bulk(database[SEARCH_POSTINGS], requests)


def _stats_filter(tenant: str) -> dict[str, str]:
    return {"_id": stats_id(tenant), "tenant": tenant}


async def forget_task(database: Any, tenant: str, task_id: str) -> None:
    """Remove a deleted task from the tenant's index (postings, entries, mark, counts)."""
    key = task_key(tenant, task_id)
    marks = database[SEARCH_TASKS]
    mark = await marks.find_one({"_id": key, "tenant": tenant})
    if mark is None:
        return
    done = await marks.delete_one({"_id": key, "tenant": tenant})
    if not done.deleted_count:
        return
    await pull_postings(database, tenant, task_id, await task_terms(database, tenant, key))
    await marks.delete_one({"_id": terms_id(key), "tenant": tenant})
    gone = [f"{key}/{i}" for i in range(int(mark.get("s", 0)))]
    for chunk in range(0, len(gone), 1000):
        await database[SEARCH_ENTRIES].delete_many(
            {"tenant": tenant, "_id": {"$in": gone[chunk : chunk + 1000]}}
        )
    await database[SEARCH_POSTINGS].update_one(
        _stats_filter(tenant),
        {"$inc": {"docs": -int(mark.get("d", 0)), "length": -int(mark.get("l", 0))}},
    )


async def forget_message(database: Any, tenant: str, task_id: str, message_id: str) -> None:
    """Remove one (redacted) message from the index at once, before any search runs: its
    entry (its text) goes, and its task's postings are pulled and its mark cleared, so the
    next search indexes the task again (without the message)."""
    entries, marks = database[SEARCH_ENTRIES], database[SEARCH_TASKS]
    found = await entries.find(
        {"tenant": tenant, "task": task_id, "m": message_id}, {"_id": 1}
    ).to_list(None)
    if not found:
        return
    for entry in found:
        await entries.delete_one({"_id": entry["_id"], "tenant": tenant})
    key = task_key(tenant, task_id)
    mark = await marks.find_one({"_id": key, "tenant": tenant})
    if mark is not None:
        await pull_postings(database, tenant, task_id, await task_terms(database, tenant, key))
        await marks.update_one({"_id": key, "tenant": tenant}, {"$set": {"v": -1}})


async def forget_tenant(database: Any, tenant: str) -> None:
    """Remove everything the index holds for `tenant` (erase, shred, rebuild)."""
    for name in (SEARCH_POSTINGS, SEARCH_ENTRIES, SEARCH_TASKS):
        await database[name].delete_many({"tenant": tenant})


async def reset_tenant(database: Any, tenant: str) -> None:
    """Make the next search of `tenant` look at every task again (after a restore wrote
    tasks older than its watermark): the watermark is cleared and the epoch moves on, so
    stores that hold the old state notice at their next lookup."""
    await database[SEARCH_POSTINGS].update_one(
        _stats_filter(tenant), {"$unset": {"wm": ""}, "$inc": {"epoch": 1}}
    )
