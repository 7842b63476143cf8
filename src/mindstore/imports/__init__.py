"""Moving in: a peer's conversation store imported into mindstore.

`await import_from(store, KIND, SOURCE, tenant=..., owner=None, dry_run=False)` reads
every conversation of SOURCE with the framework's own library and writes it through
mindstore's adapter for the same framework, so what the adapter serves afterwards is, by
construction and by a read-back check, what the source held. The `Receipt` counts what
was read and written per kind, with SHA-256 digests of both. KIND is one of `KINDS`;
docs/import-export.md gives each source's mapping and what cannot be carried.

Each kind's module imports its framework, and is loaded only when its kind is asked for.
"""

from __future__ import annotations

import os

from mindstore.errors import ValidationError
from mindstore.imports.driver import Kind, OnStep, Step, UnreadableSource, run
from mindstore.imports.mongo_sources import MongoSource
from mindstore.imports.receipt import Receipt
from mindstore.store import Store

__all__ = [
    "KINDS",
    "MongoSource",
    "Receipt",
    "Step",
    "UnreadableSource",
    "import_from",
    "kind_named",
]

KINDS = (
    "openai-agents", "langgraph", "adk", "llamaindex", "agent-framework", "langchain-mongodb",
)  # fmt: skip
"""The source kinds `import_from` reads."""


def kind_named(name: str) -> Kind:
    """The source kind called `name` (its framework loaded now), else `ValidationError`."""
    if name == "openai-agents":
        from mindstore.imports.openai_agents import KIND

        return KIND
    if name == "langgraph":
        from mindstore.imports.langgraph import KIND as LANGGRAPH

        return LANGGRAPH
    if name == "adk":
        from mindstore.imports.adk import KIND as ADK

        return ADK
    if name == "llamaindex":
        from mindstore.imports.llamaindex import KIND as LLAMAINDEX

        return LLAMAINDEX
    if name == "agent-framework":
        from mindstore.imports.agent_framework import KIND as AGENT_FRAMEWORK

        return AGENT_FRAMEWORK
    if name == "langchain-mongodb":
        from mindstore.imports.langchain_mongodb import KIND as LANGCHAIN_MONGODB

        return LANGCHAIN_MONGODB
    raise ValidationError(f"kind: {name!r} is not a source kind (one of: {', '.join(KINDS)})")


async def import_from(
    store: Store,
    kind: str,
    source: str | os.PathLike[str] | MongoSource,
    *,
    tenant: str,
    owner: str | None = None,
    owner_from: str | None = None,
    dry_run: bool = False,
    on_step: OnStep | None = None,
) -> Receipt:
    """Import every conversation of `source` into `tenant`; the receipt.

    Args:
        store: The store to write into.
        kind: The source's framework (`KINDS`).
        source: Its file, folder, SQLAlchemy URL, PostgreSQL URL (LangGraph's
            ``postgresql://user:pw@host/DB``) or MongoDB URI (or, for the MongoDB
            sources, a `MongoSource` holding an open client).
        tenant: The one tenant everything is written to.
        owner: The owner of every imported conversation.
        owner_from: Instead of `owner`, the source field each conversation's owner is
            taken from (such as ``user_id``); a value outside the owner alphabet is a
            `ValidationError` raised before anything is written.
        dry_run: Read the source and the store, write nothing.
        on_step: Called after each write and each conversation (progress).

    Returns:
        The `Receipt`: counts per kind and digests of what was read and written.

    Raises:
        UnreadableSource: The source is missing or not that framework's store (nothing
            is written).
        ValidationError: A bad kind, tenant, owner or `owner_from`.
        Conflict: mindstore already holds a different conversation under an imported id.
    """
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, (str, MongoSource)) or not source:
        raise ValidationError(
            "source: a file, folder, SQLAlchemy or PostgreSQL URL, or MongoDB URI"
        )
    return await run(kind_named(kind), store, source, tenant=tenant, owner=owner,
                     owner_from=owner_from, dry_run=dry_run, on_step=on_step)  # fmt: skip
