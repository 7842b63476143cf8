"""`connect()` and the store: one backend, tenant-scoped views over it.

`store.scoped(tenant)` is the only way to reach data: every repository it returns puts
the tenant into every query it sends, so one tenant can never read or write another's
tasks (another tenant's id is simply "not found").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cached_property
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from pymongo import AsyncMongoClient

from mindstore.analytics.service import Analytics
from mindstore.backends import speedups
from mindstore.backends.connection import Backend, open_backend
from mindstore.backends.recorder import CommandRecorder, EventListener
from mindstore.backends.transient import guarded
from mindstore.backup.shred_clear import shred_eraser
from mindstore.crypto.keyring import Keyring
from mindstore.crypto.tenant import TenantCipher
from mindstore.model.paging import DEFAULT_PAGE_BYTES, DEFAULT_PAGE_MESSAGES, PagePolicy
from mindstore.model.plans import check_id
from mindstore.operations import InDoubt, Resilience, RetryPolicy
from mindstore.repositories.dialogs import DialogRepository
from mindstore.repositories.feed import Notifier
from mindstore.repositories.header_cache import HeaderCache
from mindstore.repositories.locks import TaskLocks
from mindstore.search.admin import SearchIndexAdmin
from mindstore.search.embedder import Embedder, check_embedder
from mindstore.search.index import IndexState, SearchStore
from mindstore.search.modes import Match, Mode, choose_recall
from mindstore.search.service import SearchPage
from mindstore.search.service import search as run_search
from mindstore.search.vector_search import ranked_by_meaning
from mindstore.search.vector_server import (
    ON_SERVER,
    VectorPath,
    create_vector_index,
    vector_path,
)
from mindstore.services.agents import AgentRepository
from mindstore.services.tasks import TaskService

if TYPE_CHECKING:
    from mindstore.protocols import ChatView, ContextView, HasDatabase, SaverView, StateView


def policy_from_environment() -> PagePolicy:
    """The page size `MINDSTORE_PAGE_MESSAGES` and `MINDSTORE_PAGE_BYTES` ask for (the
    defaults where unset); a value that is not a positive integer is refused."""
    from mindstore.errors import ConfigurationError, ValidationError

    values = {}
    for name, default in (("page_messages", DEFAULT_PAGE_MESSAGES),
                          ("page_bytes", DEFAULT_PAGE_BYTES)):  # fmt: skip
        variable = f"MINDSTORE_{name.upper()}"
        text = os.environ.get(variable, "").strip()
        try:
            values[name] = int(text) if text else default
        except ValueError:
            raise ConfigurationError(f"{variable}: expected a positive integer") from None
    try:
        return PagePolicy(**values)
    except ValidationError as error:
        raise ConfigurationError(f"MINDSTORE_PAGE_*: {error}") from None


class TenantStore:
    """Everything one tenant (optionally one owner) may touch."""

    def __init__(self, store: Store, tenant: str, owner: str | None) -> None:
        self.store = store
        self.tenant = check_id(tenant, "tenant")
        self.owner = owner
        self.tasks = TaskService(
            store.database,
            self.tenant,
            owner=owner,
            locks=store._locks,
            retry=store.retry,
            offload_threshold=store.offload_threshold,
            headers=store.headers,
            notifier=store.notifier,
            page_policy=store.page_policy,
            in_doubt=store.in_doubt,
        )
        if store.keyring is not None:
            self.tasks.cipher = TenantCipher(store.keyring, self.tenant)

    @cached_property
    def search_index(self) -> SearchIndexAdmin:
        """The tenant's search index, for operators: `rebuild()`, `verify()` (docs/search.md)."""
        return SearchIndexAdmin(self._search_store)

    @cached_property
    def _search_store(self) -> SearchStore:
        whole = self if self.owner is None else TenantStore(self.store, self.tenant, None)
        return SearchStore(self.store.database, self.tenant, whole.tasks, self.tasks.cipher,
                           self.store.search_states, self.store.embedder)  # fmt: skip

    async def search(
        self,
        query: str,
        *,
        owner: str | None = None,
        roles: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        task_ids: Iterable[str] | None = None,
        limit: int = 20,
        cursor: str | None = None,
        mode: Mode | None = None,
        match: Match = "any",
    ) -> SearchPage:
        """Search the tenant's conversations: a page of hits, best first.

        Every message of every task is reachable (sealed pages included, dialogs' forks,
        the integrations' sessions and threads: they are tasks); an owner-scoped view
        finds only its owner's messages. The query language: words (any of them, ranked
        by all; stop words do not decide; ``match="all"``: every one), ``"a phrase"``,
        ``-word``, ``role:user``, ``tool:<name>`` (docs/search.md). A question as a user
        types it finds its answers. A message is found by any search that starts after
        its append returned.

        Args:
            query: What to look for.
            owner: Only this owner's messages (an owner-scoped view: only its own).
            roles: Only messages of these roles.
            since: Only messages started at or after this time.
            until: Only messages started before this time.
            task_ids: Only these tasks.
            limit: Page size, 1 to 100.
            cursor: The `next_cursor` of the previous page.
            mode: ``"lexical"`` (BM25 over words), ``"semantic"`` (nearest by the store's
                embedder: by meaning) or ``"hybrid"`` (both rankings fused; both need an
                embedder); None: ``"hybrid"`` with an embedder, else ``"lexical"``.
            match: ``"any"``: a message holding any of the query's words (not counting
                stop words); ``"all"``: every word.

        Returns:
            A `SearchPage`: `hits` (task id, message id, role, time, score, snippet),
            `next_cursor`, `total`.

        Raises:
            ValidationError: A bad query (empty, too long, a control character, an unknown
                role) or argument (`mode` and `match` included); the error names it.
            ConfigurationError: `mode` needs an embedder and this store has none.
            KeyShredded: The tenant's keys were destroyed: it cannot be searched.

        Example:
            ```python
            page = await acme.search('lisbon "hotel booking" -cancelled', limit=10)
            for hit in page.hits:
                print(hit.task_id, hit.snippet.marked())
            ```
        """
        recall = choose_recall(mode, match, has_embedder=self.store.embedder is not None)
        if recall.mode != "lexical":  # recall by meaning (mindstore.search.vector_search)
            return await ranked_by_meaning(
                self._search_store, query, mode=recall.mode, match=recall.match,
                lexical=run_search,
                view_owner=self.owner, owner=owner, roles=roles, since=since, until=until,
                task_ids=task_ids, limit=limit, cursor=cursor,
                on_server=(await self.store.vector_path()).path == ON_SERVER,
            )  # fmt: skip
        return await run_search(
            self._search_store, query, view_owner=self.owner, owner=owner, roles=roles,
            since=since, until=until, task_ids=task_ids, limit=limit, cursor=cursor,
            mode=recall.mode, match=recall.match,
        )  # fmt: skip

    @property
    def resilience(self) -> Resilience:
        """The store's retry policy and its ledger of calls in doubt (`mindstore.operations`)."""
        return self.store.resilience

    @cached_property
    def dialogs(self) -> DialogRepository:
        """Dialog trees (the dialog document) over this tenant's tasks."""
        return DialogRepository(self.tasks)

    @cached_property
    def agents(self) -> AgentRepository:
        """Agents' dialogs by alias (`acme.agents.get(name)`), over this tenant's dialogs."""
        return AgentRepository(self.tasks, self.dialogs)

    @cached_property
    def analytics(self) -> Analytics:
        """Reports over this tenant's sessions (aggregation pipelines)."""
        return Analytics(self.store.database, self.tenant, self.owner, self.store.resilience)


