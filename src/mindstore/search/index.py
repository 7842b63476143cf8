"""The search index's I/O: brought up to date by the search itself, then asked once.

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
import hashlib
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pymongo import DeleteMany, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from mindstore.clock import utcnow
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
    "FORMAT",
    "LEASE",
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

FORMAT = 2
"""The stored form of postings (2: times in microseconds, word positions). A tenant's
index of another form is dropped and rebuilt by its next search."""

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

_WAIT_FIRST, _WAIT_MOST = 0.002, 0.2
"""Seconds between two asks while another search holds a claim (doubling)."""


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
    format: int = 0
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
            format=int(document.get("f") or 0),
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
    seal_places: Callable[[str, str, str], Any] | None = None
    """(positions, task id, stored term) -> their sealed form; None: kept in clear. Under a
    keyring a posting's positions would show the order of the tokens in a message, so
    each group's positions are sealed apart (opened only for a phrase)."""
    open_places: Callable[[Any, str, str], str] | None = None


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
    current = await cipher.current()  # a search never makes a tenant's first key
    if current is None:  # not encrypted: its messages are in the clear, and so is its index
        return _plain_codec(stem)
    version, data_key = current
    keys = cipher.keys()
    blind = Blinder(derive_search_key(data_key, tenant))

    def seal(text: str, task_id: str, message_id: str) -> Any:
        return seal_value(text, data_key, version, (tenant, task_id, message_id, "search.x"))

    def opened(value: Any, task_id: str, message_id: str) -> str:
        return str(open_value(value, keys.key, (tenant, task_id, message_id, "search.x")))

    def seal_places(places: str, task_id: str, term: str) -> Any:
        return seal_value(places, data_key, version, (tenant, task_id, term, "search.p"))

    def open_places(value: Any, task_id: str, term: str) -> str:
        return str(open_value(value, keys.key, (tenant, task_id, term, "search.p")))

    return Codec(blind, seal, opened, stem, version, seal_places, open_places)


@dataclass(frozen=True)
class _Claim:
    """One task this search claimed: what it wrote, to release the claim or take it back."""

    key: str
    task_id: str
    token: str
    version: int
    terms: tuple[str, ...]
    entries: tuple[str, ...]


@dataclass
class _Batch:
    """The writes of one catch-up round, gathered across its tasks."""

    documents: list[dict[str, Any]] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    """Entries of tasks indexed whole again: deleted before the new ones go in."""
    pulls: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    pushes: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    """(term, partition) -> groups ``{t: task, o: owner, p: "posting;posting"}``."""
    terms: list[UpdateOne] = field(default_factory=list)
    """Each indexed task's terms document: what a later re-index or delete pulls."""
    claims: list[_Claim] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
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


def _drop_emptied(tenant: str, ids: Iterable[str]) -> DeleteMany:
    """Delete the postings documents among `ids` that a pull left empty: an erased word
    leaves nothing behind, not even its name in an `_id`. (A push racing it upserts the
    document again; one it reaches first is not empty, so not deleted.)"""
    return DeleteMany({"tenant": tenant, "_id": {"$in": sorted(set(ids))}, "e": {"$size": 0}})


async def pull_postings(database: Any, tenant: str, task_id: str, terms: Iterable[str]) -> None:
    """Pull a task's postings from the documents of `terms`, and delete those left empty."""
    part = partition(task_id)
    ids = [postings_id(tenant, term, part) for term in dict.fromkeys(terms)]
    for chunk in range(0, len(ids), 1000):
        some = ids[chunk : chunk + 1000]
        requests: list[Any] = [
            UpdateOne({"_id": i, "tenant": tenant}, {"$pull": {"e": {"t": task_id}}}) for i in some
        ]
        await database[SEARCH_POSTINGS].bulk_write([*requests, _drop_emptied(tenant, some)])


@dataclass
class Entry:
    """One message as the index holds it: its entry document and its postings."""

    document: dict[str, Any]
    postings: dict[str, str]
    """Term -> its packed posting (`pack`)."""
    owner: str | None = None


def micros(ts: float) -> int:
    """A message's time in whole microseconds (what its hit's `time` shows, and what
    `since` and `until`, datetimes, are compared with)."""
    return round(float(ts) * 1_000_000)


