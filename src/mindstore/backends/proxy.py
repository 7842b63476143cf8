"""A database whose every command passes through one hook.

`ProxyDatabase(database, hook)` hands out collections, and they cursors, that call
``await hook(command, call)`` around each command they send: ``call()`` sends it, and the
hook may do what it likes around that (translate an error: `backends.transient`; inject
a fault: `backends.faults`). Anything else (names, options, the embedded backend's
`delegate`) passes through unchanged, so the code above cannot tell a proxy from the
database it wraps.

A command is one awaited collection or database method (`update_one`, `count_documents`,
`command`), or the first read of a cursor (`find(...)` sends nothing until it is read);
a cursor's later reads are the same command continued (`Command.continued`), because a
hook that counts commands must count a cursor once however many batches it takes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

__all__ = ["WRITE_METHODS", "Command", "Hook", "ProxyCollection", "ProxyDatabase", "unwrap"]

T = TypeVar("T")

WRITE_METHODS = frozenset({
    "insert_one", "insert_many", "replace_one", "update_one", "update_many", "delete_one",
    "delete_many", "bulk_write", "find_one_and_update", "find_one_and_replace",
    "find_one_and_delete", "create_index", "create_indexes", "drop_index", "drop_indexes",
    "drop", "rename", "drop_collection", "create_collection",
})  # fmt: skip
"""Methods that change what is stored: their failure leaves the outcome unknown."""

CURSOR_CHAIN = frozenset({
    "sort", "limit", "skip", "batch_size", "max_time_ms", "hint", "collation", "comment",
    "allow_disk_use", "where", "max_await_time_ms",
})  # fmt: skip
"""A cursor's methods that return the cursor itself (nothing is sent yet)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command as a hook sees it."""

    method: str
    collection: str | None
    write: bool
    continued: bool = False
    """A later read of a cursor whose first read was this command already."""

    def describe(self) -> str:
        """`update_one on tasks`: what a message names."""
        where = f" on {self.collection}" if self.collection else ""
        return f"{self.method}{where}"


class Hook(Protocol):
    """What runs around every command: ``call()`` sends it."""

    async def __call__(self, command: Command, call: Callable[[], Awaitable[Any]]) -> Any: ...


def unwrap(value: Any) -> Any:
    """The database, collection or cursor under any number of proxies."""
    while isinstance(value, (ProxyDatabase, ProxyCollection, ProxyCursor)):
        value = value._inner
    return value


def _is_cursor(value: Any) -> bool:
    return hasattr(value, "__aiter__") and not isinstance(value, (dict, list))


class ProxyDatabase:
    """A database whose collections and commands go through `hook`."""

    def __init__(self, inner: Any, hook: Hook) -> None:
        self._inner = inner
        self._hook = hook

    def __getitem__(self, name: str) -> ProxyCollection:
        return ProxyCollection(self._inner[name], self._hook)

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> ProxyCollection:
        return ProxyCollection(self._inner.get_collection(name, *args, **kwargs), self._hook)

    def with_options(self, *args: Any, **kwargs: Any) -> ProxyDatabase:
        return ProxyDatabase(self._inner.with_options(*args, **kwargs), self._hook)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if hasattr(value, "insert_one") and hasattr(value, "find"):  # `db.tasks` is a collection
            return ProxyCollection(value, self._hook)
        if inspect.iscoroutinefunction(value):
            return _command(value, self._hook, Command(name, None, name in WRITE_METHODS))
        return value

    def __eq__(self, other: object) -> bool:
        return bool(unwrap(self) == unwrap(other))

    def __hash__(self) -> int:
        return hash(unwrap(self))

    def __repr__(self) -> str:
        return f"ProxyDatabase({self._inner!r})"


class ProxyCollection:
    """A collection whose commands, and its cursors' reads, go through `hook`."""

    def __init__(self, inner: Any, hook: Hook) -> None:
        self._inner = inner
        self._hook = hook

    def find(self, *args: Any, **kwargs: Any) -> ProxyCursor:
        cursor = self._inner.find(*args, **kwargs)
        return ProxyCursor(cursor, self._hook, Command("find", self._inner.name, False))

    def with_options(self, *args: Any, **kwargs: Any) -> ProxyCollection:
        return ProxyCollection(self._inner.with_options(*args, **kwargs), self._hook)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(value):
            return value
        return _command(value, self._hook, Command(name, self._inner.name, name in WRITE_METHODS))

    def __eq__(self, other: object) -> bool:
        return bool(unwrap(self) == unwrap(other))

    def __hash__(self) -> int:
        return hash(unwrap(self))

    def __repr__(self) -> str:
        return f"ProxyCollection({self._inner!r})"


def _command(method: Callable[..., Awaitable[Any]], hook: Hook, command: Command) -> Any:
    """`method` sent through `hook`; a cursor it returns reads through `hook` too."""

    async def send(*args: Any, **kwargs: Any) -> Any:
        result = await hook(command, lambda: method(*args, **kwargs))
        if _is_cursor(result):
            return ProxyCursor(result, hook, replace(command, write=False, continued=True))
        return result

    return send


class ProxyCursor:
    """A cursor whose reads go through `hook`: the first as `command`, the rest continued."""

    def __init__(self, inner: Any, hook: Hook, command: Command) -> None:
        self._inner = inner
        self._hook = hook
        self._command = command

    async def _read(self, call: Callable[[], Awaitable[T]]) -> T:
        command = self._command
        self._command = replace(command, continued=True)
        result: T = await self._hook(command, call)
        return result

    def __aiter__(self) -> ProxyCursor:
        return self

    async def __anext__(self) -> Any:
        return await self._read(self._inner.__anext__)

    async def to_list(self, *args: Any, **kwargs: Any) -> list[Any]:
        return await self._read(lambda: self._inner.to_list(*args, **kwargs))

    async def next(self) -> Any:
        return await self._read(self._inner.next)

    async def __aenter__(self) -> ProxyCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.close()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in CURSOR_CHAIN:

            def chain(*args: Any, **kwargs: Any) -> ProxyCursor:
                chained = value(*args, **kwargs)
                if chained is not self._inner:
                    return ProxyCursor(chained, self._hook, self._command)
                return self

            return chain
        if inspect.iscoroutinefunction(value):

            async def read(*args: Any, **kwargs: Any) -> Any:
                return await self._read(lambda: value(*args, **kwargs))

            return read
        return value

    def __repr__(self) -> str:
        return f"ProxyCursor({self._inner!r})"
