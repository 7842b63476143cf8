"""The typed errors of mindstore.

Every failure a caller can act on has its own class under `MindstoreError`, so that
applications can catch precisely and the CLI can map each kind to a distinct exit code.
"""

from __future__ import annotations


class MindstoreError(Exception):
    """Base of every error mindstore raises on purpose."""

    exit_code: int = 1


class ValidationError(MindstoreError, ValueError):
    """Input that cannot be stored: malformed message, bad id, bad argument."""

    exit_code = 2


class NotFound(MindstoreError, LookupError):
    """The task, message, tool call or dialog does not exist for this tenant."""

    exit_code = 3


class WrongType(ValidationError, TypeError):
    """An argument of the wrong type (the Mind Map raises TypeError for these)."""


class MissingConfig(NotFound, ValueError):
    """No task configuration applies: `current_task_config`, `get_current_config` and
    `add_assistant_message` on a task without one (the Mind Map raises ValueError)."""


class UnknownToolCall(NotFound, ValueError):
    """`answer_tool_call` names no open tool call (the Mind Map raises ValueError)."""


class Conflict(MindstoreError):
    """A guarded write lost its race too many times, or the stored state forbids it."""

    exit_code = 4


class InvalidTransition(MindstoreError):
    """The verb is not allowed in the task's current state or level (e.g. exit at root)."""

    exit_code = 5


class NoConfigForTurn(InvalidTransition, MissingConfig):
    """`add_assistant_message` before any task configuration: not allowed now (and, as in
    the Mind Map, a ValueError; as elsewhere here, a MissingConfig)."""


class TaskTooLarge(MindstoreError):
    """An append would push the task document past MongoDB's 16 MiB limit."""

    exit_code = 6

    def __init__(self, task_id: str, size_bytes: int, added_bytes: int, limit_bytes: int) -> None:
        self.task_id = task_id
        self.size_bytes = size_bytes
        self.added_bytes = added_bytes
        self.limit_bytes = limit_bytes
        super().__init__(
            f"task {task_id!r} holds {size_bytes} bytes; adding {added_bytes} bytes would pass "
            f"the limit of {limit_bytes} bytes"
        )


class ConfigurationError(MindstoreError):
    """Bad connection settings: an unparsable URI, an unreachable server, a missing tenant."""

    exit_code = 7


class BackupError(MindstoreError):
    """A backup cannot be read, verified or restored."""

    exit_code = 8


class CryptoError(MindstoreError):
    """Encrypted content that cannot be read: a ciphertext moved to another tenant, task,
    message or field, changed, or sealed under a data key this keyring cannot unwrap
    (docs/encryption.md)."""

    exit_code = 16


class KeyShredded(CryptoError):
    """The tenant's data keys were destroyed (`store.keyring.shred`): its encrypted
    content, in the database and in every backup, can no longer be read."""

    exit_code = 17

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        super().__init__(f"the data keys of tenant {tenant!r} were shredded: its content is gone")


class KeyProviderUnavailable(CryptoError):
    """The key provider (a KMS, the local key vault) could not be reached or did not
    answer: nothing was decided and nothing was written; retry later."""

    exit_code = 18


class KeyringRequired(CryptoError):
    """The tenant is encrypted and this store has no keyring: it neither reads the
    tenant's sealed content nor writes content into it in the clear. Open the store with
    `mindstore.connect(..., keyring=...)` (the CLI: `--master-key` and `--key-vault`)."""

    exit_code = 19

    def __init__(self, tenant: str, action: str = "read") -> None:
        self.tenant = tenant
        super().__init__(
            f"tenant {tenant!r} is encrypted: a store without a keyring cannot {action} its "
            "content (open it with a keyring; the CLI takes --master-key and --key-vault)"
        )


# ---------------------------------------------------------------------------- availability
class Unavailable(MindstoreError):
    """The database did not answer: a failover, a dropped connection, a timeout, a write
    not acknowledged by enough members. Retryable: the same call, repeated, is
    exactly-once where `exactly_once` says so (docs/operations.md, "Errors and retries").

    `operation` names what the caller called (`tasks.add_message`), `command` the
    database command that failed (`update on tasks`); `may_have_applied` is True when a
    write had been sent, so its effect may be stored. The driver's error is `__cause__`.
    Exit code 75, `EX_TEMPFAIL` of sysexits.h: a temporary failure, try again later.
    """

    exit_code = 75
    retryable = True

    def __init__(
        self,
        operation: str,
        command: str,
        *,
        may_have_applied: bool,
        exactly_once: bool = True,
        note: str | None = None,
        cause: str = "",
    ) -> None:
        self.operation = operation
        self.command = command
        self.may_have_applied = may_have_applied
        self.exactly_once = exactly_once
        outcome = (
            "a write was sent and may have been applied"
            if may_have_applied
            else "nothing was written"
        )
        if note is not None:
            advice = note
        elif exactly_once:
            advice = "retry the same call: a retry is exactly-once"
        else:
            advice = "a retry may apply it twice"
        shown = f" ({cause})" if cause else ""
        super().__init__(
            f"{operation}: the database is unavailable: {command} failed{shown}; "
            f"{outcome}; {advice}"
        )


# ---------------------------------------------------------------------------- console
class ConsoleError(MindstoreError):
    """The operator console cannot start: its extra is not installed, its operators file
    is missing or malformed, or it was asked to listen beyond localhost without
    `--allow-remote` (docs/console.md). Exit codes 40-49 are the console's."""

    exit_code = 40
