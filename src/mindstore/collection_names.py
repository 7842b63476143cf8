"""The name of every collection mindstore writes (pure constants, no I/O, no Beanie).

The registry (`mindstore.registry`) says how each is keyed and what follows it; the
Beanie document models (`mindstore.document_models`, and the LangGraph saver's in
`mindstore.integrations.langgraph_documents`) take their `Settings.name` from here, so
code that only needs a name never loads Beanie.
"""

from __future__ import annotations

__all__ = [
    "AGENTS",
    "DIALOG_NODES",
    "LANGGRAPH_BLOBS",
    "LANGGRAPH_CHECKPOINTS",
    "LANGGRAPH_WRITES",
    "MEMORY_ITEMS",
    "PAYLOADS",
    "POLICIES",
    "SEARCH_ENTRIES",
    "SEARCH_POSTINGS",
    "SEARCH_TASKS",
    "SEARCH_VECTORS",
    "TASKS",
    "TASK_PAGES",
]

TASKS = "tasks"
DIALOG_NODES = "dialog_nodes"
PAYLOADS = "payloads"
AGENTS = "agents"
LANGGRAPH_CHECKPOINTS = "langgraph_checkpoints"
LANGGRAPH_WRITES = "langgraph_writes"
LANGGRAPH_BLOBS = "langgraph_blobs"
POLICIES = "policies"
TASK_PAGES = "task_pages"
DATA_KEYS = "data_keys"
SEARCH_ENTRIES = "search_entries"
SEARCH_TASKS = "search_tasks"
SEARCH_POSTINGS = "search_postings"
MEMORY_ITEMS = "memory_items"
SEARCH_VECTORS = "search_vectors"
