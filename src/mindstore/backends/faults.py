"""A database that fails on purpose: the faults of a real cluster, at a chosen command.

For tests (the suite's fault matrix, and an application's own): wrap any backend's
database, embedded or a server's, and open a store on it::

    plan = FaultPlan(Fault(at=2, kind="after", error=AutoReconnect))
    faulty = Store(dataclasses.replace(store.backend, database=plan.wrap(raw)))

The plan numbers the commands sent through the wrapped database from 0 (each awaited
collection or database method, each cursor once: `backends.proxy`) and, at command
`at`, does one of:

* ``"before"``: raise `error` instead of sending it (a primary that stepped down, a
  connection refused): nothing of it is applied;
* ``"after"``: send it, then raise `error` instead of its reply (a connection dropped
  after the write landed, a write concern not satisfied): it is applied, the caller
  cannot know;
* ``"crash_before"`` / ``"crash_after"``: stop there, before or after it is applied,
  for good: the coroutine waits forever, as a killed process never resumes, and every
  later command through the plan waits too. `crashed` is set; the test then looks at
  the database through another store, as the next process would, and cancels the
  stopped task when it is done.

`TRANSIENT_ERRORS` builds each transient error PyMongo raises, for matrices that go
through them all. `count` and `sent` say what went through (a dry run with no fault
tells a test how many commands an operation sends).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pymongo.errors import (
    AutoReconnect,
    ExecutionTimeout,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
    WriteConcernError,
    WTimeoutError,
)

from .proxy import Command, ProxyDatabase

__all__ = ["FAULT_KINDS", "TRANSIENT_ERRORS", "Fault", "FaultKind", "FaultPlan"]

FaultKind = Literal["before", "after", "crash_before", "crash_after"]
FAULT_KINDS: tuple[FaultKind, ...] = ("before", "after", "crash_before", "crash_after")

ErrorFactory = Callable[[str], PyMongoError]


def _labelled(code: int, name: str) -> Callable[[str], PyMongoError]:
    def make(where: str) -> PyMongoError:
        message = f"{name} during {where}"
        details = {"code": code, "codeName": name, "errmsg": message,
                   "errorLabels": ["RetryableWriteError"]}  # fmt: skip
        return OperationFailure(message, code, details)

    return make


TRANSIENT_ERRORS: dict[str, ErrorFactory] = {
    "AutoReconnect": lambda where: AutoReconnect(f"connection closed during {where}"),
    "NotPrimaryError": lambda where: NotPrimaryError(
        f"not primary during {where}", {"code": 10107, "errmsg": "not primary"}
    ),
    "NetworkTimeout": lambda where: NetworkTimeout(f"timed out during {where}"),
    "ServerSelectionTimeoutError": lambda where: ServerSelectionTimeoutError(
        f"no primary available for {where}"
    ),
    "WriteConcernError": lambda where: WriteConcernError(
        f"write concern not satisfied for {where}",
        100,
        {
            "code": 100,
            "errmsg": "UnsatisfiableWriteConcern",
            "errorLabels": ["RetryableWriteError"],
        },
    ),
    "WTimeoutError": lambda where: WTimeoutError(
        f"waiting for replication timed out for {where}",
        64,
        {"code": 64, "errmsg": "waiting for replication timed out", "errInfo": {"wtimeout": True}},
    ),
    "ExecutionTimeout": lambda where: ExecutionTimeout(
        f"operation exceeded time limit: {where}", 50, {"code": 50, "errmsg": "MaxTimeMSExpired"}
    ),
    "PrimarySteppedDown": _labelled(189, "PrimarySteppedDown"),
    "InterruptedDueToReplStateChange": _labelled(11602, "InterruptedDueToReplStateChange"),
    "ShutdownInProgress": _labelled(91, "ShutdownInProgress"),
}
"""Each transient error PyMongo raises (see `backends.transient`), by name: a function of
where it happened (`update_one on tasks`) to the error."""


@dataclass(frozen=True)
class Fault:
    """What happens at command number `at` (see the module)."""

    at: int
    kind: FaultKind = "before"
    error: ErrorFactory = TRANSIENT_ERRORS["AutoReconnect"]
    writes_only: bool = False
    """Number only the commands that write (reads pass, uncounted)."""


@dataclass
class FaultPlan:
    """Numbers the commands sent through `wrap`ped databases; injects `fault` once."""

    fault: Fault | None = None
    count: int = 0
    writes: int = 0
    """How many of the numbered commands were writes."""
    sent: list[str] = field(default_factory=list)
    """Each numbered command, described (`update_one on tasks`), in order."""
    fired: bool = False
    crashed: asyncio.Event = field(default_factory=asyncio.Event)

    def wrap(self, database: Any) -> ProxyDatabase:
        """`database` with every command numbered and the fault injected."""
        return ProxyDatabase(database, self._around)

    async def _around(self, command: Command, call: Callable[[], Awaitable[Any]]) -> Any:
        if self.crashed.is_set():
            await _forever()
        fault = self.fault
        if command.continued or (fault is not None and fault.writes_only and not command.write):
            return await call()
        number = self.count
        self.count += 1
        self.writes += command.write
        self.sent.append(command.describe())
        if fault is None or number != fault.at:
            return await call()
        self.fired = True
        if fault.kind == "before":
            raise fault.error(command.describe())
        if fault.kind == "crash_before":
            self.crashed.set()
            await _forever()
        await call()
        if fault.kind == "crash_after":
            self.crashed.set()
            await _forever()
        raise fault.error(command.describe())


async def _forever() -> None:
    """Never return: the rest of the operation never runs (a killed process)."""
    await asyncio.Event().wait()
