"""The LangGraph saver's sync methods: each runs its async twin (`integrations._sync`).

Kept apart from `MindstoreSaver` (which lists `SyncForms` first among its bases, so these
replace `BaseCheckpointSaver`'s raising defaults); the async methods they call are the
saver's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from mindstore.integrations._sync import run_sync


class SyncForms:
    """Sync forms of the saver's async methods (those are declared here for the checker)."""

    _loop: asyncio.AbstractEventLoop | None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        raise NotImplementedError

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        raise NotImplementedError

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        raise NotImplementedError

    async def adelete_thread(self, thread_id: str) -> None:
        raise NotImplementedError

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        raise NotImplementedError

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        raise NotImplementedError

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        raise NotImplementedError

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return run_sync(self.aget_tuple(config), self._loop, "MindstoreSaver.get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [
                item async for item in self.alist(config, filter=filter, before=before, limit=limit)
            ]

        return iter(run_sync(collect(), self._loop, "MindstoreSaver.list"))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return run_sync(
            self.aput(config, checkpoint, metadata, new_versions), self._loop, "MindstoreSaver.put"
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run_sync(
            self.aput_writes(config, writes, task_id, task_path),
            self._loop,
            "MindstoreSaver.put_writes",
        )

    def delete_thread(self, thread_id: str) -> None:
        run_sync(self.adelete_thread(thread_id), self._loop, "MindstoreSaver.delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        run_sync(self.adelete_for_runs(run_ids), self._loop, "MindstoreSaver.delete_for_runs")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        run_sync(
            self.acopy_thread(source_thread_id, target_thread_id),
            self._loop,
            "MindstoreSaver.copy_thread",
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        run_sync(self.aprune(thread_ids, strategy=strategy), self._loop, "MindstoreSaver.prune")
