"""`MindstoreStore`: LangGraph's long-term memory store (`BaseStore`) on a mindstore tenant view.

A LangGraph store keeps namespaced JSON items that graphs read and write across threads
(`store.put(("memories", user_id), key, value)`, `store.search(..., query=...)`). Here
each item is a document of mindstore's ``memory_items`` collection (`mindstore.memory`),
so a tenant's memories are backed up, restored, erased (with their owner or tenant),
expired (TTL and retention) and shredded with its conversations, and sealed under its
keyring (docs/integrations.md, "LangGraph store").

* `batch` / `abatch` take LangGraph's operations (`GetOp`, `PutOp`, `SearchOp`,
  `ListNamespacesOp`) and return their results in order; each operation runs in order, so
  a read after a put in one batch sees it. The texts of every put and the queries of every
  search are embedded first, one call each (`IndexConfig`'s `embed`).
* `IndexConfig` (`dims`, `embed`, `fields`): a put embeds the value's text at each field
  (``"$"``: the whole value; `index=` overrides, `False` skips); a search with `query`
  ranks the items under its prefix by the best similarity of their vectors (the index's
  `distance_type`: cosine, l2 or inner_product, scored as LangGraph's Postgres store
  scores them), in the process.
* `TTLConfig` (`default_ttl` minutes, `refresh_on_read`, `sweep_interval_minutes`,
  `omit_expired`): an item expires `ttl` minutes after its last write or refreshing read;
  `start_ttl_sweeper` deletes expired items every interval, `sweep_ttl` once.
* Scope: the view's tenant, and on an owner-scoped view its owner: another owner's items
  read as absent. On a tenant view, `owner_label=i` makes the namespace's label at
  position i the item's owner (``("memories", "<user id>")``: 1), so erasing that owner
  erases those items.

Sync methods run the async ones (`_sync`): from the store's own event loop they are
refused with `SyncFromLoop` (an `asyncio.InvalidStateError`, as LangGraph's async stores
raise), from another thread they run on that loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from mindstore.clock import utcnow
from mindstore.errors import ValidationError, WrongType
from mindstore.integrations._sync import current_loop, run_sync
from mindstore.memory import MemoryItem, MemoryItems, rules
from mindstore.protocols import SaverView

__all__ = ["InvalidNamespace", "MindstoreStore", "SyncFromLoop"]

WHOLE_VALUE = "$"


class InvalidNamespace(ValidationError, InvalidNamespaceError):
    """A namespace mindstore refuses (empty, or past its size bounds): both mindstore's
    `ValidationError` and LangGraph's `InvalidNamespaceError`."""


class SyncFromLoop(RuntimeError, asyncio.InvalidStateError):
    """A sync method called on the event loop the store runs on: use its async form."""


