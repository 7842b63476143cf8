"""Deterministic interleavings for concurrency tests: no sleeps, no timing.

`hooked(repo.port.scope, "pages", ("replace_one",), action)` swaps one task repository's
collection (its port's scope holds them) for a proxy that runs `action` (a coroutine
function: another writer's whole verb, a wait on an `asyncio.Event`) right before the
chosen call goes out, so the other coroutine's writes land exactly between two steps of
this one (between a read of the task document and the read of its pages, between a
seal's page writes and its task update). The hook sits on the collection object the code
under test holds, not on its methods, so it does not depend on how a read or a seal is
split into functions. With no action it only counts the calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

Call = tuple[str, tuple[Any, ...], dict[str, Any]]
Action = Callable[[], Awaitable[Any]]
When = Callable[[str, tuple[Any, ...], dict[str, Any]], bool]


def always(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return True


class Hooked:
    """A collection whose calls of `methods` matching `when` are recorded (`calls`, and
    their names in the shared `log` if given); those after the first `skip` ones, `times`
    of them (None: all), first await `action`."""

    def __init__(self, inner: Any, methods: Collection[str], action: Action | None,
                 when: When, times: int | None, skip: int, log: list[str] | None,
                 label: str) -> None:  # fmt: skip
        self.inner = inner
        self.methods = frozenset(methods)
        self.action = action
        self.when = when
        self.times = times
        self.skip = skip
        self.log = log
        self.label = label
        self.calls: list[Call] = []
        self.fired = 0

    async def _before(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self.when(name, args, kwargs):
            return
        self.calls.append((name, args, kwargs))
        if self.log is not None:
            self.log.append(self.label)
        due = len(self.calls) > self.skip and (self.times is None or self.fired < self.times)
        if self.action is not None and due:
            self.fired += 1
            await self.action()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name not in self.methods:
            return value
        if name == "find":  # returns a cursor at once: the hook runs when it is read

            def find(*args: Any, **kwargs: Any) -> _Cursor:
                return _Cursor(value(*args, **kwargs), lambda: self._before(name, args, kwargs))

            return find

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._before(name, args, kwargs)
            return await value(*args, **kwargs)

        return call


class _Cursor:
    """A find cursor whose first read awaits the hook (sort/limit/skip chain through)."""

    def __init__(self, inner: Any, before: Action) -> None:
        self._inner = inner
        self._before: Action | None = before

    async def _ready(self) -> None:
        if self._before is not None:
            before, self._before = self._before, None
            await before()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in ("sort", "limit", "skip", "batch_size"):

            def chained(*args: Any, **kwargs: Any) -> _Cursor:
                self._inner = value(*args, **kwargs)
                return self

            return chained
        return value

    async def to_list(self, *args: Any, **kwargs: Any) -> Any:
        await self._ready()
        return await self._inner.to_list(*args, **kwargs)

    def __aiter__(self) -> Any:
        async def iterate() -> Any:
            await self._ready()
            async for item in self._inner:
                yield item

        return iterate()


READS = ("find", "find_one", "aggregate", "count_documents")
WRITES = ("replace_one", "update_one", "update_many", "insert_one", "insert_many",
          "delete_one", "delete_many", "bulk_write")  # fmt: skip


@contextmanager
def hooked(holder: Any, attribute: str, methods: Collection[str], action: Action | None = None,
           *, when: When = always, times: int | None = 1, skip: int = 0,
           log: list[str] | None = None) -> Iterator[Hooked]:  # fmt: skip
    """`holder.<attribute>` (a task repository's `port.scope.tasks` or `.pages`) hooked for
    the block; `log` collects the attribute's name per call (shared by hooks: the order of
    calls)."""
    original = getattr(holder, attribute)
    proxy = Hooked(original, methods, action, when, times, skip, log, attribute)
    setattr(holder, attribute, proxy)
    try:
        yield proxy
    finally:
        setattr(holder, attribute, original)
