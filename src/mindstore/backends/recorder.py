"""Recording what mindstore sends to the database: bytes and round trips per command.

Wall-clock time on the embedded backend says little about the cost on a server (mongomock
copies whole documents on every update), so tests and benchmarks compare *what is sent*:
the BSON size of each command, the size of its reply and the number of round trips.

Two producers fill the same `CommandRecorder` with comparable `RecordedCommand`s:

* the embedded backend (`mindstore.backends.embedded`) builds, for every operation, the
  command document pymongo would put on the wire (``{"update": coll, "ordered": True,
  "updates": [{"q": ..., "u": ..., "multi": False, "upsert": False}], "$db": db}``, ...)
  and the reply a server would send back;
* `RecorderListener`, a `pymongo.monitoring.CommandListener` registered on a real
  `AsyncMongoClient`, converts the driver's command events.

Comparable figures: per-connection gossip the driver adds to every command on a real
server (`lsid`, `$clusterTime`, `txnNumber`, `$readPreference`) and the server adds to
every reply (`$clusterTime`, `operationTime`, `electionId`, `opTime`, ...) does not depend
on what mindstore asked for; the listener leaves it out of `bytes_sent`/`bytes_received`
and reports it in `overhead_bytes` instead (pass ``strip_overhead=False`` for raw sizes).
A cursor's `getMore` and `killCursors` commands are folded into the record of the
`find`/`aggregate` that opened it: one record per logical operation, `round_trips`
counting its batches, on both backends.

Footprint. A recorder is always attached to a backend, so by default it keeps little: the
last `max_records` commands with their sizes, counters and durations, but not their
filters, updates, pipelines or documents (a 20 KB message appended is not kept alive by
the recorder). Code that inspects what was sent opts in: ``CommandRecorder(
keep_payloads=True)`` for everything, or ``recorder.capture(payloads=True)`` for the
commands of one block.

Slow commands. A command that took `slow_ms` or longer (100 ms by default, as MongoDB's
own ``slowms``) is logged at INFO on the ``mindstore.backends.recorder`` logger: name,
collection, duration, sizes and the code that sent it, never its payload.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import sysconfig
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

from pymongo import monitoring

from .wire import (
    COMMAND_OVERHEAD_FIELDS,
    IGNORED_COMMANDS,
    LISTENER_TYPES,
    REPLY_OVERHEAD_FIELDS,
    EventListener,
    bson_size,
    cursor_info,
    describe_command,
    split_overhead,
)

__all__ = [
    "IGNORED_COMMANDS",
    "LISTENER_TYPES",
    "CommandLog",
    "CommandRecorder",
    "EventListener",
    "RecordedCommand",
    "RecorderListener",
    "bson_size",
    "describe_command",
    "observe_all",
]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class RecordedCommand:
    """One logical database command (a cursor's getMore batches are folded in).

    `bytes_sent` is the BSON size of the command document as sent (with `$db`),
    `bytes_received` the BSON size of the reply documents, `round_trips` the number of
    request/reply exchanges (1, plus one per getMore/killCursors of a cursor).
    """

    name: str
    collection: str | None = None
    filter: dict[str, Any] | None = None
    update: dict[str, Any] | list[Any] | None = None
    pipeline: list[Any] | None = None
    projection: dict[str, Any] | None = None
    #: the sort of a find or findAndModify, ``[(field, direction), ...]`` in its order
    sort: list[tuple[str, Any]] | None = None
    #: the field a distinct reads
    key: str | None = None
    documents: list[Any] | None = None
    bytes_sent: int = 0
    bytes_received: int = 0
    round_trips: int = 1
    database: str | None = None
    #: number of statements in a write command (updates/deletes/documents)
    statements: int = 1
    #: documents returned (cursor batches, findAndModify value)
    n_returned: int = 0
    #: error message if the command failed
    error: str | None = None
    #: bytes of driver/server gossip left out of bytes_sent/bytes_received (real server only)
    overhead_bytes: int = 0
    backend: Literal["embedded", "mongodb"] = "embedded"
    #: every statement of an update/delete command (``{"q", "u", "multi"}``, with ``"sort"``
    #: when an update names one, or ``{"q", "limit"}``); `filter`/`update` above only
    #: describe the first one
    writes: list[dict[str, Any]] | None = None
    #: ``file:line`` of the code that sent the command (first frame outside the driver,
    #: the adapters and the standard library); set on the copies `observe_all` sees
    origin: str | None = None
    #: milliseconds from sending the command to its reply (a cursor's first batch only)
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def drop_payloads(self) -> None:
        """Forget what was sent (filters, updates, pipelines, documents); keep the figures."""
        self.filter = self.update = self.pipeline = None
        self.documents = self.projection = self.writes = self.sort = None


class CommandLog(list[RecordedCommand]):
    """A list of recorded commands with totals."""

    @property
    def bytes_sent(self) -> int:
        return sum(c.bytes_sent for c in self)

    @property
    def bytes_received(self) -> int:
        return sum(c.bytes_received for c in self)

    @property
    def round_trips(self) -> int:
        return sum(c.round_trips for c in self)

    def names(self) -> list[str]:
        return [c.name for c in self]

    def by_name(self, name: str) -> CommandLog:
        return CommandLog(c for c in self if c.name == name)

    def summary(self) -> dict[str, int]:
        return {
            "commands": len(self),
            "round_trips": self.round_trips,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
        }


class CommandRecorder:
    """Collects `RecordedCommand`s from a backend.

    `records` keeps the last `max_records` commands (None: unbounded), sizes and counters
    only unless ``keep_payloads=True``. `capture()` collects every command recorded inside
    a ``with`` block, whatever the bound, and ``capture(payloads=True)`` keeps their
    payloads in that log. A recorder is shared by all coroutines using the backend, so a
    capture sees their commands too. ``enabled=False`` keeps nothing (slow commands are
    still logged). `slow_ms`: log commands that take at least this long (None: never).
    """

    def __init__(
        self,
        *,
        max_records: int | None = 10_000,
        keep_payloads: bool = False,
        enabled: bool = True,
        slow_ms: float | None = 100.0,
    ) -> None:
        self.records: CommandLog = CommandLog()
        self.max_records = max_records
        self.keep_payloads = keep_payloads
        self.enabled = enabled
        self.slow_ms = slow_ms
        self._sinks: list[tuple[CommandLog, bool]] = []
        #: commands recorded while a payload capture was open: stripped when none is
        self._unstripped: list[RecordedCommand] = []

    def record(self, command: RecordedCommand) -> None:
        if _OBSERVERS:
            # a copy: payloads may be dropped from the recorded object below
            seen = dataclasses.replace(command, origin=command.origin or _origin())
            for observer in _OBSERVERS:
                observer.append(seen)
        if self.slow_ms is not None and command.duration_ms >= self.slow_ms:
            _log_slow(command)
        if not self.enabled:
            return
        if not self.keep_payloads:
            if any(payloads for _, payloads in self._sinks):
                self._unstripped.append(command)
            else:
                command.drop_payloads()
        self.records.append(command)
        if self.max_records is not None and len(self.records) > self.max_records:
            del self.records[: len(self.records) - self.max_records]
        for sink, _ in self._sinks:
            sink.append(command)

    def clear(self) -> None:
        self.records.clear()

    @contextlib.contextmanager
    def capture(self, *, payloads: bool | None = None) -> Iterator[CommandLog]:
        """``with recorder.capture() as log: ...`` -- `log` lists the commands of the block.

        `payloads`: keep what each command sent (filters, updates, ...) in `log`; default:
        as the recorder does (`keep_payloads`).
        """
        keep = self.keep_payloads if payloads is None else payloads
        log = CommandLog()
        entry = (log, keep)
        self._sinks.append(entry)
        try:
            yield log
        finally:
            self._sinks.remove(entry)
            if keep and not self.keep_payloads:
                # the caller's log keeps copies with payloads; the shared records lose them
                log[:] = [dataclasses.replace(c) for c in log]
                if not any(payloads for _, payloads in self._sinks):
                    for command in self._unstripped:
                        command.drop_payloads()
                    self._unstripped.clear()

    # totals over `records`
    @property
    def bytes_sent(self) -> int:
        return self.records.bytes_sent

    @property
    def bytes_received(self) -> int:
        return self.records.bytes_received

    @property
    def round_trips(self) -> int:
        return self.records.round_trips

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"<CommandRecorder {len(self.records)} commands>"


def _log_slow(command: RecordedCommand) -> None:
    """Log a slow command: what and where from, never what it carried."""
    if not logger.isEnabledFor(logging.INFO):
        return
    target = f"{command.database}.{command.collection}" if command.collection else command.database
    logger.info(
        "slow %s on %s: %.1f ms, %d round trip(s), %d bytes sent, %d received%s (from %s)",
        command.name,
        target,
        command.duration_ms,
        command.round_trips,
        command.bytes_sent,
        command.bytes_received,
        f", failed: {command.error}" if command.error else "",
        command.origin or _origin() or "unknown",
    )


_OBSERVERS: list[CommandLog] = []
"""Logs fed by every recorder in the process (see `observe_all`)."""

_PLUMBING = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,  # adapters and this recorder
    sysconfig.get_paths()["stdlib"] + os.sep,
    sysconfig.get_paths()["purelib"] + os.sep,  # pymongo, beanie, mongomock, pytest
    "<",  # <frozen ...>, <string>
)


def _origin() -> str | None:
    """``file:line`` of the first caller that is not plumbing (see `RecordedCommand.origin`)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_PLUMBING) and "site-packages" not in path:
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return None


