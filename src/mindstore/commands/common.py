"""What every command shares: the store it opens, its settings, errors as exit codes.

`mindstore.cli` assembles the app from the command modules; the command modules import
their helpers from here, never from `mindstore.cli`, so imports flow one way (cli ->
commands -> this module). Global options (`--uri`, `--data`, `--database`, and the keys
of encrypted tenants, `--master-key` and `--key-vault`) arrive as a `Settings` object on
the root context.

Errors: every `MindstoreError` becomes a one-line message on stderr and its class's exit
code (see docs/cli.md); anything else (a bug, or stored data no mindstore wrote) one line
and exit 1, never a traceback (``MINDSTORE_DEBUG=1`` shows it). Settings fail before any
work: a URI whose options pymongo would only warn about and ignore, a `--data` file that
a reading command cannot find (a typo must not look like an empty store), or one that a
writing command could not write back.

Without ``--uri``, ``--data`` and ``MINDSTORE_URI`` a command works on a new, empty
in-memory store; it says so on stderr (an empty table must not pass for an empty
database), as it does for ``--uri memory:``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from typer.core import TyperGroup

from mindstore.backends.uri_check import check_uri
from mindstore.commands.pipes import EXIT_CLOSED_PIPE, silence_stdout
from mindstore.errors import ConfigurationError, MindstoreError, ValidationError

if TYPE_CHECKING:
    from mindstore.crypto import Keyring
    from mindstore.search import Embedder
    from mindstore.store import Store


T = TypeVar("T")

__all__ = [
    "DEBUG_ENV", "EXIT_INTERRUPTED", "EXIT_UNEXPECTED", "EXIT_USAGE", "OneLineErrors", "Settings",
    "check_uri", "check_writable", "note_in_memory", "note_unknown_tenant", "one_line",
    "open_store", "require_tenant", "run", "settings",
]  # fmt: skip

# typer ships its own copy of click: find its exception classes through a public name
_CLICK_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)
_CLICK_ERRORS = sys.modules[_CLICK_ERROR.__module__]
_NO_ARGS_IS_HELP: type[Exception] = getattr(
    _CLICK_ERRORS, "NoArgsIsHelpError", type("_Never", (Exception,), {})
)
_ABORT: type[BaseException] = getattr(_CLICK_ERRORS, "Abort", typer.Abort)


class OneLineErrors(TyperGroup):
    """The root command, with click's usage errors (a bad number, an unknown option, a
    value out of range) printed as one ``error:`` line, exit code 2, like every other
    error; help (``--help``, or a group called without a command) is shown as usual."""

    def main(  # type: ignore[override]  # the same parameters as click's; typer's stub spells them differently
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NO_ARGS_IS_HELP as exc:
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        except _CLICK_ERROR as exc:
            message = exc.format_message()  # type: ignore[attr-defined]
            typer.echo(f"error: {one_line(message)} (see --help)", err=True)
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        except _ABORT:
            typer.echo("aborted", err=True)
            sys.exit(EXIT_UNEXPECTED)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a closed stdout pipe ends it quietly (`commands.pipes`)."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            silence_stdout()
            raise typer.Exit(EXIT_CLOSED_PIPE) from None


EXIT_UNEXPECTED = 1  # not a MindstoreError: a bug, or stored data no mindstore wrote
EXIT_USAGE = 2  # typer/click's own code for bad arguments
EXIT_INTERRUPTED = 130
DEBUG_ENV = "MINDSTORE_DEBUG"


@dataclass
class Settings:
    uri: str | None = None
    data: Path | None = None
    database: str | None = None
    master_key: Path | None = None
    key_vault: Path | None = None
    embedder: str | None = None


def build_keyring(master_key: Path | None, key_vault: Path | None) -> Keyring | None:
    """The keyring the key options name (docs/encryption.md, "Command line"): a vault and
    its master key (keys still wrapped by that master key alone open too, until `keys
    migrate`); a vault alone (status and shred, which need no master key); a master key
    alone (the format before per-tenant keys); neither: no keyring."""
    if master_key is None and key_vault is None:
        return None
    from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey

    master = LocalMasterKey.from_file(master_key) if master_key is not None else None
    if key_vault is None:
        assert master is not None
        return Keyring(master)
    return Keyring(LocalKeyVault(key_vault, master), legacy=master)


EMBEDDER_KINDS = ("hashing", "local", "openai", "gemini")


def build_embedder(spec: str | None) -> Embedder | None:
    """The embedder `--embedder` names (docs/cli.md): ``hashing[:DIMS]`` (deterministic,
    no model), ``local:FOLDER`` (a sentence-transformers model's folder, never
    downloaded), ``openai[:MODEL]`` or ``gemini[:MODEL]`` (the provider's key from the
    environment); none: lexical search only."""
    if spec is None or spec == "":
        return None
    kind, _, argument = spec.partition(":")
    if kind not in EMBEDDER_KINDS:
        raise ValidationError(
            f"--embedder: {kind[:40]!r} is not one of {', '.join(EMBEDDER_KINDS)}"
        )
    from mindstore import search

    if kind == "hashing":
        if argument and not (argument.isdigit() and 8 <= int(argument) <= 4096):
            raise ValidationError("--embedder: hashing:DIMS takes 8 to 4096 dimensions")
        return search.HashingEmbedder(int(argument) if argument else 256)
    if kind == "local":
        if not argument:
            raise ValidationError("--embedder: local:FOLDER names a model's folder")
        return search.SentenceTransformerEmbedder(argument)
    if kind == "openai":
        return search.OpenAIEmbedder(model=argument) if argument else search.OpenAIEmbedder()
    return search.GeminiEmbedder(model=argument) if argument else search.GeminiEmbedder()


def settings(ctx: typer.Context) -> Settings:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else Settings()


def _check_data_file(path: Path, *, must_exist: bool, writable: bool) -> None:
    """A reading command needs an existing file; a writing one a place it can write."""
    try:
        exists = path.exists()
        regular = path.is_file()
    except OSError as exc:
        raise ConfigurationError(f"cannot use data file {path}: {exc.strerror or exc}") from None
    if exists and not regular:  # a directory, a device, a pipe: never read or replaced
        raise ConfigurationError(f"data file {path} is not a regular file")
    if must_exist and not exists:
        raise ConfigurationError(
            f"no data file at {path}: check the path (create one with "
            f"`mindstore --data {path} demo-data` or a restore)"
        )
    if writable:
        check_writable(path, "data file", ConfigurationError)


def write_receipt(receipt: Path, data: dict[str, Any], done: str,
                  error: type[MindstoreError]) -> None:  # fmt: skip
    """Keep a destructive command's receipt (already printed): a failed write says the work
    was `done` and where the receipt is (above), as `error` (the command's exit code)."""

    async def keep() -> None:
        try:
            text = json.dumps(data, indent=2, ensure_ascii=True) + "\n"
            await asyncio.to_thread(receipt.write_text, text)
        except OSError as exc:
            raise error(
                f"{done}, but the receipt could not be written to "
                f"{receipt}: {exc.strerror or exc} (it is printed above)"
            ) from None

    run(keep())


def check_writable(path: Path, what: str, error: type[MindstoreError]) -> None:
    """Can a file be written at `path`? Tried with a throwaway file next to it, before a
    command does work that a failed write would waste (or, for erase, lose)."""
    try:
        if path.exists() and not path.is_file():
            raise error(f"{what} {path} is not a regular file")
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", suffix=".probe"):
            pass
    except OSError as exc:
        raise error(f"cannot write {what} {path}: {exc.strerror or exc}") from None


@asynccontextmanager
async def open_store(ctx: typer.Context, *, save: bool = True,
                     create: bool | None = None) -> AsyncIterator[Store]:  # fmt: skip
    """The store a command works on; an embedded `--data` store is saved back afterwards.

    ``save=False`` marks a reading command: its `--data` file must exist and is never
    rewritten. A writing command may create the file unless ``create=False``.
    """
    from mindstore.backends.connection import MEMORY_URI, is_memory_uri
    from mindstore.backends.snapshot import load_snapshot, save_snapshot
    from mindstore.document_models import bind_documents
    from mindstore.store import connect

    options = settings(ctx)
    if options.data is not None and options.uri and not is_memory_uri(options.uri):
        raise ConfigurationError("--data works with the embedded store only; drop --uri or --data")
    check_uri(options.uri)
    if options.data is not None:
        may_create = save if create is None else create
        _check_data_file(options.data, must_exist=not may_create, writable=save)
    # no --uri and no MINDSTORE_URI (typer reads it into --uri): memory, said below rather
    # than by connect()'s Python warning
    store = await connect(
        MEMORY_URI if options.uri is None else options.uri, database=options.database,
        keyring=build_keyring(options.master_key, options.key_vault),
        embedder=build_embedder(options.embedder),
    )  # fmt: skip
    try:
        if options.data is not None:
            await load_snapshot(store.database, options.data)
            # a file saved by an earlier version holds its indexes: bring them up to date
            await bind_documents(store.database)
        elif store.backend.is_embedded:
            note_in_memory(options.uri)
        yield store
        if options.data is not None and save:
            try:
                await save_snapshot(store.database, options.data)
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot write data file {options.data}: {exc.strerror or exc}"
                ) from None
    finally:
        await store.close()


