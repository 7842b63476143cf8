"""Reporting each embedded command to the `CommandRecorder`, as a server round trip would be.

Every operation of the embedded backend is one `Operation`: `begin` encodes the command as
sent (its size is `bytes_sent`) and returns what the server decodes; `finish` adds the
reply's size and hands the record to the recorder; `fail` records the error reply instead.
A cursor's getMore and killCursors are folded into the record of the command that opened
it (`extra_round_trip`), as `RecorderListener` does on a real server.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..recorder import (
    IGNORED_COMMANDS,
    CommandRecorder,
    RecordedCommand,
    describe_command,
)
from .codec import size_of, to_server

__all__ = ["CommandReporter", "Operation"]


@dataclass(slots=True)
class Operation:
    """One command in flight and its record (`counted`: False for ignored commands)."""

    record: RecordedCommand
    counted: bool = True
    started: float = field(default_factory=time.perf_counter)


class CommandReporter:
    """Builds the `RecordedCommand` of every embedded operation and passes it on.

    `recorder` may be None (nothing is kept) and may be replaced at any time.
    """

    def __init__(self, recorder: CommandRecorder | None = None) -> None:
        self.recorder = recorder

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
        return decoded, Operation(record, counted)

    def finish(self, op: Operation, reply: Mapping[str, Any] | int | None = None) -> None:
        """The command succeeded with `reply` (a document, its size, or None when the
        reply's size was already added, as for cursors)."""
        if isinstance(reply, int):
            op.record.bytes_received += reply
        elif reply is not None:
            op.record.bytes_received += size_of(reply)
        self._record(op)

    def fail(self, op: Operation, exc: BaseException) -> None:
        """The command failed with `exc`: record the error reply a server would send."""
        op.record.error = f"{type(exc).__name__}: {exc}"
        code = getattr(exc, "code", None)
        op.record.bytes_received += size_of({"ok": 0.0, "errmsg": str(exc), "code": code or 0})
        self._record(op)

    def extra_round_trip(
        self, op: Operation, command: Mapping[str, Any], reply_size: int, n_returned: int = 0
    ) -> None:
        """A getMore or killCursors of the cursor `op` opened: one more round trip."""
        op.record.bytes_sent += size_of(command)
        op.record.bytes_received += reply_size
        op.record.round_trips += 1
        op.record.n_returned += n_returned

    def _record(self, op: Operation) -> None:
        op.record.duration_ms = (time.perf_counter() - op.started) * 1000
        if op.counted and self.recorder is not None:
            self.recorder.record(op.record)
