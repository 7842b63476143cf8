"""Long-term memory items of agents (docs/integrations.md, "LangGraph store"): namespaced
JSON values with optional embeddings and expiry, one tenant's (and owner's) at a time.

`MemoryItems` is the read and write API over the ``memory_items`` collection that the
LangGraph store (`mindstore.integrations.langgraph_store`) and other readers (an MCP tool
that searches a namespace's memories) share; `rules` is its pure part.
"""

from __future__ import annotations

from mindstore.memory.items import MemoryItem, MemoryItems, StoredItem

__all__ = ["MemoryItem", "MemoryItems", "StoredItem"]
