"""Operations: what the caller called, and what happens when the database does not answer.

Every public entry that talks to the database (a verb, a read, a fork, a backup, an
integration's save) runs as one `Operation`: `@operation("tasks.add_message")` names it.
While it runs, the database seam (`backends.transient`) knows whose command failed, and
translates a transient driver error into `errors.Unavailable` naming the operation. Calls
nested inside it (a fork's `tasks.create`) are part of it: only the outermost counts.

An operation records the ids and times it draws (`draws.Tape`). When it fails with
`Unavailable` after sending a write, the write may have landed; then:

* the `RetryPolicy` runs it again (bounded, with backoff) when the operation is
  retry-safe, replaying that tape, so the retry writes what the first attempt wrote and
  each write can tell whether its earlier attempt landed (docs/write-paths.md, "Lost
  replies and retries"): a failover of a few seconds is not seen by the caller;
* otherwise, or when the attempts run out, the error reaches the caller, and the tape is
  kept in the store's `InDoubt` ledger under the call's fingerprint (operation, tenant,
  arguments): the same call made again in this process replays it, so it is exactly-once
  too. From another process (after a crash) only the ids the caller named make it so.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import random
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar

from mindstore.draws import Tape, recording
from mindstore.errors import Unavailable

__all__ = [
    "InDoubt",
    "Operation",
    "Resilience",
    "RetryPolicy",
    "current",
    "operation",
    "operations",
    "through",
]

P = ParamSpec("P")
R = TypeVar("R")

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard an operation tries before it gives up, for two kinds of failure.

    Lost races (another writer moved the task's version first): `attempts` tries in all,
    with a jittered exponential pause from `base_delay` up to `max_delay` between them,
    then `Conflict`.

    Transient database errors (a failover, a dropped connection, a timeout:
    `errors.Unavailable`): a retry-safe operation is run `transient_attempts` times in all
    (1: never again; `RetryPolicy.no_transient_retries()`), pausing between
    `transient_base_delay` and `transient_max_delay` (doubling, half of it jittered),
    then the error reaches the caller. The defaults wait 2 to 4 seconds in all over five
    attempts, on top of the driver's own wait for a primary (`serverSelectionTimeoutMS`)
    in each: a failover of a few seconds is not seen. `sleep` is the pause (tests pass
    one that does not sleep).
    """

    attempts: int = 30
    base_delay: float = 0.0005
    max_delay: float = 0.05
    transient_attempts: int = 5
    transient_base_delay: float = 0.25
    transient_max_delay: float = 4.0
    sleep: Sleep = asyncio.sleep

    def delay(self, attempt: int) -> float:
        """A jittered pause before attempt `attempt + 1` after a lost race."""
        return random.uniform(0, min(self.max_delay, self.base_delay * 2.0**attempt))

    def transient_delay(self, attempt: int) -> float:
        """The pause before running an operation again after its attempt `attempt + 1`
        met a transient error: at least half the doubled delay, at most all of it."""
        ceiling = min(self.transient_max_delay, self.transient_base_delay * 2.0**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    @classmethod
    def no_transient_retries(cls, **settings: Any) -> RetryPolicy:
        """A policy under which every transient error reaches the caller at once."""
        return cls(transient_attempts=1, **settings)


class InDoubt:
    """The tapes of calls that failed after sending a write (their outcome unknown), by the
    call's fingerprint, so the same call made again replays them.

    Bounded in number (the oldest go first) and in time (`ttl` seconds, five minutes by
    default): a retry comes soon after its failure, and a call made again much later is a
    new call (the same words said again), not a retry. The operation names held are
    counted apart, so a call of another operation never computes a fingerprint.
    """

    def __init__(
        self, capacity: int = 1024, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._clock = clock
        self._tapes: OrderedDict[str, tuple[str, float, Tape]] = OrderedDict()
        self._names: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._tapes)

    def holds(self, name: str) -> bool:
        """Is a call of operation `name` in doubt (cheap: no fingerprint)?"""
        return self._names[name] > 0

    def put(self, name: str, key: str, tape: Tape) -> None:
        self._drop(key)
        self._tapes[key] = (name, self._clock(), tape)
        self._names[name] += 1
        while len(self._tapes) > self.capacity:
            self._drop(next(iter(self._tapes)))

    def take(self, key: str) -> Tape | None:
        found = self._drop(key)
        if found is None or self._clock() - found[1] > self.ttl:
            return None
        return found[2]

    def _drop(self, key: str) -> tuple[str, float, Tape] | None:
        found = self._tapes.pop(key, None)
        if found is not None:
            self._names[found[0]] -= 1
        return found


@dataclass
class Resilience:
    """What the operations of one store share: its policy and its ledger."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    in_doubt: InDoubt = field(default_factory=InDoubt)


class Resilient(Protocol):
    """An object whose methods are operations: it says where its store's `Resilience` is."""

    @property
    def resilience(self) -> Resilience: ...


@dataclass
class Operation:
    """One running call: its name, whether it sent a write yet, what a retry of it does."""

    name: str
    tape: Tape
    wrote: bool = False
    """A write command was sent: after a failure its effect may be stored."""
    in_doubt: bool = False
    """An earlier attempt of this call sent a write whose outcome is unknown."""
    retry_safe: bool = True
    """Running it again is exactly-once (so the policy may); a verb may say otherwise."""
    note: str | None = None
    """What the caller should know about retrying it (named in `Unavailable`)."""

    def unavailable(self, command: str, cause: BaseException) -> Unavailable:
        """The typed error for a transient failure of `command` in this operation."""
        return Unavailable(
            self.name, command, may_have_applied=self.wrote or self.in_doubt,
            exactly_once=self.retry_safe,
            note=self.note, cause=f"{type(cause).__name__}: {_first_line(cause)}",
        )  # fmt: skip


_CURRENT: ContextVar[Operation | None] = ContextVar("mindstore_operation", default=None)


def current() -> Operation | None:
    """The operation running in this context, if any."""
    return _CURRENT.get()


def _first_line(error: BaseException) -> str:
    text = (str(error).strip() or type(error).__name__).splitlines()[0]
    return text[:200]


def fingerprint(name: str, owner: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """Which call this is: the operation, the view's tenant and owner, the arguments."""
    scope = (getattr(owner, "tenant", None), getattr(owner, "owner", None))
    text = repr((name, scope, args, sorted(kwargs.items())))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def operation(
    name: str,
    *,
    retry_safe: bool = True,
    resilience: Callable[[Any], Resilience | None] | None = None,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Run an async function (a method, or a function whose first argument is a store) as
    the operation `name`. `retry_safe`: whether running it again after a lost reply is
    exactly-once (the default; a verb may lower it per call). `resilience`: where the
    store's policy and ledger are, from the first argument (default: its `resilience`
    attribute; None: no policy, errors are still typed)."""

    def decorate(
        function: Callable[P, Coroutine[Any, Any, R]],
    ) -> Callable[P, Coroutine[Any, Any, R]]:
        @functools.wraps(function)
        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            if _CURRENT.get() is not None:  # part of an operation already running
                return await function(*args, **kwargs)
            owner = args[0] if args else None
            shared = _resilience_of(owner, resilience)
            policy = shared.policy if shared is not None else None
            key: str | None = None
            replay: Tape | None = None
            if shared is not None and shared.in_doubt.holds(name):
                key = fingerprint(name, owner, args[1:], kwargs)
                replay = shared.in_doubt.take(key)
            attempt = 0
            while True:
                running = Operation(
                    name, Tape(replay), retry_safe=retry_safe, in_doubt=replay is not None
                )
                token = _CURRENT.set(running)
                try:
                    with recording(running.tape):
                        return await function(*args, **kwargs)
                except Unavailable:
                    if running.wrote:
                        replay = running.tape  # its draws replay the earlier ones first
                    again = (
                        policy is not None
                        and running.retry_safe
                        and attempt + 1 < policy.transient_attempts
                    )
                    if not again:
                        if shared is not None and replay is not None:
                            key = key or fingerprint(name, owner, args[1:], kwargs)
                            shared.in_doubt.put(name, key, replay)
                        raise
                finally:
                    _CURRENT.reset(token)
                assert policy is not None
                await policy.sleep(policy.transient_delay(attempt))
                attempt += 1

        return run

    return decorate


def _resilience_of(
    owner: object, find: Callable[[Any], Resilience | None] | None
) -> Resilience | None:
    if find is not None:
        return find(owner)
    found = getattr(owner, "resilience", None)
    return found if isinstance(found, Resilience) else None


C = TypeVar("C", bound=type)


def operations(
    prefix: str,
    *,
    exclude: tuple[str, ...] = (),
    unsafe: tuple[str, ...] = (),
    resilience: Callable[[Any], Resilience | None] | None = None,
) -> Callable[[C], C]:
    """Make every public coroutine method defined in the class an `operation` named
    `<prefix>.<method>` (its instances have `resilience`, or `resilience` finds it);
    those in `unsafe` are not `retry_safe`."""

    def decorate(cls: C) -> C:
        for attr, value in list(vars(cls).items()):
            if attr.startswith("_") or attr in exclude or not inspect.iscoroutinefunction(value):
                continue
            made = operation(f"{prefix}.{attr}", retry_safe=attr not in unsafe,
                             resilience=resilience)  # fmt: skip
            setattr(cls, attr, made(value))
        return cls

    return decorate


def through(attribute: str) -> Callable[[Any], Resilience | None]:
    """A `resilience` finder: that of the object held in `attribute` (an integration's
    task repository), if it has one."""

    def find(owner: Any) -> Resilience | None:
        found = getattr(getattr(owner, attribute, None), "resilience", None)
        return found if isinstance(found, Resilience) else None

    return find