def note_in_memory(uri: str | None) -> None:
    """Say on stderr that the store is a new, empty in-memory one, kept nowhere."""
    if uri is None:
        what = "no --uri, --data or MINDSTORE_URI, so this is"
        hint = "pass --data FILE or --uri mongodb://..."
    else:
        what = f"{one_line(uri)!r} is"
        hint = "--data FILE keeps an embedded store in a file"
    typer.echo(
        f"note: {what} a new, empty in-memory store; nothing written to it is kept ({hint})",
        err=True,
    )


def require_tenant(tenant: str | None) -> str:
    """The `--tenant` value: given (exit 7 otherwise) and a valid tenant id (exit 2)."""
    from mindstore.ids import check_key

    if not tenant:
        raise ConfigurationError("a tenant is required: pass --tenant NAME")
    return check_key(tenant, "tenant")


async def note_unknown_tenant(store: Store, tenant: str) -> None:
    """Say on stderr when a tenant has no tasks at all: a typo in `--tenant` must not
    pass for an empty report (stdout, and the exit code, stay as they are)."""
    from mindstore.collection_names import TASKS

    if not await store.database[TASKS].count_documents({"tenant": tenant}, limit=1):
        typer.echo(f"note: tenant {one_line(tenant)!s} has no tasks in this store", err=True)


