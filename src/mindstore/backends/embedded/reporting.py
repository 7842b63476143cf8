"""Reporting each embedded command as a server round trip would be seen: to the
`CommandRecorder`, and to pymongo command listeners.

Every operation of the embedded backend is one `Operation`: `begin` encodes the command as
sent (its size is `bytes_sent`) and returns what the server decodes; `finish` adds the
reply's size and hands the record to the recorder; `fail` records the error reply instead.
A cursor's getMore and killCursors are folded into the record of the command that opened
it (`extra_round_trip`), as `RecorderListener` does on a real server.

Listeners. pymongo `CommandListener`s given to the client (and those registered
process-wide with `pymongo.monitoring.register`, as OpenTelemetry's pymongo
instrumentation does) receive real `CommandStartedEvent` / `CommandSucceededEvent` /
`CommandFailedEvent` objects for every command the recorder counts, getMore and
killCursors included, with the command document as sent, the reply a server would send
and the time mongomock took; the connection is ``("embedded", 0)``. Events are only built
when there is a listener. A listener that raises is logged and does not fail the command,
as in pymongo.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pymongo import monitoring

from ..recorder import CommandRecorder, RecordedCommand
from ..wire import IGNORED_COMMANDS, describe_command
from .codec import size_of, to_server

__all__ = ["ADDRESS", "CommandReporter", "Operation", "ReplySource", "registered_listeners"]

logger = logging.getLogger(__name__)

#: The "server address" events of the embedded backend carry.
ADDRESS = ("embedded", 0)
_REQUEST_IDS = itertools.count(1)

#: A reply for listeners: the document, or a function building it (only called if needed).
ReplySource = Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None


@dataclass(slots=True)
class Operation:
    """One command in flight and its record (`counted`: False for ignored commands)."""

    record: RecordedCommand
    counted: bool = True
    started: float = field(default_factory=time.perf_counter)
    request_id: int = 0


def registered_listeners() -> list[monitoring.CommandListener]:
    """Command listeners registered process-wide (`pymongo.monitoring.register`), which
    pymongo adds to every client it creates."""
    registered = getattr(monitoring, "_LISTENERS", None)
    return list(getattr(registered, "command_listeners", None) or [])


class CommandReporter:
    """Builds the `RecordedCommand` of every embedded operation and passes it on.

    `recorder` may be None (nothing is kept) and may be replaced at any time; `listeners`
    are the pymongo command listeners to feed.
    """

    def __init__(
        self,
        recorder: CommandRecorder | None = None,
        listeners: Iterable[monitoring.CommandListener] = (),
    ) -> None:
        self.recorder = recorder
        self.listeners = list(listeners)

    def begin(
        self, name: str, command: Mapping[str, Any], database: str, *, wire: bool = True
    ) -> tuple[dict[str, Any], Operation]:
        """Encode `command` as sent to `database`; return what the server decodes.

        ``wire=False`` (database-level commands mongomock runs from the caller's values):
        only the size is computed, the command is not round-tripped through BSON, and
        handshake/`admin` commands are not counted, as `RecorderListener` ignores them.
        """
        sent = {**command, "$db": database}
        if wire:
            decoded, size = to_server(sent)
            counted = True
        else:
            decoded, size = sent, size_of(sent)
            counted = database != "admin" and name.lower() not in IGNORED_COMMANDS
        record = RecordedCommand(
            name=name,
            database=database,
            bytes_sent=size,
            backend="embedded",
            **describe_command(name, decoded),
        )
        op = Operation(record, counted)
        if self.listeners and counted:
            op.request_id = self._started(decoded, database)
        return decoded, op

    def finish(
        self,
        op: Operation,
        reply: Mapping[str, Any] | int | None = None,
        *,
        event_reply: ReplySource = None,
    ) -> None:
        """The command succeeded with `reply` (a document, its size, or None when the
        reply's size was already added, as for cursors). `event_reply`: the reply document
        for listeners when `reply` is not one."""
        if isinstance(reply, int):
            op.record.bytes_received += reply
        elif reply is not None:
            op.record.bytes_received += size_of(reply)
        self._done(op)
        if self.listeners and op.counted:
            source = event_reply if event_reply is not None else reply
            document = _document(source if not isinstance(source, int) else None)
            self._succeeded(op.record, op.request_id, document)
        self._record(op)

    def fail(self, op: Operation, exc: BaseException) -> None:
        """The command failed with `exc`: record the error reply a server would send."""
        op.record.error = f"{type(exc).__name__}: {exc}"
        code = getattr(exc, "code", None)
        failure = {"ok": 0.0, "errmsg": str(exc), "code": code or 0}
        op.record.bytes_received += size_of(failure)
        self._done(op)
        if self.listeners and op.counted:
            event = monitoring.CommandFailedEvent(
                _dt.timedelta(milliseconds=op.record.duration_ms),
                failure,
                op.record.name,
                op.request_id,
                ADDRESS,
                op.request_id,
                database_name=op.record.database or "",
            )
            self._publish("failed", event)
        self._record(op)

    def extra_round_trip(
        self,
        op: Operation,
        command: Mapping[str, Any],
        reply_size: int,
        n_returned: int = 0,
        *,
        event_reply: ReplySource = None,
    ) -> None:
        """A getMore or killCursors of the cursor `op` opened: one more round trip.

        `command` includes its ``$db``; `event_reply` is what listeners are shown."""
        op.record.bytes_sent += size_of(command)
        op.record.bytes_received += reply_size
        op.record.round_trips += 1
        op.record.n_returned += n_returned
        if self.listeners and op.counted:
            database = str(command.get("$db", op.record.database or ""))
            started = time.perf_counter()
            request_id = self._started(dict(command), database)
            name = next(iter(command))
            event = monitoring.CommandSucceededEvent(
                _dt.timedelta(seconds=time.perf_counter() - started),
                _document(event_reply),
                name,
                request_id,
                ADDRESS,
                request_id,
                database_name=database,
            )
            self._publish("succeeded", event)

    # -- internals
    @staticmethod
    def _done(op: Operation) -> None:
        op.record.duration_ms = (time.perf_counter() - op.started) * 1000

    def _record(self, op: Operation) -> None:
        if op.counted and self.recorder is not None:
            self.recorder.record(op.record)

    def _started(self, command: dict[str, Any], database: str) -> int:
        request_id = next(_REQUEST_IDS)
        event = monitoring.CommandStartedEvent(command, database, request_id, ADDRESS, request_id)
        self._publish("started", event)
        return request_id

    def _succeeded(self, record: RecordedCommand, request_id: int, reply: dict[str, Any]) -> None:
        event = monitoring.CommandSucceededEvent(
            _dt.timedelta(milliseconds=record.duration_ms),
            reply,
            record.name,
            request_id,
            ADDRESS,
            request_id,
            database_name=record.database or "",
        )
        self._publish("succeeded", event)

    def _publish(self, method: str, event: Any) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, method)(event)
            except Exception:
                logger.exception(
                    "command listener %r failed on %s %s", listener, event.command_name, method
                )


def _document(source: ReplySource) -> dict[str, Any]:
    """The reply document listeners are shown (a copy: they may keep or change it)."""
    if source is None:
        return {"ok": 1.0}
    return dict(source() if callable(source) else source)