@contextlib.contextmanager
def observe_all() -> Iterator[CommandLog]:
    """Every command any `CommandRecorder` receives inside the block, payloads included.

    For process-wide checks such as the test suite's operator audit: a test may open
    several stores, and a recorder may be disabled or drop payloads; the observer still
    sees each command whole, with its `origin` (who sent it). Not for production use: it
    keeps every command and walks the stack for each.
    """
    log = CommandLog()
    _OBSERVERS.append(log)
    try:
        yield log
    finally:
        _OBSERVERS.remove(log)


# --------------------------------------------------------------------------- real server


class RecorderListener(monitoring.CommandListener):
    """Feeds a `CommandRecorder` from a real server's command events.

    ``AsyncMongoClient(uri, event_listeners=[RecorderListener(recorder)])``. Handshake,
    heartbeat, authentication and `admin` database commands are ignored; getMore and
    killCursors are folded into the record of the cursor's opening command.
    """

    def __init__(self, recorder: CommandRecorder, *, strip_overhead: bool = True) -> None:
        self.recorder = recorder
        self.strip_overhead = strip_overhead
        self._pending: dict[tuple[Any, int], RecordedCommand] = {}
        self._cursors: OrderedDict[int, RecordedCommand] = OrderedDict()

    def _ignored(self, name: str, database: str) -> bool:
        return database == "admin" or name.lower() in IGNORED_COMMANDS

    def _sizes(self, doc: Mapping[str, Any], fields: tuple[str, ...]) -> tuple[int, int]:
        payload, overhead = split_overhead(doc, fields)
        if not self.strip_overhead:
            return payload + overhead, 0
        return payload, overhead

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        name = event.command_name
        if self._ignored(name, event.database_name):
            return
        command = event.command
        sent, overhead = self._sizes(command, COMMAND_OVERHEAD_FIELDS)
        key = (event.connection_id, event.request_id)
        lname = name.lower()
        if lname in ("getmore", "killcursors"):
            ids: list[int] = (
                [command["getMore"]] if lname == "getmore" else list(command.get("cursors") or [])
            )
            parent = next((self._cursors[i] for i in ids if i in self._cursors), None)
            if parent is not None:
                parent.bytes_sent += sent
                parent.overhead_bytes += overhead
                parent.round_trips += 1
                if lname == "killcursors":
                    for i in ids:
                        self._cursors.pop(i, None)
                self._pending[key] = parent
                return
        rec = RecordedCommand(
            name=name,
            database=event.database_name,
            bytes_sent=sent,
            overhead_bytes=overhead,
            backend="mongodb",
            **describe_command(name, command),
        )
        self._pending[key] = rec

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        rec = self._pending.pop((event.connection_id, event.request_id), None)
        if rec is None:
            return
        if event.command_name.lower() not in ("getmore", "killcursors"):
            rec.duration_ms += event.duration_micros / 1000
        reply = event.reply
        received, overhead = self._sizes(reply, REPLY_OVERHEAD_FIELDS)
        rec.bytes_received += received
        rec.overhead_bytes += overhead
        cursor_id, n = cursor_info(reply)
        rec.n_returned += n
        if rec.name.lower() == "findandmodify" and reply.get("value") is not None:
            rec.n_returned += 1
        name = event.command_name.lower()
        if name in ("getmore", "killcursors"):
            if name == "getmore" and not cursor_id:
                # exhausted: forget the cursor
                for cid, parent in list(self._cursors.items()):
                    if parent is rec:
                        del self._cursors[cid]
            return
        if cursor_id:
            self._cursors[cursor_id] = rec
            while len(self._cursors) > 10_000:
                self._cursors.popitem(last=False)
        self.recorder.record(rec)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        rec = self._pending.pop((event.connection_id, event.request_id), None)
        if rec is None:
            return
        if event.command_name.lower() not in ("getmore", "killcursors"):
            rec.duration_ms += event.duration_micros / 1000
        failure = event.failure
        message = failure.get("errmsg") if isinstance(failure, Mapping) else None
        rec.error = str(message or failure)
        if event.command_name.lower() in ("getmore", "killcursors"):
            return
        self.recorder.record(rec)