def entry_for(
    message: AnyMessage, index: int, tenant: str, task_id: str, owner: str | None, codec: Codec
) -> Entry | None:
    """The index entry of one message (None: nothing of it is searchable, or redacted)."""
    if redaction_of(message) is not None:
        return None
    found = searchable(message)
    words = terms(found.text, codec.stem)
    places: dict[str, list[int]] = {}
    for at, word in enumerate(words):
        places.setdefault(codec.term(word), []).append(at)
    for tool in found.tools:
        places.setdefault(codec.term(tool_term(tool)), [])  # a filter, not a scored word
    if not places:
        return None
    message_id = str(getattr(message, "id", ""))
    role = str(getattr(message, "role", "unknown"))
    time = micros(getattr(message, "started_ts", 0) or 0)
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
    postings = {term: pack(index, length, role, time, at) for term, at in places.items()}
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
"""Indexes, counts, lengths and positions are mostly below 1,296: their digits are looked up."""


def _base36(number: int) -> str:
    return _SMALL[number] if 0 <= number < 1296 else _base36_slow(number)


def pack(index: int, length: int, role: str, time: int, positions: Sequence[int]) -> str:
    """One posting as stored: ``index,length,role,time,positions`` (a string, so a postings
    document is a few values per task, not a sub-document per message): numbers in base
    36, the role as one letter, the time in microseconds, the term's positions among the
    message's words as gaps joined by ``.`` (their count is the term's frequency; none: a
    tool name, a filter). A phrase is checked on the positions, never on the text."""
    code = ROLE_CODES.get(role, role.replace(",", "_").replace(";", "_"))
    gaps = ".".join(_base36(b - a) for a, b in zip((0, *positions), positions, strict=False))
    return f"{_base36(index)},{_base36(length)},{code},{_base36(time)},{gaps}"


@dataclass(frozen=True)
class Posting:
    """One message holding a term: where, how often (at which of its words), how long,
    whose, when."""

    task: str
    owner: str | None
    index: int
    count: int
    length: int
    role: str
    ts: float
    """Epoch seconds, exact to the microsecond."""
    positions: tuple[int, ...] = ()


def _group(task_id: str, owner: str | None, term: str, packed: list[str], codec: Codec
           ) -> dict[str, Any]:  # fmt: skip
    """One task's group in the postings document of `term`: ``{t, o, p}``, and under a
    keyring the positions sealed apart (``x``), each posting keeping ``*<count>``."""
    if codec.seal_places is None:
        return {"t": task_id, "o": owner, "p": ";".join(packed)}
    heads, places = [], []
    for item in packed:
        head, gaps = item.rsplit(",", 1)
        heads.append(f"{head},*{_base36(gaps.count('.') + 1 if gaps else 0)}")
        places.append(gaps)
    sealed = codec.seal_places(";".join(places), task_id, term)
    return {"t": task_id, "o": owner, "p": ";".join(heads), "x": sealed}


def unpack(group: dict[str, Any], reveal: Callable[[Any, str], str] | None = None) -> list[Posting]:
    """The postings of one task's group in a postings document (``{t, o, p}``); sealed
    positions (``x``, under a keyring) are opened by `reveal(sealed, task)` when given,
    else left out (the counts stay)."""
    task, owner = str(group.get("t")), group.get("o")
    hidden: list[str] = []
    if "x" in group and reveal is not None:
        hidden = reveal(group["x"], task).split(";")
    out = []
    for n, item in enumerate(str(group.get("p") or "").split(";")):
        if not item:
            continue
        index, length, code, time, gaps = item.split(",", 4)
        count = None
        if gaps.startswith("*"):
            count = int(gaps[1:], 36)
            gaps = hidden[n] if n < len(hidden) else ""
        at, places = 0, []
        for gap in gaps.split(".") if gaps else ():
            at += int(gap, 36)
            places.append(at)
        out.append(Posting(task, owner, int(index, 36), len(places) if count is None else count,
                           int(length, 36), ROLES_BY_CODE.get(code, code),
                           int(time, 36) / 1_000_000, tuple(places)))  # fmt: skip
    return out


