"""`acme.search(...)`: ranked, scoped, paged search over a tenant's conversations.

The pure parts (query, tokens, BM25, snippets) are in their own modules; this one runs a
search: bring the index up to date, look the terms up, rank, cut the page, make its
snippets. An owner-scoped view finds only its owner's messages; every query names the
tenant. docs/search.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mindstore.errors import KeyShredded, ValidationError
from mindstore.ids import check_key, task_key
from mindstore.validation import check_int

from .bm25 import Corpus, score
from .index import Codec, Posting, SearchStore, forget_tenant, stats_id, unpack
from .query import ROLES, ParsedQuery, parse_query
from .snippet import Snippet, make_snippet

__all__ = ["MAX_LIMIT", "SearchHit", "SearchPage", "search"]

MAX_LIMIT = 100
MAX_TASK_IDS = 1000


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
    if owner is not None and not isinstance(owner, str):
        raise ValidationError("owner must be a string")
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


def _fingerprint(query: str, filters: Filters) -> str:
    raw = json.dumps(
        [
            query,
            filters.owner,
            sorted(filters.roles),
            filters.since,
            filters.until,
            sorted(filters.task_ids or []),
        ]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _cursor(offset: int, fingerprint: str) -> str:
    raw = json.dumps({"o": offset, "q": fingerprint}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _offset(cursor: object, fingerprint: str) -> int:
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or len(cursor) > 200:
        raise ValidationError("cursor: not a cursor this search returned")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset, seen = data["o"], data["q"]
    except (ValueError, KeyError, TypeError):
        raise ValidationError("cursor: not a cursor this search returned") from None
    if seen != fingerprint or not isinstance(offset, int) or offset < 0:
        raise ValidationError("cursor: from another query or filters")
    return offset


@dataclass
class _Candidate:
    id: str
    posting: Posting
    score: float


def _gather(
    tenant: str, documents: list[dict[str, Any]], codec: Codec | None = None
) -> tuple[dict[tuple[str, int], tuple[Posting, dict[str, Posting]]], dict[str, int]]:
    """Postings documents -> per message (a posting of it, its posting per term) and each
    term's document frequency. A posting seen twice (an indexing cut short and run again)
    counts once. With `codec` (a phrase), positions sealed under a keyring are opened."""
    messages: dict[tuple[str, int], tuple[Posting, dict[str, Posting]]] = {}
    df: dict[str, int] = {}
    prefix = len(tenant) + 1
    for document in documents:
        term = document["_id"][prefix : document["_id"].rindex("/")]
        opened = codec.open_places if codec is not None else None
        reveal = None if opened is None else (lambda x, task, o=opened, t=term: o(x, task, t))
        for group in document.get("e") or []:
            for posting in unpack(group, reveal):
                where = (posting.task, posting.index)
                held = messages.get(where)
                if held is None:
                    held = messages[where] = (posting, {})
                if term in held[1]:
                    continue
                held[1][term] = posting
                df[term] = df.get(term, 0) + 1
    return messages, df


def _phrase_at(found: dict[str, Posting], phrase: tuple[str, ...]) -> bool:
    """Whether the stored terms of `phrase` occur next to each other, in order, in one
    message (by the positions its postings hold: no text is read)."""
    first, rest = phrase[0], phrase[1:]
    places = [set(found[term].positions) for term in rest]
    return any(
        all(at + n + 1 in held for n, held in enumerate(places)) for at in found[first].positions
    )


def _rank(
    tenant: str,
    documents: list[dict[str, Any]],
    parsed: ParsedQuery,
    codec: Codec,
    filters: Filters,
    stats: dict[str, Any],
) -> list[_Candidate]:
    """The matching messages, best first (BM25, then newest, then id)."""
    stored = {term: codec.term(term) for term in parsed.lookup}
    required = [stored[t] for t in parsed.required]
    excluded = {stored[t] for t in parsed.excluded}
    scored = [stored[t] for t in parsed.scored]
    phrases = [tuple(stored[t] for t in phrase) for phrase in parsed.phrases]
    messages, df = _gather(tenant, documents, codec if phrases else None)
    corpus = Corpus(int(stats.get("docs") or 0), int(stats.get("length") or 0))
    out: list[_Candidate] = []
    for (task_id, index), (posting, found) in messages.items():
        if any(t not in found for t in required) or any(t in found for t in excluded):
            continue
        if filters.owner is not None and posting.owner != filters.owner:
            continue
        role = posting.role
        if (filters.roles and role not in filters.roles) or (
            parsed.roles and role not in parsed.roles
        ):
            continue
        ts = posting.ts
        if (filters.since is not None and ts < filters.since) or (
            filters.until is not None and ts >= filters.until
        ):
            continue
        if filters.task_ids is not None and task_id not in filters.task_ids:
            continue
        if not all(_phrase_at(found, phrase) for phrase in phrases):
            continue
        counts = {term: p.count for term, p in found.items()}
        value = score(corpus, counts, posting.length, scored, df)
        out.append(_Candidate(f"{task_key(tenant, task_id)}/{index}", posting, value))
    out.sort(key=lambda c: (-c.score, -c.posting.ts, c.id))
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
) -> SearchPage:
    """Run one search (see `TenantStore.search`)."""
    check_int(limit, "limit", minimum=1, maximum=MAX_LIMIT)
    assert isinstance(limit, int)
    filters = check_filters(view_owner, owner, roles, since, until, task_ids)
    state = await index.state()
    parse_query(query)  # refuse a bad query before any I/O
    assert isinstance(query, str)
    offset = _offset(cursor, _fingerprint(query, filters))
    try:
        for _attempt in range(3):
            codec, found = await index.refresh(
                lambda c: [c.term(t) for t in parse_query(query, c.stem).lookup]
            )
            parsed = parse_query(query, codec.stem)
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
    rows = [r for r in rows if r["_id"] != stats_id(index.tenant)]
    ranked = _rank(index.tenant, rows, parsed, codec, filters, stats)
    return await _page(index, ranked, parsed, codec, offset, limit, query, filters)


async def _page(
    index: SearchStore,
    ranked: list[_Candidate],
    parsed: ParsedQuery,
    codec: Codec,
    offset: int,
    limit: int,
    query: str,
    filters: Filters,
) -> SearchPage:
    """The page `[offset, offset + limit)` with snippets (phrases were checked on the
    postings' positions: only the page's texts are read)."""
    words = set(parsed.scored)
    hits: list[SearchHit] = []
    chosen = ranked[offset : offset + limit]
    texts = await index.texts([c.id for c in chosen])
    for candidate in chosen:
        stored = texts.get(candidate.id)
        if stored is not None:  # else redacted or deleted while this search ran
            hits.append(_hit(candidate, stored, codec, words))
    total = len(ranked)
    more = offset + limit < total
    next_cursor = _cursor(offset + limit, _fingerprint(query, filters)) if more else None
    return SearchPage(hits, next_cursor, total)


def _text(stored: dict[str, Any] | None, codec: Codec) -> str:
    if stored is None:
        return ""
    return codec.open(stored.get("x"), str(stored.get("task")), str(stored.get("m")))


def _hit(
    candidate: _Candidate, stored: dict[str, Any] | None, codec: Codec, words: set[str]
) -> SearchHit:
    posting = candidate.posting
    text = _text(stored, codec)
    return SearchHit(
        task_id=posting.task,
        message_id=str((stored or {}).get("m") or ""),
        index=posting.index,
        role=posting.role,
        owner=posting.owner,
        time=datetime.fromtimestamp(posting.ts, UTC),
        score=round(candidate.score, 6),
        snippet=make_snippet(text, words, codec.stem),
    )
