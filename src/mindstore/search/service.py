"""`acme.search(...)`: ranked, scoped, paged search over a tenant's conversations.

The pure parts (query, tokens, BM25, snippets, the mode and match) are in their own
modules; this one runs a search: choose the mode and match, bring the index up to date,
look the terms up, match on the postings, join the matches with their tasks' tables
(length, role, time, owner: `SearchStore.tables`), rank, cut the page, make its
snippets. An owner-scoped view finds only
its owner's messages; every query names the tenant.

Pages are a keyset walk: the first page pins the statistics it ranks by (the tenant's
message count and length, each query term's document frequency) and every `next_cursor`
carries them with the last hit's sort key (score, time, entry id). The next page ranks
under the pinned statistics and returns what sorts after that key, so a message whose
text did not change keeps its key for the whole walk: it is returned once, on the page
whose range holds its key, whatever was appended, redacted or deleted meanwhile. A
cursor is bound to its tenant, the view's owner, the query and its filters, and to the
index's terms (stemming, tokenizer), and to the mode and match; elsewhere it is refused.
docs/search.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mindstore.errors import KeyShredded, ValidationError
from mindstore.ids import check_key, check_name, task_key
from mindstore.validation import check_int

from .bm25 import Corpus, Scorer
from .entries import Row, StoredText, TaskTable, entry_id
from .index import Codec, SearchStore, forget_tenant, stats_id, unpack
from .modes import Recall, choose_recall
from .postings import Occurrence
from .query import MAX_TERMS, ROLES, ParsedQuery, parse_query
from .snippet import Snippet, make_snippet
from .tokenize import TOKENIZER_VERSION

__all__ = ["MAX_LIMIT", "SearchHit", "SearchPage", "search"]

MAX_LIMIT = 100
MAX_TASK_IDS = 1000
CURSOR_VERSION = 1
MAX_CURSOR_CHARS = 4096
"""A cursor carries the query's document frequencies (at most `MAX_TERMS`) and an entry
id: a few hundred characters; anything much longer is not one this search returned."""


@dataclass(frozen=True)
class SearchHit:
    """One message found: where it is, who wrote it, how well it matches, and an excerpt."""

    task_id: str
    message_id: str
    index: int
    role: str
    owner: str | None
    time: datetime
    score: float
    snippet: Snippet


@dataclass(frozen=True)
class SearchPage:
    """A page of hits, best first; `next_cursor` asks for the next page (None: the last)."""

    hits: list[SearchHit]
    next_cursor: str | None
    total: int
    """How many messages match (before paging)."""


@dataclass(frozen=True)
class Filters:
    owner: str | None
    roles: frozenset[str]
    since: float | None
    until: float | None
    task_ids: frozenset[str] | None


def _epoch(value: object, what: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"{what} must be a datetime, not {type(value).__name__}")
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.timestamp()


def check_filters(
    view_owner: str | None,
    owner: object,
    roles: object,
    since: object,
    until: object,
    task_ids: object,
) -> Filters:
    """The search's filters, checked (each error names its argument)."""
    if owner is not None:
        owner = check_name(owner, "owner")
    if view_owner is not None and owner is not None and owner != view_owner:
        raise ValidationError("owner: this view is scoped to another owner")
    chosen: set[str] = set()
    if roles is not None:
        if isinstance(roles, str) or not isinstance(roles, Iterable):
            raise ValidationError("roles must be a list of roles")
        for role in roles:
            value = getattr(role, "value", role)
            if value not in ROLES:
                raise ValidationError(f"roles: {value!r} is not a role")
            chosen.add(str(value))
    ids: frozenset[str] | None = None
    if task_ids is not None:
        if isinstance(task_ids, str) or not isinstance(task_ids, Iterable):
            raise ValidationError("task_ids must be a list of task ids")
        listed = [check_key(t, "task_ids") for t in task_ids]
        if len(listed) > MAX_TASK_IDS:
            raise ValidationError(f"task_ids: at most {MAX_TASK_IDS}")
        ids = frozenset(listed)
    start, end = _epoch(since, "since"), _epoch(until, "until")
    return Filters(
        view_owner if view_owner is not None else owner, frozenset(chosen), start, end, ids
    )