def _pulled(row: dict[str, Any]) -> bool:
    """Whether a change-check row's task had its postings pulled by a redaction (its mark
    reset to -1) and not indexed since: an answer without it would miss all its messages."""
    mark = (row.get("s") or [None])[0]
    return mark is not None and int(mark.get("v", 0)) == -1


def _current(row: dict[str, Any]) -> bool:
    """Whether a change-check row's task is indexed at its version, claim released."""
    return int(row.get("same") or 0) > 0


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
                                  "f": FORMAT, "tv": TOKENIZER_VERSION}},
                upsert=True,
            )  # fmt: skip
            document = {"epoch": 1, "f": FORMAT, "tv": TOKENIZER_VERSION}
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
        the last change check could answer it, the postings documents of `wanted(codec)`'s
        terms (with the statistics document), else None (then ask `lookup`).

        Rounds: ask what changed (tasks claimed by another search and not released count
        as changed), index what this search can claim, and ask again, until nothing is
        left; a claim held by another is waited for (then taken over once its `LEASE` ran
        out). The postings ride on the last ask: its pipeline always returns the row of
        one known task (the carrier), whose `$lookup` reads the postings by `_id`."""
        state = await self.state()
        if state.tokenizer > TOKENIZER_VERSION:  # a newer mindstore's: never mix terms
            raise ConfigurationError(
                f"search: the index of {self.tenant} was built by a newer mindstore "
                f"(tokenizer {state.tokenizer}, this one {TOKENIZER_VERSION}): upgrade"
            )
        codec = await codec_for(self.tenant, self.cipher, state)
        if (
            codec.key_version != state.key_version
            or state.format != FORMAT
            or state.tokenizer != TOKENIZER_VERSION
        ):
            await self.reset(stemming=state.stemming, key_version=codec.key_version)
            state = await self.state(fresh=True)
        mine: dict[str, str] = {}  # tasks this search indexed: key -> id (are they still there?)
        pause = _WAIT_FIRST
        worked = 0
        while True:
            state = self._states.get(self.tenant, state)
            rows = await self._changed(state, codec, wanted, list(mine))
            present = {row["_id"] for row in rows}
            vanished = [key for key in mine if key not in present]
            for key in vanished:  # deleted while this search indexed it
                await forget_task(self.database, self.tenant, mine.pop(key))
            stale = [row for row in {r["_id"]: r for r in rows}.values() if not _current(row)]
            if worked >= ROUNDS:  # answer from the index as it stands, but for pulled tasks
                stale = [row for row in stale if _pulled(row)] if worked < PULLED_ROUNDS else []
            if not stale:
                carrier = state.carrier if wanted is not None else None
                if vanished or carrier is None or carrier not in present:
                    return codec, None
                return codec, [r["p"] for r in rows if r["_id"] == carrier and "p" in r]
            batch, claimed, busy = _Batch(), 0, 0
            for at, row in enumerate(stale):
                busy += not await self._index_task(row, codec, batch)
                if batch.claims and (len(batch.claims) >= FLUSH or at == len(stale) - 1):
                    await self._apply(batch, self._states.get(self.tenant, state))
                    mine.update((claim.key, claim.task_id) for claim in batch.claims)
                    claimed += len(batch.claims)
                    batch = _Batch()
            if claimed or not busy:
                worked += 1
                pause = _WAIT_FIRST
            else:  # another search is indexing them: wait for it to release its claims
                await asyncio.sleep(pause)
                pause = min(pause * 2, _WAIT_MOST)

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
            ids = self.lookup_ids(wanted(codec))
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
        return list(await (await self.database[TASKS].aggregate(pipeline)).to_list(None))

    async def _index_task(self, row: dict[str, Any], codec: Codec, batch: _Batch) -> bool:
        """Read what changed of one task, claim it, and add its writes to `batch`; False:
        another search holds its claim (or took it first)."""
        key = row["_id"]
        task_id = task_id_of(key)
        old: dict[str, Any] | None = (row.get("s") or [None])[0]
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
            messages = await self.tasks.read_range(task_id, start, max(start, seq))
        except NotFound:
            await forget_task(self.database, self.tenant, task_id)
            return True
        owner = row.get("owner")
        made = [
            entry_for(m, start + n, self.tenant, task_id, owner, codec)
            for n, m in enumerate(messages)
        ]
        entries = [e for e in made if e is not None]
        new_terms = sorted({term for e in entries for term in e.postings})
        kept_d = int(old.get("d", 0)) if appended and old else 0
        kept_l = int(old.get("l", 0)) if appended and old else 0
        total_d = kept_d + len(entries)
        total_l = kept_l + sum(e.document["n"] for e in entries)
        token = secrets.token_hex(8)
        mark = {
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
                await self.task_marks.insert_one({**guard, **mark})
            else:
                done = await self.task_marks.update_one(
                    {**guard, "v": old.get("v"), "w": claimed_by}, {"$set": mark}
                )
                if done.matched_count == 0:
                    return False
        except DuplicateKeyError:
            return False
        part = partition(task_id)
        if not appended and old is not None:
            for term in await task_terms(self.database, self.tenant, key):
                batch.pulls.setdefault((term, part), []).append(task_id)
            batch.gone += [f"{key}/{i}" for i in range(old_s)]
        grouped: dict[str, list[str]] = {}
        for entry in entries:
            batch.documents.append(entry.document)
            for term, posting in entry.postings.items():
                grouped.setdefault(term, []).append(posting)
        for term, packed in grouped.items():
            batch.pushes.setdefault((term, part), []).append(
                _group(task_id, owner, term, packed, codec)
            )
        terms = (
            {"$addToSet": {"k": {"$each": new_terms}}} if appended else {"$set": {"k": new_terms}}
        )
        batch.terms.append(
            UpdateOne({"_id": terms_id(key), "tenant": self.tenant}, terms, upsert=True)
        )
        ids = tuple(e.document["_id"] for e in entries)
        batch.claims.append(_Claim(key, task_id, token, version, tuple(new_terms), ids))
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
                    {"$pull": {"e": {"t": {"$in": tasks}}}},
                )
                for (term, part), tasks in batch.pulls.items()
            ]
            await _bulk(self.postings, [*pulls, _drop_emptied(tenant, pulled)], ordered=True)
        await _delete_entries(self.database, tenant, batch.gone)
        for chunk in range(0, len(batch.documents), 1000):
            await self._insert(batch.documents[chunk : chunk + 1000])
        writes: list[Any] = [
            UpdateOne(
                {"_id": postings_id(tenant, term, part), "tenant": tenant},
                {"$push": {"e": {"$each": postings}}},
                upsert=True,
            )
            for (term, part), postings in batch.pushes.items()
        ]
        stats: dict[str, Any] = {}
        if batch.docs or batch.length:
            stats["$inc"] = {"docs": batch.docs, "length": batch.length}
        marked = [row for row in batch.rows if row.get("updated_at") is not None]
        if marked:
            last = max(marked, key=lambda row: row["updated_at"])
            stats["$max"] = {"wm": last["updated_at"]}
            stats["$set"] = {"wt": last["_id"]}
            held = state.watermark
            watermark = last["updated_at"] if held is None else max(last["updated_at"], held)
            self._states[tenant] = replace(state, watermark=watermark, carrier=last["_id"])
        if stats:
            writes.append(UpdateOne(self._stats(), stats))
        await _bulk(self.postings, writes)
        # the terms first, then the release: whoever claims the task next pulls them
        releases = [
            UpdateOne(
                {"_id": c.key, "tenant": tenant, "v": c.version, "w": c.token},
                {"$set": {"w": ""}},
            )
            for c in batch.claims
        ]
        result = await _bulk(self.task_marks, [*batch.terms, *releases], ordered=True)
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
            async for m in self.task_marks.find({"tenant": self.tenant, "_id": {"$in": keys}})
        }
        for claim in claims:
            mark = marks.get(claim.key)
            if mark is not None and int(mark.get("v", 0)) >= claim.version:
                continue
            await pull_postings(self.database, self.tenant, claim.task_id, claim.terms)
            await _delete_entries(self.database, self.tenant, claim.entries)
            terms = {"_id": terms_id(claim.key), "tenant": self.tenant}
            if mark is None:
                await self.task_marks.delete_one(terms)
                continue
            await self.task_marks.update_one(terms, {"$set": {"k": []}})
            await self.task_marks.update_one(
                {"_id": claim.key, "tenant": self.tenant, "w": claim.token}, {"$set": {"w": ""}}
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
                    "f": FORMAT,
                    "tv": TOKENIZER_VERSION,
                },
                "$unset": {"wm": ""},
            },
            upsert=True,
        )
        self.forget_state()


def _expired(mark: dict[str, Any]) -> bool:
    """Whether a claim is older than `LEASE` (its claimer is taken to have died)."""
    at = mark.get("wa")
    if not isinstance(at, datetime):
        return True
    now = utcnow()
    if at.tzinfo is None and now.tzinfo is not None:
        at = at.replace(tzinfo=now.tzinfo)
    return now - at > LEASE


async def _entry_ids(database: Any, query: dict[str, Any]) -> list[str]:
    found = database[SEARCH_ENTRIES].find(query, {"_id": 1})
    return [str(document["_id"]) async for document in found]


async def _delete_entries(database: Any, tenant: str, ids: Sequence[str]) -> None:
    """Delete entries by `_id` (in chunks: every write names its documents)."""
    for chunk in range(0, len(ids), 1000):
        await database[SEARCH_ENTRIES].delete_many(
            {"tenant": tenant, "_id": {"$in": list(ids[chunk : chunk + 1000])}}
        )


def _stats_filter(tenant: str) -> dict[str, str]:
    return {"_id": stats_id(tenant), "tenant": tenant}


async def forget_task(database: Any, tenant: str, task_id: str) -> None:
    """Remove a deleted task from the tenant's index (postings, entries, mark, counts).

    Called after the task's document is gone. A search indexing the task meanwhile either
    finds its claim gone when it releases it, or the task gone when it asks again: either
    way it removes what it wrote (`SearchStore.refresh`)."""
    key = task_key(tenant, task_id)
    marks = database[SEARCH_TASKS]
    held = await marks.find({"tenant": tenant, "_id": {"$in": [key, terms_id(key)]}}).to_list(None)
    if not held:
        return
    mark = await marks.find_one_and_delete({"_id": key, "tenant": tenant})
    found = next((d for d in held if d["_id"] == terms_id(key)), None)
    if found is not None:
        await pull_postings(database, tenant, task_id, found.get("k") or [])
    if mark is not None:
        gone = [f"{key}/{i}" for i in range(int(mark.get("s", 0)))]
    else:  # another caller took the mark: the entries are found by task
        gone = await _entry_ids(database, {"tenant": tenant, "task": task_id})
    await _delete_entries(database, tenant, gone)
    await marks.delete_one({"_id": terms_id(key), "tenant": tenant})
    if mark is not None:
        await database[SEARCH_POSTINGS].update_one(
            _stats_filter(tenant),
            {"$inc": {"docs": -int(mark.get("d", 0)), "length": -int(mark.get("l", 0))}},
        )


async def forget_message(database: Any, tenant: str, task_id: str, message_id: str) -> None:
    """Remove one (redacted) message from the index at once, before any search runs.

    The task's mark is reset and claimed first, as a search claims a task it indexes: a
    search that claimed the task before takes back what it wrote (its release finds the
    mark reset), and one that comes while this runs waits for the claim instead of
    reading the task half pulled (`SearchStore.refresh`). Then the message's entry (its
    text) goes and every posting of its task is pulled (no word of it stays, not in an
    `_id`); the release leaves the mark reset, so the next search indexes the task again,
    without the message."""
    key = task_key(tenant, task_id)
    marks = database[SEARCH_TASKS]
    token = secrets.token_hex(8)
    claim = {"v": -1, "w": token, "wa": utcnow()}
    mark = await marks.find_one_and_update({"_id": key, "tenant": tenant}, {"$set": claim})
    if mark is None:  # never indexed; a search indexing it now asks again before it answers
        return
    gone = await _entry_ids(database, {"tenant": tenant, "task": task_id, "m": message_id})
    await _delete_entries(database, tenant, gone)
    await pull_postings(database, tenant, task_id, await task_terms(database, tenant, key))
    await marks.update_one({"_id": terms_id(key), "tenant": tenant}, {"$set": {"k": []}})
    await marks.update_one({"_id": key, "tenant": tenant, "w": token}, {"$set": {"w": ""}})


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
