"""`tasks.stream(task_id, message_id)`: write a model's token deltas into one message.

    async with acme.tasks.stream(task_id, assistant.id) as s:
        async for event in model_stream:
            await s.text(event.delta)          # or s.reasoning(delta), s.signature(sig)

Deltas are buffered and written together: when `flush_bytes` bytes are waiting, or
`flush_ms` milliseconds after the oldest waiting delta arrived (a timer writes them even
if no further delta comes), whichever is first; and on leaving the block, also when it
is left by an exception. Each write is one guarded update of the parts that changed,
carrying only the text that arrived since the last write (a chunk, guarded by the count
of chunks stored: `mindstore.model.streaming`), through the engine every verb uses
(version guard, per-task lock, header cache, retries), so a write from this process that
wrote last is one round trip. A write that raised may have landed: the next one first
reads the message and settles it (`_settle`), so no text is lost or written twice. The
stored text is always a prefix of the deltas' concatenation, and equal to it once the
block is left; a crash loses at most what arrived in the last `flush_ms`, and never more
than `flush_bytes` bytes.

While a stream is open, it owns the parts it grows; other verbs may still append parts
to the message: a stream places each new part from the message as last seen (the header
cache keeps the last message this process wrote; another writer in between moves the
task's version, so the write matches nothing and is placed again after a read), so it
never overwrites one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mindstore.errors import ValidationError
from mindstore.ids import check_key, check_name
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage
from mindstore.model.plans import Plan
from mindstore.model.streaming import (
    PartWrite,
    StreamKind,
    StreamState,
    check_delta,
    check_streamable,
    plan_stream_write,
)
from mindstore.operations import Resilience, operation
from mindstore.payloads import Offloader
from mindstore.validation import check_int

if TYPE_CHECKING:
    from mindstore.repositories.tasks import TaskRepository

logger = logging.getLogger(__name__)

DEFAULT_FLUSH_MS = 200
DEFAULT_FLUSH_BYTES = 1024


class MessageStream:
    """Coalescing writer of one message's streamed parts (use it as `async with`)."""

    def __init__(
        self,
        tasks: TaskRepository,
        task_id: str,
        message_id: str | None = None,
        *,
        flush_ms: int = DEFAULT_FLUSH_MS,
        flush_bytes: int = DEFAULT_FLUSH_BYTES,
    ) -> None:
        self.flush_ms = check_int(flush_ms, "flush_ms", maximum=3_600_000)
        self.flush_bytes = check_int(flush_bytes, "flush_bytes", minimum=1)
        self.tasks = tasks
        self.task_id = check_key(task_id, "task id")
        self.message_id = None if message_id is None else check_name(message_id, "message id")
        self.state = StreamState()
        self.writes = 0
        self._message: AnyMessage | None = None
        self._index: int | None = None
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._oldest: float | None = None
        self._closed = False
        self._unsure: tuple[StreamState, dict[int, PartWrite]] | None = None
        """A write that raised and may have landed: settled (`_settle`) before the next."""
        self.push_chunks = True
        """Append each write's new text as a chunk (False: send the whole text every write,
        as streams did before chunks; the benchmark measures both in one run)."""

    # -- lifecycle ----------------------------------------------------------------------
    @operation("tasks.stream")
    async def __aenter__(self) -> Self:
        if self.message_id is None:
            created = await self.tasks.add_assistant_message(self.task_id)
            self.message_id = created.id
        index, message = await self.tasks.port.message_at(self.task_id, self.message_id)
        self._message, self._index = check_streamable(message), index
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        _tb: TracebackType | None) -> None:  # fmt: skip
        await self._stop_timer()
        self._closed = True
        self.state.close()
        try:
            while (
                self.state.needs_write and self._message is not None
            ):  # and what came during a write
                await self.flush()
        except Exception:
            if error is None:
                raise
            logger.warning("stream into %r of task %r: the final write failed after an error",
                           self.message_id, self.task_id, exc_info=True)  # fmt: skip

    # -- deltas ---------------------------------------------------------------------------
    async def text(self, delta: str) -> None:
        """Append `delta` to the message's current text part (a new one after reasoning)."""
        await self._add("text", check_delta(delta))

    async def reasoning(self, delta: str, *, signature: str | None = None) -> None:
        """Append `delta` to the current reasoning part (a new one after text)."""
        await self._add("reasoning", check_delta(delta))
        if signature is not None:
            self.state.sign(check_delta(signature, "signature"))

    async def signature(self, signature: str) -> None:
        """The current reasoning part's signature (written with the next write)."""
        self.state.sign(check_delta(signature, "signature"))

    @property
    def message(self) -> AnyMessage | None:
        """The message as this stream last wrote it (None before the block is entered)."""
        return self._message

    async def _add(self, kind: StreamKind, delta: str) -> None:
        self._raise_failure()
        if self._message is None or self._closed:
            raise ValidationError(
                "stream: use it inside `async with` (text and reasoning go to an open stream)"
            )
        self.state.add(kind, delta)
        if self._oldest is None:
            self._oldest = time.monotonic()
        due = self.flush_ms == 0 or time.monotonic() - self._oldest >= self.flush_ms / 1000
        if self.state.pending_bytes >= self.flush_bytes or due:
            await self.flush()
        elif self._timer is None:
            self._timer = asyncio.create_task(self._flush_later())

    # -- writing --------------------------------------------------------------------------
    @property
    def resilience(self) -> Resilience:
        """The task repository's retry policy and ledger (`flush` is an operation)."""
        return self.tasks.resilience

    @operation("stream.flush")
    async def flush(self) -> None:
        """Write everything pending now (one guarded update; nothing if nothing is pending).

        After it raised `Unavailable`, call it again (or leave the block): the stream
        keeps what is pending and first settles the write whose reply was lost."""
        self._raise_failure()
        async with self._lock:
            if self._unsure is not None:
                await self._settle(*self._unsure)
            if not self.state.needs_write or self._message is None or self._index is None:
                return
            placing = self.state.places_parts
            written = self.state.snapshot()
            outcome: dict[str, Any] = {}

            def plan(
                header: TaskHeader, located: dict[str, Any] | None, offloader: Offloader
            ) -> Plan:
                base = located["message"] if located is not None else self._message
                index = located["index"] if located is not None else self._index
                assert base is not None and index is not None
                # sizes measured on what the write stores (under a keyring each chunk is
                # sealed on its own, bound to its index), with a fresh offloader so
                # measuring registers no payload
                measure = self.tasks.port.scope.offloader(self.task_id)
                planned, stored, writes = plan_stream_write(
                    header,
                    self.task_id,
                    index,
                    base,
                    written,
                    transform=offloader.transform_document,
                    push_limit=offloader.threshold if self.push_chunks else None,
                    measure=measure.transform_document,
                )
                outcome.update(stored=stored, writes=writes)
                return planned

            try:
                await self.tasks.writer.mutate(
                    self.task_id, plan, locate=self.message_id if placing else None
                )
            except BaseException:
                if "writes" in outcome:  # it may have reached the store: ask before the next
                    self._unsure = (written, outcome["writes"])
                raise
            self._done(written, outcome["writes"], outcome["stored"])
            timer = self._timer
            if timer is not None and timer is not asyncio.current_task():
                timer.cancel()  # what it was to write is written; the next delta starts a new one
                self._timer = None

    def _done(self, written: StreamState, writes: dict[int, PartWrite], stored: AnyMessage) -> None:
        self.state.committed(written, writes)
        self._message = stored
        self._oldest = time.monotonic() if self.state.pending_bytes else None
        self.writes += 1

    async def _settle(self, written: StreamState, writes: dict[int, PartWrite]) -> None:
        """After a write that raised (a lost reply, a timeout): read the message and take
        the write as done if it landed, so it is neither lost nor sent twice (the chunk
        guard refuses a second push of it anyway, module `mindstore.model.streaming`)."""
        assert self.message_id is not None
        message = await self.tasks.get_message(self.task_id, self.message_id)
        index, stored = await self.tasks.port.message_at(self.task_id, self.message_id)
        self._unsure = None
        if self.state.landed(written, writes, message):
            self._done(written, writes, stored)
        else:
            self._message, self._index = check_streamable(stored), index

    async def _flush_later(self) -> None:
        try:
            await asyncio.sleep(self.flush_ms / 1000)
            self._timer = None
            await self.flush()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failure = exc
        finally:
            if self._timer is asyncio.current_task():
                self._timer = None

    async def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
