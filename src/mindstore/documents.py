"""Where the stored shapes used to live, kept as one import for code written against it.

Each job now has its module: collection names (`mindstore.collection_names`), the store's
clock (`mindstore.clock`), the Beanie document models and their indexes
(`mindstore.document_models`; the LangGraph saver's in
`mindstore.integrations.langgraph_documents`), the stored-header codec
(`mindstore.header_codec`) and whole stored documents built from in-memory values
(`mindstore.stored_documents`). Everything this module exported is still importable from
it; the Beanie models are loaded on first use (module `__getattr__`), so importing a
collection name from here does not load Beanie.

It sits with the core (docs/architecture.md, "Layers"), which knows no framework: the
LangGraph saver's models are the integration's, and this module reaches them only on
first use, the one upward import tests/test_layers.py allows (`LAZY_UPWARD`). Importing
it loads no integration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindstore.clock import utcnow
from mindstore.collection_names import (
    AGENTS,
    DIALOG_NODES,
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    PAYLOADS,
    POLICIES,
    TASK_PAGES,
    TASKS,
)
from mindstore.header_codec import TAIL_KEYS, header_from_document, header_to_fields
from mindstore.stored_documents import node_document, task_document

if TYPE_CHECKING:  # the names type checkers see; at run time `__getattr__` loads them
    from beanie import Document

    from mindstore.document_models import (
        AgentDoc,
        DataKeyDoc,
        DialogNodeDoc,
        PayloadDoc,
        PolicyDoc,
        TaskDoc,
        TaskPageDoc,
    )
    from mindstore.integrations.langgraph_documents import (
        LangGraphBlobDoc,
        LangGraphCheckpointDoc,
        LangGraphWriteDoc,
    )

    DOCUMENT_MODELS: list[type[Document]]

__all__ = [
    "AGENTS",
    "DIALOG_NODES",
    "DOCUMENT_MODELS",
    "LANGGRAPH_BLOBS",
    "LANGGRAPH_CHECKPOINTS",
    "LANGGRAPH_WRITES",
    "PAYLOADS",
    "POLICIES",
    "TAIL_KEYS",
    "TASKS",
    "TASK_PAGES",
    "AgentDoc",
    "DataKeyDoc",
    "DialogNodeDoc",
    "LangGraphBlobDoc",
    "LangGraphCheckpointDoc",
    "LangGraphWriteDoc",
    "PayloadDoc",
    "PolicyDoc",
    "TaskDoc",
    "TaskPageDoc",
    "header_from_document",
    "header_to_fields",
    "node_document",
    "task_document",
    "utcnow",
]

_CORE_MODELS = (
    "AgentDoc", "DataKeyDoc", "DialogNodeDoc", "PayloadDoc", "PolicyDoc", "TaskDoc", "TaskPageDoc",
)  # fmt: skip
_LANGGRAPH_MODELS = ("LangGraphBlobDoc", "LangGraphCheckpointDoc", "LangGraphWriteDoc")


def __getattr__(name: str) -> Any:
    """The Beanie models, imported when first asked for. `DOCUMENT_MODELS` is, as before,
    every collection's model, the LangGraph saver's included."""
    if name in _CORE_MODELS:
        from mindstore import document_models

        return getattr(document_models, name)
    if name in _LANGGRAPH_MODELS or name == "DOCUMENT_MODELS":
        from mindstore import document_models
        from mindstore.integrations import langgraph_documents

        if name == "DOCUMENT_MODELS":
            return document_models.document_models()
        return getattr(langgraph_documents, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
