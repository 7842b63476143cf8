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
        """Declared for the type checker; `MindstoreSaver.aget_tuple` implements it.

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.
        """
        raise NotImplementedError

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Declared for the type checker; `MindstoreSaver.alist` implements it.

        Args:
            config: See `MindstoreSaver.alist`.
            filter: See `MindstoreSaver.alist`.
            before: See `MindstoreSaver.alist`.
            limit: See `MindstoreSaver.alist`.
        """
        raise NotImplementedError

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Declared for the type checker; `MindstoreSaver.aput` implements it.

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.
            checkpoint: The checkpoint.
            metadata: The checkpoint's metadata.
            new_versions: The channel versions this checkpoint writes.
        """
        raise NotImplementedError

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Declared for the type checker; `MindstoreSaver.aput_writes` implements it.

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.
            writes: See `MindstoreSaver.aput_writes`.
            task_id: See `MindstoreSaver.aput_writes`.
            task_path: See `MindstoreSaver.aput_writes`.
        """
        raise NotImplementedError

    async def adelete_thread(self, thread_id: str) -> None:
        """Declared for the type checker; `MindstoreSaver.adelete_thread` implements it.

        Args:
            thread_id: The thread.
        """
        raise NotImplementedError

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Declared for the type checker; `MindstoreSaver.adelete_for_runs` implements it.

        Args:
            run_ids: The runs' ids.
        """
        raise NotImplementedError

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Declared for the type checker; `MindstoreSaver.acopy_thread` implements it.

        Args:
            source_thread_id: The thread to copy.
            target_thread_id: The new thread's id.
        """
        raise NotImplementedError

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Declared for the type checker; `MindstoreSaver.aprune` implements it.

        Args:
            thread_ids: The threads.
            strategy: `"keep_latest"` or `"delete"`.
        """
        raise NotImplementedError

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The synchronous form of `aget_tuple`, run on the saver's loop (from a running
        event loop, use `aget_tuple`).

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.

        Returns:
            The `CheckpointTuple`, or None.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """
        return run_sync(self.aget_tuple(config), self._loop, "MindstoreSaver.get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The synchronous form of `alist`, run on the saver's loop (from a running
        event loop, use `alist`).

        Args:
            config: Limit to a thread, as in `alist`; None: every thread of the view.
            filter: Only checkpoints whose metadata has these values.
            before: Only checkpoints older than the one this config names.
            limit: At most this many.

        Returns:
            An iterator of `CheckpointTuple`s, newest first.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """

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
        """The synchronous form of `aput`, run on the saver's loop (from a running
        event loop, use `aput`).

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.
            checkpoint: The checkpoint.
            metadata: The checkpoint's metadata.
            new_versions: The channel versions this checkpoint writes.

        Returns:
            The config that names the stored checkpoint.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """
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
        """The synchronous form of `aput_writes`, run on the saver's loop (from a running
        event loop, use `aput_writes`).

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.
            writes: `(channel, value)` pairs.
            task_id: The id of the LangGraph task (node run) that wrote them.
            task_path: The task's path in the graph.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """
        run_sync(
            self.aput_writes(config, writes, task_id, task_path),
            self._loop,
            "MindstoreSaver.put_writes",
        )

    def delete_thread(self, thread_id: str) -> None:
        """The synchronous form of `adelete_thread`, run on the saver's loop (from a running
        event loop, use `adelete_thread`).

        Args:
            thread_id: The thread.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """
        run_sync(self.adelete_thread(thread_id), self._loop, "MindstoreSaver.delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """The synchronous form of `adelete_for_runs`, run on the saver's loop (from a running
        event loop, use `adelete_for_runs`).

        Args:
            run_ids: The runs' ids.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """
        run_sync(self.adelete_for_runs(run_ids), self._loop, "MindstoreSaver.delete_for_runs")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """The synchronous form of `acopy_thread`, run on the saver's loop (from a running
        event loop, use `acopy_thread`).

        Args:
            source_thread_id: The thread to copy.
            target_thread_id: The new thread's id.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """
        run_sync(
            self.acopy_thread(source_thread_id, target_thread_id),
            self._loop,
            "MindstoreSaver.copy_thread",
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """The synchronous form of `aprune`, run on the saver's loop (from a running
        event loop, use `aprune`).

        Args:
            thread_ids: The threads.
            strategy: `"keep_latest"` or `"delete"`.

        Raises:
            RuntimeError: Called from a running event loop (a sync call there would block it).
        """
        run_sync(self.aprune(thread_ids, strategy=strategy), self._loop, "MindstoreSaver.prune")