class MindstoreStore(BaseStore):
    """A LangGraph `BaseStore` on a mindstore tenant view (see the module doc).

    Args:
        view: A tenant view (`store.scoped(tenant)` or `store.scoped(tenant, owner=...)`).
        index: LangGraph's `IndexConfig` (`dims`, `embed`, `fields`); None: no semantic
            search (a search's `query` is ignored, as in LangGraph's stores).
        ttl: LangGraph's `TTLConfig`; None: items never expire unless a put says so.
        owner_label: On a tenant view, the namespace position whose label is the item's
            owner (see the module doc).
        clock: What "now" is for times and expiry (default: the store's clock).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        view: SaverView,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        owner_label: int | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.items = MemoryItems.of(
            view.store,
            view.tenant,
            owner=view.owner,
            owner_label=owner_label,
            clock=clock or utcnow,
        )
        self.ttl_config = None if ttl is None else TTLConfig(**ttl)
        self.index_config: IndexConfig | None = None
        self._distance = "cosine"
        self.embeddings = None
        self._fields: list[tuple[str, str | list[str]]] = []
        if index:
            self.index_config = IndexConfig(**index)
            self._distance = rules.check_distance(index.get("distance_type", "cosine"))
            dims = index.get("dims")
            if not isinstance(dims, int) or isinstance(dims, bool) or dims <= 0:
                raise ValidationError("index: dims must be a positive int")
            self.embeddings = ensure_embeddings(index.get("embed"))
            self._fields = [
                (path, path if path == WHOLE_VALUE else tokenize_path(path))
                for path in (index.get("fields") or [WHOLE_VALUE])
            ]
        self._loop = current_loop()
        self._sweeper: threading.Thread | None = None
        self._sweeping = threading.Event()

    # ------------------------------------------------------------------ batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order (LangGraph's `BaseStore.batch`; see the module doc).

        Args:
            ops: `GetOp`, `PutOp` (value None: delete), `SearchOp`, `ListNamespacesOp`.

        Returns:
            One result per operation: an `Item` or None, None, a list of `SearchItem`,
            a list of namespaces.

        Raises:
            SyncFromLoop: Called on the store's own running event loop.
            InvalidNamespaceError: A namespace label LangGraph refuses.
            ValidationError: A namespace, key, value, filter or page out of bounds.
        """
        if current_loop() is not None:
            raise SyncFromLoop(
                "MindstoreStore: a sync method was called from a running event loop; use "
                "its async form (or call it from another thread)"
            )
        return run_sync(self.abatch(list(ops)), self._loop, "MindstoreStore")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order (LangGraph's `BaseStore.abatch`; see `batch`).

        Args:
            ops: `GetOp`, `PutOp` (value None: delete), `SearchOp`, `ListNamespacesOp`.

        Returns:
            One result per operation, in order.
        """
        ops = list(ops)
        for op in ops:
            _check_op(op)
        vectors = await self._embed_puts([op for op in ops if isinstance(op, PutOp)])
        queries = await self._embed_queries([op for op in ops if isinstance(op, SearchOp)])
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, PutOp):
                await self._put(op, vectors.get(id(op)))
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op, queries.get(op.query or "")))
            else:
                results.append(await self._list(op))
        return results

    # ------------------------------------------------------------------ ops
    @property
    def _omit_expired(self) -> bool:
        return bool(self.ttl_config and self.ttl_config.get("omit_expired"))

    async def _get(self, op: GetOp) -> Item | None:
        entry = (
            await self.items.get_many([(op.namespace, op.key)], omit_expired=self._omit_expired)
        )[0]
        if entry is None:
            return None
        if op.refresh_ttl:
            await self.items.refresh([entry], live_only=self._omit_expired)
        return _item(entry.item)

    async def _put(self, op: PutOp, vectors: list[list[float]] | None) -> None:
        if op.value is None:
            await self.items.delete(op.namespace, op.key)
            return
        dims = None if self.index_config is None else self.index_config["dims"]
        await self.items.put(
            op.namespace, op.key, op.value, vectors=vectors, dims=dims, ttl_minutes=op.ttl
        )

    async def _search(self, op: SearchOp, query: list[float] | None) -> list[SearchItem]:
        found = await self.items.search(
            op.namespace_prefix,
            filter=op.filter,
            query_vector=query,
            limit=op.limit,
            offset=op.offset,
            omit_expired=self._omit_expired,
            distance=self._distance,
        )
        if op.refresh_ttl:
            await self.items.refresh(found, live_only=self._omit_expired)
        return [_search_item(entry.item) for entry in found]

    async def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit = rules.check_page(op.limit, "limit")
        offset = rules.check_page(op.offset, "offset")
        depth = op.max_depth
        if depth is not None and (
            not isinstance(depth, int) or isinstance(depth, bool) or depth < 1
        ):
            raise ValidationError(f"max_depth must be a positive int, not {depth!r}")
        namespaces = await self.items.namespaces(omit_expired=self._omit_expired)
        conditions = [_condition(c) for c in op.match_conditions or ()]
        kept = [ns for ns in namespaces if all(_matches(c, ns) for c in conditions)]
        if depth is not None:
            kept = sorted({ns[:depth] for ns in kept})
        return kept[offset : offset + limit]

    # ------------------------------------------------------------------ embeddings
    def _texts(self, op: PutOp) -> list[str]:
        if self.embeddings is None or op.value is None or op.index is False:
            return []
        if op.index is None:
            paths = self._fields
        else:
            if isinstance(op.index, str) or not isinstance(op.index, list):
                raise WrongType("index must be False, None or a list of field paths")
            paths = [(p, p if p == WHOLE_VALUE else tokenize_path(p)) for p in op.index]
        texts: list[str] = []
        for _path, tokens in paths:
            texts += get_text_at_path(op.value, tokens)
        if len(texts) > rules.MAX_VECTORS:
            raise ValidationError(f"a put embeds at most {rules.MAX_VECTORS} texts")
        return texts

    async def _embed_puts(self, puts: Sequence[PutOp]) -> dict[int, list[list[float]]]:
        wanted = {id(op): self._texts(op) for op in puts}
        flat = [text for texts in wanted.values() for text in texts]
        if not flat or self.embeddings is None:
            return {}
        vectors = await self.embeddings.aembed_documents(flat)
        if len(vectors) != len(flat):
            raise ValidationError(f"embed returned {len(vectors)} vectors for {len(flat)} texts")
        out: dict[int, list[list[float]]] = {}
        start = 0
        for key, texts in wanted.items():
            out[key] = [list(v) for v in vectors[start : start + len(texts)]]
            start += len(texts)
        return out

    async def _embed_queries(self, searches: Sequence[SearchOp]) -> dict[str, list[float]]:
        if self.embeddings is None:
            return {}
        queries = sorted({op.query for op in searches if op.query})
        if not queries:
            return {}
        found = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries))
        return {query: list(vector) for query, vector in zip(queries, found, strict=True)}

    # ------------------------------------------------------------------ TTL
    async def asweep_ttl(self) -> int:
        """Delete the expired items of this store's scope now.

        Returns:
            How many items were deleted.
        """
        return await self.items.sweep()

    def sweep_ttl(self) -> int:
        """Delete the expired items of this store's scope now (the sync form of `asweep_ttl`).

        Returns:
            How many items were deleted.
        """
        return run_sync(self.asweep_ttl(), self._loop, "MindstoreStore")

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every interval in a thread of its own (as LangGraph's
        `PostgresStore.start_ttl_sweeper`), until `stop_ttl_sweeper`.

        Args:
            sweep_interval_minutes: The interval (default: the `TTLConfig`'s
                `sweep_interval_minutes`, else 5).

        Returns:
            A future that completes when the sweeper stops.
        """
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        interval = sweep_interval_minutes
        if interval is None and self.ttl_config:
            interval = self.ttl_config.get("sweep_interval_minutes")
        seconds = 60.0 * float(interval or 5)
        if self._sweeper is not None and self._sweeper.is_alive():
            done.set_result(None)
            return done
        self._sweeping.clear()

        def sweep_forever() -> None:
            try:
                while not self._sweeping.wait(seconds):
                    self.sweep_ttl()
            finally:
                done.set_result(None)

        self._sweeper = threading.Thread(target=sweep_forever, name="mindstore-ttl", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread.

        Args:
            timeout: How long to wait for it, in seconds (None: until it stops).

        Returns:
            Whether it stopped (True when none was running).
        """
        sweeper = self._sweeper
        self._sweeping.set()
        if sweeper is None:
            return True
        sweeper.join(timeout)
        stopped = not sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped


def _check_op(op: Any) -> None:
    if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
        raise WrongType(f"unknown store operation {type(op).__name__}")
    try:
        if isinstance(op, (GetOp, PutOp)):
            rules.check_namespace(op.namespace)
        elif isinstance(op, SearchOp):
            rules.check_prefix(op.namespace_prefix)
    except ValidationError as error:
        raise InvalidNamespace(str(error)) from None
    if isinstance(op, (GetOp, PutOp)):
        rules.check_key(op.key)
    elif isinstance(op, SearchOp):
        if op.query is not None and not isinstance(op.query, str):
            raise WrongType(f"query must be a string, not {type(op.query).__name__}")
    else:
        for condition in op.match_conditions or ():
            _condition(condition)


def _condition(condition: MatchCondition) -> MatchCondition:
    """A checked match condition; a path given as one string is that one label."""
    if condition.match_type not in ("prefix", "suffix"):
        raise ValidationError(f"unknown match type {condition.match_type!r}")
    path = (condition.path,) if isinstance(condition.path, str) else condition.path
    try:
        return MatchCondition(condition.match_type, rules.check_prefix(path, "match condition"))
    except ValidationError as error:
        raise InvalidNamespace(str(error)) from None


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    held = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    if not path:
        return True
    return all(want == "*" or want == label for want, label in zip(path, held, strict=True))


def _item(item: MemoryItem) -> Item:
    return Item(
        value=item.value,
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _search_item(item: MemoryItem) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=item.score,
    )