class Store:
    """A connection and what its views share (header cache, locks, notifier, keyring):
    open one per process with `connect()` and reach data only through `scoped()`, so the
    tenant (and owner) is applied to every read and write."""

    def __init__(
        self,
        backend: Backend,
        *,
        retry: RetryPolicy | None = None,
        offload_threshold: int = 256 * 1024,
        header_cache_size: int = 10_000,
        page_policy: PagePolicy | EllipsisType | None = ...,
        keyring: Keyring | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.backend = backend
        self.embedder = check_embedder(embedder) if embedder is not None else None
        """What turns text into vectors for recall by meaning (`mindstore.search.Embedder`;
        None: lexical search only)."""
        self.database = guarded(backend.database)
        """The backend's database, with every transient driver error raised as
        `errors.Unavailable` (`backends.transient`): what every view reads and writes."""
        self.page_policy = policy_from_environment() if page_policy is ... else page_policy
        self.retry = retry or RetryPolicy()
        self.in_doubt = InDoubt()
        """Calls that failed after sending a write, for their retries (`mindstore.operations`)."""
        self.keyring = (
            keyring.bind(self.database, self.resilience, shred_eraser(self))
            if keyring is not None
            else None
        )
        """Per-tenant encryption (`mindstore.crypto`): rotate, shred (which erases what the
        tenant holds in the clear, `backup.shred_clear`), status; None: none."""
        self.offload_threshold = offload_threshold
        self.headers = HeaderCache(header_cache_size)
        self.notifier = Notifier()
        self._locks = TaskLocks()  # per loop: a store may be shared by loops and threads
        self.search_states: dict[str, IndexState] = {}
        """Each tenant's search index state as this store last saw it (`mindstore.search`)."""
        self._vector_path: VectorPath | None = None

    @property
    def resilience(self) -> Resilience:
        """What this store's operations share: the retry policy and the ledger."""
        return Resilience(self.retry, self.in_doubt)

    @property
    def kind(self) -> str:
        return self.backend.kind

    async def vector_path(self) -> VectorPath:
        """Where recall by meaning ranks this store's vectors: in the process, or on the
        server (`$vectorSearch`), and why; checked once per store (docs/search.md)."""
        if self._vector_path is None:
            self._vector_path = await vector_path(self.database, self.kind)
        return self._vector_path

    async def create_vector_index(self, dimensions: int | None = None) -> None:
        """Ask a server with a search process to index the vectors (`$vectorSearch`, MongoDB
        8.2+ or Atlas), for `dimensions` (default: the embedder's). Stores opened once the
        server reports it queryable rank there (`vector_path`); docs/search.md."""
        if dimensions is None:
            if self.embedder is None:
                from mindstore.errors import ConfigurationError

                raise ConfigurationError("dimensions: give them, or connect with an embedder")
            dimensions = self.embedder.dimensions
        await create_vector_index(self.database, self.kind, dimensions)

    def scoped(self, tenant: str, owner: str | None = None) -> TenantStore:
        """One tenant's view (`acme = store.scoped("acme")`), or one owner's within it:
        every repository it hands out filters by them."""
        if owner is not None and not isinstance(owner, str):
            from mindstore.errors import ValidationError

            raise ValidationError("owner must be a string")
        return TenantStore(self, tenant, owner)

    async def close(self) -> None:
        """Close the backend's connections (an embedded store's data is then gone)."""
        await self.backend.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


if TYPE_CHECKING:

    def _conforms(
        store: Store, view: TenantStore
    ) -> tuple[HasDatabase, SaverView, ContextView, ChatView, StateView]:
        """Never runs: mypy checks here that a store and its tenant views are what the
        layers below the store take instead of importing it (`mindstore.protocols`)."""
        return store, view, view, view, view


async def connect(
    uri: str | None = None,
    *,
    database: str | None = None,
    retry: RetryPolicy | None = None,
    offload_threshold: int = 256 * 1024,
    header_cache_size: int = 10_000,
    recorder: CommandRecorder | None = None,
    event_listeners: Sequence[EventListener] | None = None,
    client: AsyncMongoClient[Any] | None = None,
    page_policy: PagePolicy | EllipsisType | None = ...,
    keyring: Keyring | None = None,
    embedder: Embedder | None = None,
) -> Store:
    """Open a store: embedded (in-memory) by default, or MongoDB at `uri` / `MINDSTORE_URI`.

    Beanie is loaded and initialised here (not at ``import mindstore``), which creates the
    indexes of every document model and binds the models (`mindstore.document_models`,
    ``TaskDoc.find(...)``) to this store's database.
    `header_cache_size` bounds how many task headers this process remembers from its own
    writes, so that appending to a task it wrote last needs no read (0: always read).
    `recorder` receives every command (`store.backend.recorder`; default: sizes only).
    `event_listeners`: pymongo monitoring listeners (e.g. for tracing); `client`: an
    existing `pymongo.AsyncMongoClient` to use instead of a URI, left open by `close()`
    (see `mindstore.backends.connection`). `page_policy`: how many messages and bytes a
    sealed page of a long conversation holds (`mindstore.PagePolicy`; by default 256
    messages or 1 MiB, or `MINDSTORE_PAGE_MESSAGES` / `MINDSTORE_PAGE_BYTES`; None: never
    page, so a task stops at MongoDB's 16 MiB document limit; docs/data-model.md).
    `keyring`: encrypt every tenant's content from now on with its own data keys
    (`mindstore.crypto.Keyring`, docs/encryption.md); the store's is `store.keyring`.
    `embedder`: what turns text into vectors (`mindstore.search.Embedder`: OpenAI, Gemini,
    a local sentence-transformers model): search then recalls by meaning too, and its
    default mode is hybrid (docs/search.md, "Recall by meaning").
    """
    backend = await open_backend(
        uri, database=database, recorder=recorder, event_listeners=event_listeners, client=client
    )
    if backend.kind == "embedded":
        speedups.install()
    from mindstore.document_models import bind_documents  # Beanie: loaded at connect only

    await bind_documents(backend.database)
    return Store(
        backend,
        retry=retry,
        offload_threshold=offload_threshold,
        header_cache_size=header_cache_size,
        page_policy=page_policy,
        keyring=keyring,
        embedder=embedder,
    )
