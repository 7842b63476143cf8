"""Content lifecycle verbs of the task repository: redaction and the live feed.

Both are built from the other parts of the repository: redaction is one guarded part
patch (the writer's `part_verb`) and a payload delete; the feed reads ranges (the port's
`read_range`) and waits on the per-`Store` notifier. docs/lifecycle.md.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from mindstore.backends.proxy import unwrap
from mindstore.ids import check_name
from mindstore.model.messages import AnyMessage
from mindstore.model.plans.redaction import (
    covers,
    plan_redact,
    plan_withhold_summary,
    redaction_of,
)
from mindstore.pipelines.context import compression_messages_pipeline
from mindstore.repositories.engine import TaskWriter
from mindstore.repositories.feed import FeedEvent, follow, wait_for_change
from mindstore.repositories.port import TaskPort
from mindstore.search.index import forget_message
from mindstore.validation import check_optional_int, check_optional_text


class ContentLifecycle:
    """`redact` and `watch` over the port and the writer (`TaskRepository` documents them)."""

    def __init__(self, port: TaskPort, writer: TaskWriter) -> None:
        self.port = port
        self.scope = port.scope
        self.writer = writer

    # ------------------------------------------------------------------ lifecycle of content
    async def redact(self, task_id: str, message_id: str, reason: str | None = None,
                     part_index: int | None = None) -> AnyMessage:  # fmt: skip
        """Remove one message's content (or one part's), keeping a tombstone: id, role, tool
        pairing and usage stay, so the conversation's shape and analytics stay consistent."""
        check_optional_text(reason, "reason")
        check_optional_int(part_index, "part_index")
        message: AnyMessage = await self.writer.part_verb(
            task_id, message_id, plan_redact, reason, part_index
        )
        record = redaction_of(message) or {}
        payload_ids = [i for i in record.get("payloads", []) if isinstance(i, str)]
        if payload_ids:
            await self.scope.payloads.delete_many(
                {"_id": {"$in": payload_ids}, "tenant": self.scope.tenant}
            )
        # the search index forgets it now, not at the next search (mindstore.search)
        await forget_message(self.scope.database, self.scope.tenant, task_id, message_id)
        await self._withhold_summaries(task_id, message_id)
        return message

    async def _withhold_summaries(self, task_id: str, message_id: str) -> None:
        """Withhold each compression summary written from the redacted message (one guarded
        patch per compression message that still holds one). Like the payloads, these
        follow the redaction's own update: a crash in between leaves them to the next call
        of `redact`, which redacts nothing again and finishes them. A compression message
        only covers messages before it, so nothing is read when the redacted message is
        the task's last (as the header this store just wrote says)."""
        cached = self.scope.cached(task_id)
        last = cached.header.tail if cached is not None else None
        if last is not None and last.id == message_id:
            return
        stored = await self.port.filtered(task_id, compression_messages_pipeline, strict=False)
        for compression in await self.port.decode(task_id, stored):  # summaries opened
            document = compression.to_dict()
            parts = document.get("content")
            if isinstance(parts, list) and any(
                isinstance(part, dict) and covers(part, message_id) for part in parts
            ):
                await self.writer.part_verb(
                    task_id, compression.id, plan_withhold_summary, message_id
                )

    async def watch(self, task_id: str, since_id: str | None = None, *,
                    heartbeat: float | None = None) -> AsyncGenerator[FeedEvent, None]:  # fmt: skip
        """The task's new messages and part updates, in order (`FeedEvent`s), forever."""
        start = 0
        if since_id:
            check_name(since_id, "since_id")
            found = await self.port.find_message(task_id, since_id)  # open page or sealed pages
            start = found[0] + 1 if found is not None else 0
        await self.port.header_document(task_id)  # NotFound outside the scope
        with self.scope.notifier.subscribe((self.scope.tenant, task_id)) as event:
            stream = await self._open_change_stream(task_id)
            try:

                async def wait() -> None:
                    await wait_for_change(event, stream, heartbeat)

                async for change in follow(
                    lambda first: self.port.read_range(task_id, first), wait, start
                ):
                    yield change
            finally:
                if stream is not None:
                    await stream.close()

    async def _open_change_stream(self, task_id: str) -> Any:
        """A change stream on the task's document (server only; None on the embedded backend,
        which has none and is woken in process)."""
        watch = getattr(self.scope.tasks, "watch", None)
        if watch is None or type(unwrap(self.scope.tasks)).__module__.startswith(
            "mindstore.backends"
        ):
            return None
        try:
            return await watch([{"$match": {"documentKey._id": self.scope.key(task_id)}}])
        except Exception:  # a standalone server has no change streams: in-process + heartbeat
            return None
