"""A tenant's vectors (``search_vectors``): written by the catch-up, read by a ranking,
and filled in where they are missing (docs/search.md, "Recall by meaning").

Writes: the catch-up that indexes a task's messages (`catchup`) embeds the same messages,
under the same claim, and inserts their vectors with their entries, before the claim's
release: a claim taken back (its task redacted or deleted meanwhile) deletes them with
the entries (`lifecycle.delete_entries`), so the lexical index's race closures hold for
the vectors. An append still writes nothing for search.

Filling: messages indexed without a vector of the store's model (indexed by a store
without an embedder, or under another model) are found by comparing the tenant's entry
count with its vector count (the entries' indexes read from their chunks, unsealed
or not); their tasks' marks are reset (as a redaction resets one) and
the watermark dropped, so the next catch-up indexes those tasks whole again, under
claims, and embeds them: a model change re-embeds lazily, at the next search, and a
ranking reads only its model's vectors (`e`, the model's tag), never two models' at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pymongo import UpdateOne
from pymongo.errors import BulkWriteError

from .embedder import Embedder, embed_all, model_key
from .entries import chunk_indexes, entry_id, key_of
from .lifecycle import reset_tenant
from .postings import stats_filter
from .vectors import VectorSource, model_tag, source_for, vector_document, vector_seal

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher
    from mindstore.model.messages import AnyMessage

    from .entries import Entry

__all__ = ["VectorTarget", "embed_sources", "fill_missing", "sources_of", "write_vectors"]

MISSING_AT_ONCE = 10_000
"""Tasks reset for filling in one search (the rest wait for the next)."""


class VectorTarget(Protocol):
    """What writing and filling a tenant's vectors needs of its index (`SearchStore`)."""

    tenant: str
    database: Any
    cipher: TenantCipher | None
    embedder: Embedder | None
    embed_failure: Exception | None
    entries: Any
    postings: Any
    task_marks: Any
    vectors: Any

    def forget_state(self) -> None: ...


def sources_of(
    embedder: Embedder | None,
    messages: Sequence[AnyMessage],
    made: Sequence[Entry | None],
    task_id: str,
    owner: str | None,
) -> list[VectorSource]:
    """The vector sources of the messages a catch-up made entries of (none without an
    embedder): one per entry, named by the entry's `_id`."""
    if embedder is None:
        return []
    out: list[VectorSource] = []
    for message, entry in zip(messages, made, strict=True):
        if entry is not None:
            source = source_for(message, entry.id, task_id, owner)
            if source is not None:
                out.append(source)
    return out


async def embed_sources(
    index: VectorTarget, sources: Sequence[VectorSource]
) -> tuple[str | None, list[dict[str, Any]]]:
    """The vector documents of `sources` (embedded in the embedder's batches) and the
    model key they are made under (None: no embedder, or nothing to embed). Nothing is
    written. An embedder that fails (a provider down) does not stop the catch-up: the
    messages are indexed without vectors (filled in by a later search, `fill_missing`)
    and the error is kept in `index.embed_failure`, which a semantic or hybrid search
    raises; a lexical search goes on answering."""
    embedder = index.embedder
    if embedder is None or not sources:
        return None, []
    key = model_key(embedder)
    tag = model_tag(key)
    sealer = await vector_seal(index.tenant, index.cipher)
    try:
        vectors = await embed_all(embedder, [s.text for s in sources], purpose="document")
    except Exception as error:  # kept for the search that needs vectors
        index.embed_failure = error
        return None, []
    return key, [
        vector_document(index.tenant, source, vector, tag, sealer)
        for source, vector in zip(sources, vectors, strict=True)
    ]


async def write_vectors(index: VectorTarget, documents: Sequence[dict[str, Any]]) -> None:
    """Insert vector documents; one already stored under its `_id` (an indexing cut
    short and run again) is left: its entry's text is the same, and one of another model
    is replaced by `fill_missing`."""
    for chunk in range(0, len(documents), 1000):
        try:
            await index.vectors.insert_many(list(documents[chunk : chunk + 1000]), ordered=False)
        except BulkWriteError as error:
            if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
                raise


async def fill_missing(index: VectorTarget, tag: str, held: int) -> bool:
    """If fewer of the tenant's messages have a vector of `tag` (`held` of them) than
    it has entries, mark the tasks of those without one for a whole re-index (at most
    `MISSING_AT_ONCE`) and drop the watermark; True: something was marked (catch up
    again before ranking)."""
    stats = await index.postings.find_one(stats_filter(index.tenant), {"docs": 1})
    if int((stats or {}).get("docs") or 0) <= held:
        return False
    have = {
        d["_id"] async for d in index.vectors.find({"tenant": index.tenant, "e": tag}, {"_id": 1})
    }
    tasks: dict[str, None] = {}
    async for chunk in index.entries.find({"tenant": index.tenant}, {"g": 1}):
        key = key_of(str(chunk["_id"]))  # the indexes it holds, read without unsealing
        if any(entry_id(key, i) not in have for i in chunk_indexes(chunk)):
            tasks[key] = None
            if len(tasks) >= MISSING_AT_ONCE:
                break
    if not tasks:
        return False
    marks = [  # a claimed task is being indexed: its claimer embeds it, or it is next
        UpdateOne({"_id": key, "tenant": index.tenant, "w": ""}, {"$set": {"v": -1}})
        for key in tasks
    ]
    for chunk in range(0, len(marks), 1000):
        await index.task_marks.bulk_write(marks[chunk : chunk + 1000], ordered=False)
    await reset_tenant(index.database, index.tenant)
    index.forget_state()
    return True
