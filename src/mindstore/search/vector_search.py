"""`acme.search(query, mode="semantic" | "hybrid")`: recall by meaning (docs/search.md).

A search brings the tenant's index up to date (the catch-up embeds what it indexes, and
`vector_index.fill_missing` has the messages without a vector of the store's model
indexed again), reads the tenant's vectors of that model within the scope (tenant always;
owner, task ids and time in the query, roles after), and ranks in the process: exact
nearest neighbours by cosine (`rank_by_cosine`, numpy). Hybrid fuses the lexical ranking
(the lexical search, its first `DEPTH` hits) and the vector ranking (its first `DEPTH`)
by reciprocal rank fusion (`fusion.fuse`).

Pages: a semantic walk's cursor holds the last hit's key (cosine, time, entry id); a
vector's cosine with the query depends only on the two, so the next page returns what
sorts after it, and a message is returned once, whatever changed meanwhile. A hybrid
ranking's fused scores move when a message is added or removed (ranks shift), so its
cursor holds a 32-bit hash of each hit returned (at most 2 x `DEPTH`): the next page is
the fused ranking of now, less those. Both are bound to the tenant, the view's owner, the
query, its filters, the mode and the model.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mindstore.errors import ConfigurationError, KeyShredded, ValidationError
from mindstore.ids import task_key
from mindstore.validation import check_int

from .embedder import Embedder, embed_all, model_key
from .entries import StoredText, entry_id
from .fusion import fuse
from .index import Codec, SearchStore, forget_tenant
from .modes import NEEDS_EMBEDDER, check_match
from .query import parse_query
from .service import (
    CURSOR_VERSION,
    MAX_LIMIT,
    Filters,
    SearchHit,
    SearchPage,
    check_filters,
    cursor_data,
)
from .snippet import make_snippet
from .vector_index import fill_missing
from .vector_server import vector_search_pipeline
from .vectors import VectorSeal, model_tag, vector_seal

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEPTH",
    "LexicalSearch",
    "rank_by_cosine",
    "ranked_by_meaning",
]

DEPTH = 100
"""How many of each ranking hybrid fuses (the lexical search's largest page)."""
SERVER_LIMIT = 1000
"""The most vectors a `$vectorSearch` ranking returns (a semantic walk on a server ends
there)."""
_HASH = 4

LexicalSearch = Callable[..., Awaitable[SearchPage]]
"""The lexical search hybrid fuses (`service.search`, its `match` bound by the caller)."""


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - an extra's dependency
        raise ConfigurationError(
            "recall by meaning needs numpy: pip install 'mindstore[recall-local]' "
            "(or recall-openai, recall-gemini)"
        ) from None
    return numpy


@dataclass(frozen=True)
class Stored:
    """The tenant's vectors of one model within a scope, as a matrix, with what a hit shows."""

    ids: list[str]
    tasks: list[str]
    owners: list[str | None]
    roles: list[str]
    times: list[int]
    matrix: npt.NDArray[np.int8]


_OPERATOR = re.compile(r'(?<!\S)(?:-\S+|(?:role|tool):\S+)|"')


def query_text(query: str) -> str:
    """What of a query is embedded: its words and phrases, without `-word`, `role:`,
    `tool:` and quotes (filters, not meaning)."""
    return " ".join(_OPERATOR.sub(" ", query).split())


CHUNK = 65_536
"""Rows converted to float32 at a time: the ranking's working memory beyond the int8
matrix is at most this many rows of float32 (96 MiB at 384 dimensions)."""


def rank_by_cosine(matrix: npt.NDArray[Any], query: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Each row's cosine with `query` (rows need not be unit length; a zero row: 0)."""
    numpy = _numpy()
    out: npt.NDArray[np.float64] = numpy.zeros(len(matrix))
    wanted = query.astype(numpy.float32)
    for start in range(0, len(matrix), CHUNK):
        rows = matrix[start : start + CHUNK].astype(numpy.float32)
        norms = numpy.linalg.norm(rows, axis=1)
        dots = rows @ wanted
        safe = numpy.where(norms > 0, norms, 1.0)
        out[start : start + CHUNK] = numpy.where(norms > 0, dots / safe, 0.0)
    return out


def _fingerprint(
    tenant: str, view_owner: str | None, query: str, filters: Filters, mode: str, match: str,
    model: str,
) -> str:  # fmt: skip
    raw = json.dumps(
        [
            CURSOR_VERSION, tenant, view_owner, query, filters.owner, sorted(filters.roles),
            filters.since, filters.until, sorted(filters.task_ids or []), mode, match, model,
        ]
    )  # fmt: skip
    return base64.urlsafe_b64encode(hashlib.sha256(raw.encode()).digest()[:16]).decode()


def _id_hash(entry: str) -> bytes:
    return hashlib.blake2b(entry.encode(), digest_size=_HASH).digest()


@dataclass(frozen=True)
class Position:
    """Where a walk stands: a semantic one's last key, a hybrid one's hits returned."""

    key: tuple[float, int, str] | None
    returned: frozenset[bytes]


def _encode(fingerprint: str, position: Position) -> str:
    data: dict[str, Any] = {"v": CURSOR_VERSION, "f": fingerprint}
    if position.key is not None:
        data["s"], data["t"], data["i"] = position.key
    else:
        data["h"] = base64.b64encode(b"".join(sorted(position.returned))).decode()
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: object, fingerprint: str, mode: str) -> Position | None:
    """The position a cursor names, checked before any I/O."""
    if cursor is None:
        return None
    bad = ValidationError("cursor: not a cursor this search returned")
    try:
        data = cursor_data(cursor)
        seen = data["f"]
        if mode == "semantic":
            score, ts, entry = data["s"], data["t"], data["i"]
            if type(score) not in (int, float) or not -2.0 <= score <= 2.0:
                raise ValueError("score")
            if type(ts) is not int or not isinstance(entry, str) or not 0 < len(entry) <= 512:
                raise ValueError("key")
            position = Position((float(score), ts, entry), frozenset())
        else:
            packed = base64.b64decode(data["h"], validate=True)
            if len(packed) % _HASH or len(packed) > 2 * DEPTH * _HASH:
                raise ValueError("hashes")
            hashes = {packed[at : at + _HASH] for at in range(0, len(packed), _HASH)}
            position = Position(None, frozenset(hashes))
    except (ValueError, KeyError, TypeError, RecursionError):
        raise bad from None
    if seen != fingerprint:
        raise ValidationError(
            "cursor: from another query, filters, owner scope, mode, model or tenant "
            "than this search"
        )
    return position


def _in_scope(doc: dict[str, Any], filters: Filters, roles: frozenset[str]) -> bool:
    """Whether a vector document is within the search's scope (owner, roles, time, tasks),
    checked in the process as the lexical ranking checks its postings: the query names
    the tenant and the model only (one index, `(tenant, _id)`, serves it)."""
    if filters.owner is not None and doc.get("o") != filters.owner:
        return False
    role = str(doc.get("r") or "")
    if (filters.roles and role not in filters.roles) or (roles and role not in roles):
        return False
    ts = int(doc.get("t") or 0)
    if filters.since is not None and ts < round(filters.since * 1_000_000):
        return False
    if filters.until is not None and ts >= round(filters.until * 1_000_000):
        return False
    return filters.task_ids is None or doc.get("task") in filters.task_ids


async def _load(
    index: SearchStore, tag: str, filters: Filters, roles: frozenset[str], sealer: VectorSeal
) -> tuple[Stored, int]:
    """The scope's vectors, and how many of the model the tenant holds."""
    numpy = _numpy()
    ids: list[str] = []
    tasks: list[str] = []
    owners: list[str | None] = []
    kinds: list[str] = []
    times: list[int] = []
    raws: list[bytes] = []
    read = 0
    async for doc in index.vectors.find({"tenant": index.tenant, "e": tag}):
        read += 1
        if not _in_scope(doc, filters, roles):
            continue
        entry = str(doc["_id"])
        raw = sealer.open(doc["v"], entry)
        ids.append(entry)
        tasks.append(str(doc.get("task")))
        owners.append(doc.get("o"))
        kinds.append(str(doc.get("r") or ""))
        times.append(int(doc.get("t") or 0))
        raws.append(raw[2:])  # the binary vector's dtype and padding bytes
    width = len(raws[0]) if raws else 0
    if any(len(r) != width for r in raws):
        raise ConfigurationError("search: vectors of two sizes under one model tag")
    matrix = numpy.frombuffer(b"".join(raws), dtype=numpy.int8).reshape(len(raws), width)
    return Stored(ids, tasks, owners, kinds, times, matrix), read


async def _catch_up(
    index: SearchStore, tag: str, filters: Filters, roles: frozenset[str], on_server: bool
) -> tuple[Codec, Stored | None]:
    """Bring the index up to date and read the scope's vectors (None: the server ranks
    them, `on_server`, and the tenant's are not sealed); fill in the vectors missing (at
    most twice) before ranking."""
    for attempt in range(3):
        codec, _ = await index.refresh()
        failure, index.embed_failure = index.embed_failure, None
        if failure is not None:  # the messages it could not embed wait for the next search
            raise failure
        sealer = await vector_seal(index.tenant, index.cipher)
        stored: Stored | None = None
        if on_server and not sealer.sealed:
            held = await index.vectors.count_documents({"tenant": index.tenant, "e": tag})
        else:
            stored, held = await _load(index, tag, filters, roles, sealer)
        if attempt == 2 or not await fill_missing(index, tag, held):
            return codec, stored
    raise AssertionError("unreachable")  # pragma: no cover


async def _server_ranking(
    index: SearchStore,
    vector: list[float],
    tag: str,
    filters: Filters,
    roles: frozenset[str],
) -> tuple[Stored, npt.NDArray[np.float64]]:
    """The scope's `SERVER_LIMIT` nearest vectors by `$vectorSearch` (exact), with their
    cosines (the stage's score for cosine is (1 + cosine) / 2)."""
    numpy = _numpy()
    allowed = filters.roles & roles if filters.roles and roles else filters.roles or roles
    pipeline = vector_search_pipeline(
        vector,
        tenant=index.tenant,
        tag=tag,
        limit=SERVER_LIMIT,
        owner=filters.owner,
        roles=sorted(allowed),
        since=None if filters.since is None else round(filters.since * 1_000_000),
        until=None if filters.until is None else round(filters.until * 1_000_000),
        task_ids=None if filters.task_ids is None else sorted(filters.task_ids),
    )
    if filters.roles and roles and not allowed:
        rows: list[dict[str, Any]] = []
    else:
        rows = await (await index.vectors.aggregate(pipeline)).to_list(None)
    stored = Stored(
        [str(r["_id"]) for r in rows],
        [str(r.get("task")) for r in rows],
        [r.get("o") for r in rows],
        [str(r.get("r") or "") for r in rows],
        [int(r.get("t") or 0) for r in rows],
        numpy.zeros((0, 0), dtype=numpy.int8),
    )
    cosines = numpy.array([2.0 * float(r.get("score") or 0.0) - 1.0 for r in rows])
    return stored, cosines


async def ranked_by_meaning(
    index: SearchStore,
    query: object,
    *,
    mode: str,
    match: str,
    lexical: LexicalSearch,
    view_owner: str | None,
    owner: object = None,
    roles: object = None,
    since: object = None,
    until: object = None,
    task_ids: object = None,
    limit: object = 20,
    cursor: object = None,
    on_server: bool = False,
) -> SearchPage:
    """Run one semantic or hybrid search (see `TenantStore.search`); `on_server`: the
    deployment ranks vectors with `$vectorSearch` (`vector_server.vector_path`)."""
    if mode not in NEEDS_EMBEDDER:
        raise ValidationError(f"mode: {sorted(NEEDS_EMBEDDER)} rank by meaning, not {mode!r}")
    match = check_match(match)
    check_int(limit, "limit", minimum=1, maximum=MAX_LIMIT)
    assert isinstance(limit, int)
    filters = check_filters(view_owner, owner, roles, since, until, task_ids)
    parsed = parse_query(query)  # refuse a bad query before any I/O
    assert isinstance(query, str)
    embedder: Embedder | None = index.embedder
    if embedder is None:
        raise ConfigurationError(
            f"search: mode={mode!r} needs an embedder (mindstore.connect(..., embedder=...))"
        )
    key = model_key(embedder)
    fingerprint = _fingerprint(index.tenant, view_owner, query, filters, mode, match, key)
    position = _decode(cursor, fingerprint, mode)
    numpy = _numpy()
    tag = model_tag(key)
    try:
        codec, held = await _catch_up(index, tag, filters, parsed.roles, on_server)
    except KeyShredded:
        await forget_tenant(index.database, index.tenant)
        raise
    text = query_text(query) or query
    (vector,) = await embed_all(embedder, [text], purpose="query")
    if held is None:  # the server ranks
        stored, scores = await _server_ranking(index, vector, tag, filters, parsed.roles)
    else:
        stored = held
        scores = rank_by_cosine(stored.matrix, numpy.asarray(vector, dtype=numpy.float32))
    rounded = [round(float(s), 6) for s in scores]
    keys = [(-rounded[n], -stored.times[n], stored.ids[n]) for n in range(len(stored.ids))]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    words = set(parse_query(query, codec.stem).scored)
    if mode == "semantic":
        after = order
        if position is not None and position.key is not None:
            score, ts, entry = position.key
            after = [n for n in order if keys[n] > (-score, -ts, entry)]
        chosen = after[:limit]
        texts = await index.texts([stored.ids[n] for n in chosen], codec)
        hits = [
            _vector_hit(stored, n, rounded[n], texts.get(stored.ids[n]), codec, words)
            for n in chosen
            if stored.ids[n] in texts  # else redacted or deleted while this search ran
        ]
        next_cursor = None
        if len(after) > limit and chosen:
            n = chosen[-1]
            at = Position((rounded[n], stored.times[n], stored.ids[n]), frozenset())
            next_cursor = _encode(fingerprint, at)
        return SearchPage(hits, next_cursor, len(order))
    # hybrid: the lexical ranking's first DEPTH and the vector ranking's, fused
    found = await lexical(
        index, query, view_owner=view_owner, owner=owner, roles=roles, since=since,
        until=until, task_ids=task_ids, limit=DEPTH, mode="lexical", match=match,
        snippets=False,
    )  # fmt: skip
    by_lexical = {entry_id(task_key(index.tenant, h.task_id), h.index): h for h in found.hits}
    nearest = [stored.ids[n] for n in order[:DEPTH]]
    fused = fuse([list(by_lexical), nearest])
    returned = position.returned if position is not None else frozenset()
    remaining = [(entry, value) for entry, value in fused if _id_hash(entry) not in returned]
    chosen_ids = remaining[:limit]
    at_row = {entry: n for n, entry in enumerate(stored.ids)}
    # one read of the texts of the hits returned (the lexical ranking read none)
    texts = await index.texts([e for e, _ in chosen_ids], codec)
    lexical_words = set(parse_query(query, codec.stem, match).scored)
    hits = []
    for entry, value in chosen_ids:
        score, opened = round(value, 6), texts.get(entry)
        if opened is None:  # redacted or deleted while this search ran
            continue
        if entry in by_lexical:
            hits.append(_rescored(by_lexical[entry], score, opened, codec, lexical_words))
        else:
            hits.append(_vector_hit(stored, at_row[entry], score, opened, codec, words))
    next_cursor = None
    if len(remaining) > limit:
        done = returned | {_id_hash(e) for e, _ in chosen_ids}
        next_cursor = _encode(fingerprint, Position(None, frozenset(done)))
    return SearchPage(hits, next_cursor, len(fused))


def _rescored(
    hit: SearchHit, score: float, stored: StoredText, codec: Codec, words: set[str]
) -> SearchHit:
    """A lexical hit (read without its text) with its fused score, message id and snippet."""
    snippet = make_snippet(stored.text, words, codec.stem)
    return SearchHit(
        hit.task_id, stored.message_id, hit.index, hit.role, hit.owner, hit.time, score, snippet
    )


def _vector_hit(
    stored: Stored, n: int, score: float, entry: StoredText | None, codec: Codec,
    words: set[str],
) -> SearchHit:  # fmt: skip
    text = entry.text if entry is not None else ""
    return SearchHit(
        task_id=stored.tasks[n],
        message_id=entry.message_id if entry is not None else "",
        index=int(stored.ids[n].rpartition("/")[2]),
        role=stored.roles[n],
        owner=stored.owners[n],
        time=datetime.fromtimestamp(stored.times[n] / 1_000_000, UTC),
        score=score,
        snippet=make_snippet(text, words, codec.stem),
    )
