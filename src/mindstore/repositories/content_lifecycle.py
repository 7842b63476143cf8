"""Content lifecycle verbs of the task repository: redaction and the live feed.

Both build on the engine (redaction is one guarded part patch; the feed reads ranges and
waits on the per-`Store` notifier), so they sit between the repository's reads and its
verbs. docs/lifecycle.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from mindstore.ids import check_name
from mindstore.model.messages import AnyMessage
from mindstore.model.plans_redact import plan_redact, redaction_of
from mindstore.repositories.feed import FeedEvent, follow, wait_for_change
from mindstore.repositories.retraction import Retraction
from mindstore.validation import check_optional_int, check_optional_text


class ContentLifecycle(Retraction):
    """`redact` and `watch`, between the reads and the verbs of the task repository."""

    # ------------------------------------------------------------------ lifecycle of content
    async def redact(self, task_id: str, message_id: str, reason: str | None = None,
                     part_index: int | None = None) -> AnyMessage:  # fmt: skip
        """Remove one message's content (or one part's), keeping a tombstone: id, role, tool
        pairing and usage stay, so the conversation's shape and analytics stay consistent.

        One guarded update; the message records when and why (never what). Payloads the
        redacted content referenced are deleted after the update; calling again (a replay, or
        after a crash between the two) finishes that and writes nothing else. docs/lifecycle.md.

        Args:
            task_id: The task.
            message_id: The message to redact.
            reason: Why (kept on the message; never the content).
            part_index: Redact only this part (0-based); None: the whole content.

        Returns:
            The redacted message.

        Raises:
            NotFound: No such task or message.
            ValidationError: A bad reason or part index (past the message's parts).

        Example:
            ```python
            await acme.tasks.redact(task.id, "u-1", reason="user asked")
            ```
        """
        check_optional_text(reason, "reason")
        check_optional_int(part_index, "part_index")
        message: AnyMessage = await self._part_verb(
            task_id, message_id, plan_redact, reason, part_index
        )
        record = redaction_of(message) or {}
        payload_ids = [i for i in record.get("payloads", []) if isinstance(i, str)]
        if payload_ids:
            await self._payloads.delete_many({"_id": {"$in": payload_ids}, "tenant": self.tenant})
        return message

    async def watch(self, task_id: str, since_id: str | None = None, *,
                    heartbeat: float | None = None) -> AsyncIterator[FeedEvent]:  # fmt: skip
        """The task's new messages and part updates, in order (`FeedEvent`s), forever.

        Resumable: `since_id` starts after that message (all messages if it is None or unknown,
        as `get_updates`). Wakes on this process's writes (embedded and server), and on a server
        also on other processes' writes through a change stream; `heartbeat` (seconds) adds a
        periodic re-check for servers without change streams.

        Args:
            task_id: The task.
            since_id: Start after this message.
            heartbeat: Seconds between re-checks when no change stream is available.

        Yields:
            `FeedEvent`s: `kind` (`"new"` or `"updated"`), `index` and `message`.

        Raises:
            NotFound: No such task in this view.
            ValidationError: `since_id` is not a message id.

        Example:
            ```python
            async for event in acme.tasks.watch(task.id, since_id="u-1"):
                print(event.kind, event.message.text())
            ```
        """
        start = 0
        if since_id:
            check_name(since_id, "since_id")
            found = await self._find_message(task_id, since_id)  # open page or sealed pages
            start = found[0] + 1 if found is not None else 0
        await self._read_header_doc(task_id)  # NotFound outside the scope
        with self._notifier.subscribe((self.tenant, task_id)) as event:
            stream = await self._open_change_stream(task_id)
            try:

                async def wait() -> None:
                    await wait_for_change(event, stream, heartbeat)

                async for change in follow(
                    lambda first: self.read_range(task_id, first), wait, start
                ):
                    yield change
            finally:
                if stream is not None:
                    await stream.close()

    async def _open_change_stream(self, task_id: str) -> Any:
        """A change stream on the task's document (server only; None on the embedded backend,
        which has none and is woken in process)."""
        watch = getattr(self._tasks, "watch", None)
        if watch is None or type(self._tasks).__module__.startswith("mindstore.backends"):
            return None
        try:
            return await watch([{"$match": {"documentKey._id": self._key(task_id)}}])
        except Exception:  # a standalone server has no change streams: in-process + heartbeat
            return None
