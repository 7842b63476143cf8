"""The one seam where a driver error becomes mindstore's: transient ones are `Unavailable`.

`guarded(database)` is what a `Store` reads and writes through (`store.database`): every
command of every collection goes through `translate`, which lets a result or a permanent
error (a duplicate key, a bad query) pass unchanged and turns an error that says "the
database did not answer this time" into `errors.Unavailable`, naming the operation that
was running (`mindstore.operations`) and the command, with the driver's error as its
`__cause__`. No verb catches driver errors itself.

Transient, as PyMongo classifies them: a lost or refused connection (`ConnectionFailure`:
`AutoReconnect`, `NotPrimaryError`, `NetworkTimeout`, `ServerSelectionTimeoutError`,
`WaitQueueTimeoutError`), a write concern not satisfied (`WriteConcernError`, including
`WTimeoutError`: the write was applied on the primary), a server error carrying the
`RetryableWriteError` or `TransientTransactionError` label or one of the retryable-writes
codes (a stepdown, a shutdown, a host unreachable), a timeout (`PyMongoError.timeout`), a
cursor lost in a failover (`CursorNotFound`), and a bulk write whose only failures are
write concern errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pymongo.errors import (
    BulkWriteError,
    ConnectionFailure,
    CursorNotFound,
    OperationFailure,
    PyMongoError,
    WriteConcernError,
)

from mindstore import operations
from mindstore.errors import Unavailable

from .proxy import Command, ProxyDatabase

__all__ = ["RETRYABLE_CODES", "TRANSIENT_LABELS", "guarded", "is_transient", "translate"]

TRANSIENT_LABELS = frozenset({"RetryableWriteError", "TransientTransactionError"})
RETRYABLE_CODES = frozenset({
    6, 7, 89, 91, 134, 189, 262, 9001, 10058, 10107, 11600, 11602, 13435, 13436,
})  # fmt: skip
"""The retryable-writes specification's codes (host unreachable or not found, network
timeout, shutdown in progress, not primary, primary stepped down, interrupted by a state
change or a shutdown, exceeded time limit, socket exception), as PyMongo lists them."""


def is_transient(error: BaseException) -> bool:
    """Would the same command, sent again a moment later, probably succeed?"""
    if not isinstance(error, PyMongoError):
        return False
    if isinstance(error, (ConnectionFailure, WriteConcernError, CursorNotFound)):
        return True
    if any(error.has_error_label(label) for label in TRANSIENT_LABELS) or error.timeout:
        return True
    if isinstance(error, BulkWriteError):
        details = error.details or {}
        return bool(details.get("writeConcernErrors")) and not details.get("writeErrors")
    return isinstance(error, OperationFailure) and error.code in RETRYABLE_CODES


async def translate(command: Command, call: Callable[[], Awaitable[Any]]) -> Any:
    """Send one command; a transient failure becomes `Unavailable` (see the module)."""
    running = operations.current()
    if running is not None and command.write:
        running.wrote = True  # sent: from here on its outcome may be stored
    try:
        return await call()
    except PyMongoError as error:
        if not is_transient(error):
            raise
        if running is not None:
            raise running.unavailable(command.describe(), error) from error
        raise Unavailable(
            "a database command", command.describe(), may_have_applied=command.write,
            cause=f"{type(error).__name__}: {error}",
        ) from error  # fmt: skip


def guarded(database: Any) -> ProxyDatabase:
    """`database` with every command through `translate`."""
    return ProxyDatabase(database, translate)