def one_line(text: str) -> str:
    """An error message as one printable line."""
    from mindstore.commands.sanitize import terminal_text

    return terminal_text(text).replace("\n", "\\n")


def run(coroutine: Awaitable[T]) -> T:
    """Run a command body; every error becomes one line on stderr and an exit code."""
    try:
        return asyncio.run(coroutine)  # type: ignore[arg-type]
    except MindstoreError as exc:
        typer.echo(f"error: {one_line(str(exc))}", err=True)
        raise typer.Exit(code=exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(code=EXIT_INTERRUPTED) from None
    except BrokenPipeError:
        raise  # the reader of stdout went away: OneLineErrors.invoke ends quietly
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        typer.echo(f"error: {_unexpected(exc)} ({DEBUG_ENV}=1 shows the traceback)", err=True)
        raise typer.Exit(code=EXIT_UNEXPECTED) from None


def _unexpected(exc: Exception) -> str:
    """One line for an error that is not a `MindstoreError`. A model that refuses what
    a read returned means a stored document mindstore did not write (edited by hand,
    written by another program); anything else is a bug to report."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = one_line("; ".join(lines[:2]))[:300] or "no details"
    if type(exc).__name__ == "ValidationError" and type(exc).__module__.startswith("pydantic"):
        return f"a stored document does not have the shape mindstore writes: {detail}"
    return f"unexpected {type(exc).__name__}: {detail} (malformed stored data, or a bug)"