def _fingerprint(
    tenant: str, view_owner: str | None, query: str, recall: Recall, filters: Filters
) -> str:
    """What a cursor is bound to: the tenant, the view's owner, the query, its mode and
    match, its filters."""
    raw = json.dumps(
        [
            CURSOR_VERSION,
            tenant,
            view_owner,
            query,
            recall.mode,
            recall.match,
            filters.owner,
            sorted(filters.roles),
            filters.since,
            filters.until,
            sorted(filters.task_ids or []),
        ]
    )
    digest = hashlib.sha256(raw.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@dataclass(frozen=True)
class Ranking:
    """The statistics a page walk ranks by: the tenant's, as its first page saw them."""

    corpus: Corpus
    frequencies: tuple[int, ...]
    """The document frequency of each distinct scored term, in query order."""


@dataclass(frozen=True)
class Position:
    """Where a page walk stands: its pinned `Ranking`, the index's terms it was made
    under (tokenizer version, stemming) and the last hit's sort key."""

    ranking: Ranking
    terms_by: tuple[int, str | None]
    """The tokenizer version and the stemming the index's terms were made by."""
    score: float
    ts: float
    entry: str

    @property
    def key(self) -> tuple[float, float, str]:
        return (-self.score, -self.ts, self.entry)


def _cursor(fingerprint: str, position: Position) -> str:
    ranking = position.ranking
    raw = json.dumps(
        {
            "v": CURSOR_VERSION,
            "f": fingerprint,
            "x": list(position.terms_by),
            "n": ranking.corpus.documents,
            "l": ranking.corpus.length,
            "d": list(ranking.frequencies),
            "s": position.score,
            "t": position.ts,
            "i": position.entry,
        },
        separators=(",", ":"),
    ).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _refuse_constant(name: str) -> float:
    raise ValueError(name)  # NaN and Infinity are not numbers a cursor holds


def _count(value: object) -> int:
    if type(value) is not int or not 0 <= value < 2**53:
        raise ValueError("not a count")
    return value


def _finite(value: object) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):  # type: ignore[arg-type]
        raise ValueError("not a finite number")
    return float(value)  # type: ignore[arg-type]


def cursor_data(cursor: object) -> dict[str, Any]:
    """A cursor's JSON object: ASCII, at most `MAX_CURSOR_CHARS`, base64 of a JSON object
    of this `CURSOR_VERSION` with no NaN or infinity (pure). Anything else raises
    `ValueError` (or `RecursionError`, `TypeError`): the caller's `except` turns it into
    the `ValidationError` naming `cursor`, as it does for its own fields."""
    if not isinstance(cursor, str) or not cursor.isascii() or len(cursor) > MAX_CURSOR_CHARS:
        raise ValueError("not a cursor's form")
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    data = json.loads(raw, parse_constant=_refuse_constant)
    if not isinstance(data, dict) or data.get("v") != CURSOR_VERSION:
        raise ValueError("not a cursor of this version")
    return data


def _position(cursor: object, fingerprint: str) -> Position | None:
    """The position a cursor names, checked (pure: before any I/O)."""
    if cursor is None:
        return None
    bad = ValidationError("cursor: not a cursor this search returned")
    try:
        data = cursor_data(cursor)
        seen = data["f"]
        version, stemming = data["x"]
        frequencies = data["d"]
        entry = data["i"]
        if not isinstance(frequencies, list) or len(frequencies) > MAX_TERMS:
            raise ValueError("frequencies")
        if not isinstance(entry, str) or not 0 < len(entry) <= 512:
            raise ValueError("entry")
        if stemming is not None and not isinstance(stemming, str):
            raise ValueError("stemming")
        position = Position(
            Ranking(
                Corpus(_count(data["n"]), _count(data["l"])),
                tuple(_count(f) for f in frequencies),
            ),
            (_count(version), stemming),
            _finite(data["s"]),
            _finite(data["t"]),
            entry,
        )
    except (ValueError, KeyError, TypeError, RecursionError):
        raise bad from None
    if seen != fingerprint:
        raise ValidationError(
            "cursor: from another query, mode, match, filters, owner scope or tenant than "
            "this search"
        )
    return position


@dataclass(slots=True)
class _Candidate:
    """A matching message: its name, its score, and its task's table and row."""

    id: str
    score: float
    ts: float
    """Epoch seconds, exact to the microsecond."""
    index: int
    table: TaskTable
    row: Row

    def key(self) -> tuple[float, float, str]:
        """The sort key: best score first, then newest, then entry id (`Position.key`)."""
        return (-self.score, -self.ts, self.id)


_Where = tuple[int, int]
"""A message in the postings: its task's ordinal, its index."""


def _gather(
    tenant: str, documents: list[dict[str, Any]], codec: Codec | None = None
) -> tuple[dict[_Where, dict[str, Occurrence]], dict[str, int]]:
    """Postings documents -> per message its occurrence of each term, and each term's
    document frequency. An occurrence seen twice (an indexing cut short and run again)
    counts once. With `codec` (a phrase), positions sealed under a keyring are opened."""
    messages: dict[_Where, dict[str, Occurrence]] = {}
    df: dict[str, int] = {}
    prefix = len(tenant) + 1
    for document in documents:
        term = document["_id"][prefix : document["_id"].rindex("/")]
        opened = codec.open_places if codec is not None else None
        reveal = None if opened is None else (lambda x, bound, o=opened, t=term: o(x, bound, t))
        for group in document.get("e") or []:
            for occurrence in unpack(group, reveal):
                held = messages.setdefault((occurrence.ordinal, occurrence.index), {})
                if term in held:
                    continue
                held[term] = occurrence
                df[term] = df.get(term, 0) + 1
    return messages, df


