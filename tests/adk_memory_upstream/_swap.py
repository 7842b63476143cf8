"""The swap: the vendored tests build `InMemoryMemoryService()`; here that name gives the
memory service of the running test's backend (`conftest.py` sets it): ADK's own
in-memory service (the reference) or mindstore's on the suite's `store` fixture."""

from __future__ import annotations

from collections.abc import Callable

from google.adk.memory.base_memory_service import BaseMemoryService

current: list[Callable[[], BaseMemoryService]] = []


def InMemoryMemoryService() -> BaseMemoryService:
    """The memory service under test (a new one per call, as the upstream tests expect)."""
    return current[-1]()