def _phrase_at(found: dict[str, Occurrence], phrase: tuple[str, ...]) -> bool:
    """Whether the stored terms of `phrase` occur next to each other, in order, in one
    message (by the positions its postings hold: no text is read)."""
    first, rest = phrase[0], phrase[1:]
    places = [set(found[term].positions) for term in rest]
    return any(
        all(at + n + 1 in held for n, held in enumerate(places)) for at in found[first].positions
    )


def _distinct(parsed: ParsedQuery) -> tuple[str, ...]:
    """The scored terms, each once, in query order: the order of a ranking's frequencies."""
    return tuple(dict.fromkeys(parsed.scored))


@dataclass(frozen=True)
class _Terms:
    """A query's terms as the index stores them (`Codec.term`)."""

    required: tuple[str, ...]
    any_of: frozenset[str]
    excluded: frozenset[str]
    scored: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]
    distinct: tuple[str, ...]

    @classmethod
    def of(cls, parsed: ParsedQuery, codec: Codec) -> _Terms:
        stored = {term: codec.term(term) for term in parsed.lookup}
        return cls(
            tuple(stored[t] for t in parsed.required),
            frozenset(stored[t] for t in parsed.any_of),
            frozenset(stored[t] for t in parsed.excluded),
            tuple(stored[t] for t in parsed.scored),
            tuple(tuple(stored[t] for t in phrase) for phrase in parsed.phrases),
            tuple(stored[t] for t in _distinct(parsed)),
        )


def _matching(
    messages: dict[_Where, dict[str, Occurrence]], terms: _Terms
) -> dict[_Where, dict[str, Occurrence]]:
    """The messages whose terms match the query (required, any of, excluded, phrases):
    what the postings alone decide, before the tables are read."""
    out = {}
    for where, found in messages.items():
        if any(t not in found for t in terms.required) or any(t in found for t in terms.excluded):
            continue
        if terms.any_of and terms.any_of.isdisjoint(found):
            continue
        if not all(_phrase_at(found, phrase) for phrase in terms.phrases):
            continue
        out[where] = found
    return out


def _rank(
    tenant: str,
    matches: dict[_Where, dict[str, Occurrence]],
    tables: dict[int, TaskTable],
    terms: _Terms,
    roles: frozenset[str],
    filters: Filters,
    ranking: Ranking,
) -> list[_Candidate]:
    """The matching messages, each joined with its task's table (a message no table holds
    is left out: its task's chunks are being replaced or removed), filtered and ranked:
    BM25 under `ranking`, then newest, then id (`roles`: the query's own role words)."""
    scorer = Scorer.of(
        ranking.corpus, terms.scored, dict(zip(terms.distinct, ranking.frequencies, strict=True))
    )
    out: list[_Candidate] = []
    for (ordinal, index), found in matches.items():
        table = tables.get(ordinal)
        row = table.rows.get(index) if table is not None else None
        if table is None or row is None:
            continue
        if filters.owner is not None and table.owner != filters.owner:
            continue
        if (filters.roles and row.role not in filters.roles) or (roles and row.role not in roles):
            continue
        ts = row.time / 1_000_000
        if (filters.since is not None and ts < filters.since) or (
            filters.until is not None and ts >= filters.until
        ):
            continue
        if filters.task_ids is not None and table.task not in filters.task_ids:
            continue
        value = scorer({term: o.count for term, o in found.items()}, row.length)
        name = entry_id(task_key(tenant, table.task), index)
        out.append(_Candidate(name, value, ts, index, table, row))
    out.sort(key=_Candidate.key)
    return out


async def search(
    index: SearchStore,
    query: object,
    *,
    view_owner: str | None,
    owner: object = None,
    roles: object = None,
    since: object = None,
    until: object = None,
    task_ids: object = None,
    limit: object = 20,
    cursor: object = None,
    mode: object = None,
    match: object = "any",
    has_embedder: bool = False,
    snippets: bool = True,
) -> SearchPage:
    """Run one search (see `TenantStore.search`). Everything is checked before any I/O:
    the mode and match (`modes.choose_recall`), the limit, the filters, the query and the
    cursor. `snippets=False` (hybrid's lexical ranking): the hits' texts are not read,
    so their `message_id` and `snippet` are empty (the caller reads the texts of the hits
    it keeps)."""
    recall = choose_recall(mode, match, has_embedder=has_embedder)
    check_int(limit, "limit", minimum=1, maximum=MAX_LIMIT)
    assert isinstance(limit, int)
    filters = check_filters(view_owner, owner, roles, since, until, task_ids)
    parse_query(query, match=recall.match)  # refuse a bad query before any I/O
    assert isinstance(query, str)
    fingerprint = _fingerprint(index.tenant, view_owner, query, recall, filters)
    position = _position(cursor, fingerprint)
    # the one place a mode is dispatched: only "lexical" ranks here (choose_recall refuses
    # the others while the store has no embedder)
    return await _lexical(index, query, recall, filters, fingerprint, position, limit, snippets)


async def _lexical(
    index: SearchStore,
    query: str,
    recall: Recall,
    filters: Filters,
    fingerprint: str,
    position: Position | None,
    limit: int,
    snippets: bool = True,
) -> SearchPage:
    """A lexical search: BM25 over the index's terms, under `recall.match`."""
    state = await index.state()
    try:
        for _attempt in range(3):
            codec, found = await index.refresh(
                lambda c: [c.term(t) for t in parse_query(query, c.stem, recall.match).lookup]
            )
            parsed = parse_query(query, codec.stem, recall.match)
            if found is None:  # something changed, or no row carried the postings
                found = await index.lookup([codec.term(t) for t in parsed.lookup])
            rows = found
            stats = next((r for r in rows if r["_id"] == stats_id(index.tenant)), {})
            seen = await index.state()
            if int(stats.get("epoch") or 0) == seen.epoch and stats.get("stem") == seen.stemming:
                break
            index.forget_state()  # rebuilt or restored meanwhile: look again
            state = await index.state()
    except KeyShredded:
        await forget_tenant(index.database, index.tenant)
        raise
    del state
    made_under = (TOKENIZER_VERSION, stats.get("stem"))
    distinct = _distinct(parsed)
    pinned = position.ranking if position is not None else None
    if position is not None and (
        position.terms_by != made_under or len(position.ranking.frequencies) != len(distinct)
    ):
        raise ValidationError(
            "cursor: the index's terms changed since this walk began (rebuilt with other "
            "stemming, or another tokenizer): search again from the first page"
        )
    rows = [r for r in rows if r["_id"] != stats_id(index.tenant)]
    terms = _Terms.of(parsed, codec)
    messages, df = _gather(index.tenant, rows, codec if terms.phrases else None)
    ranking = pinned or Ranking(
        Corpus(int(stats.get("docs") or 0), int(stats.get("length") or 0)),
        tuple(df.get(t, 0) for t in terms.distinct),
    )
    matches = _matching(messages, terms)
    wanted: dict[int, set[int]] = {}
    for ordinal, index_in_task in matches:
        wanted.setdefault(ordinal, set()).add(index_in_task)
    tables = await index.tables(wanted)
    ranked = _rank(index.tenant, matches, tables, terms, parsed.roles, filters, ranking)
    hits, last, more, total = await _page(index, ranked, parsed, codec, position, limit, snippets)
    next_cursor = None
    if more and last is not None:
        at = Position(ranking, made_under, last.score, last.ts, last.id)
        next_cursor = _cursor(fingerprint, at)
    return SearchPage(hits, next_cursor, total)


async def _page(
    index: SearchStore,
    ranked: list[_Candidate],
    parsed: ParsedQuery,
    codec: Codec,
    position: Position | None,
    limit: int,
    snippets: bool = True,
) -> tuple[list[SearchHit], _Candidate | None, bool, int]:
    """The page: up to `limit` hits that sort after `position`, with snippets (phrases
    were checked on the postings' positions: only the page's texts are read). Returns the
    hits, the last candidate the page took (the next page starts after it), whether more
    follow, and how many match in all."""
    words = set(parsed.scored)
    after = ranked if position is None else [c for c in ranked if c.key() > position.key]
    hits: list[SearchHit] = []
    chosen = after[:limit]
    if not snippets:
        hits = [_hit(c, StoredText(c.table.task, "", ""), codec, set()) for c in chosen]
        return hits, (chosen[-1] if chosen else None), len(after) > limit, len(ranked)
    texts = await index.texts([c.id for c in chosen], codec, {c.id: c.row.chunk for c in chosen})
    for candidate in chosen:
        stored = texts.get(candidate.id)
        if stored is not None:  # else redacted or deleted while this search ran
            hits.append(_hit(candidate, stored, codec, words))
    return hits, (chosen[-1] if chosen else None), len(after) > limit, len(ranked)


def _hit(candidate: _Candidate, stored: StoredText, codec: Codec, words: set[str]) -> SearchHit:
    return SearchHit(
        task_id=candidate.table.task,
        message_id=stored.message_id,
        index=candidate.index,
        role=candidate.row.role,
        owner=candidate.table.owner,
        time=datetime.fromtimestamp(candidate.ts, UTC),
        score=round(candidate.score, 6),
        snippet=make_snippet(stored.text, words, codec.stem),
    )
