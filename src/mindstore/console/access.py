"""Who may see what (pure): operators, their credentials and the tenants each may see.

An operator is a name, a secret token and the tenants it may see (a set, or every tenant).
Tokens follow `mindstore.tokens` (shared with the MCP server): only a SHA-256 digest of each
is kept, and a presented token is compared with every digest in constant time. Sessions
are random ids held in memory by the app (`Sessions`): the cookie carries the id, never the
token, and a restart logs everyone out.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from mindstore.errors import ConfigurationError
from mindstore.tokens import MIN_TOKEN_CHARS as MIN_TOKEN_CHARS
from mindstore.tokens import checked_digest, matching
from mindstore.tokens import digest as digest

ALL_TENANTS: Final = "*"
"""In an operator's tenant list: every tenant."""
MAX_SESSIONS: Final = 10_000
"""Sessions kept at once; the oldest is dropped beyond it (memory stays bounded)."""


@dataclass(frozen=True)
class Operator:
    """A person or tool allowed into the console, and the tenants it may see
    (`tenants=None`: all of them)."""

    name: str
    token_digest: bytes
    tenants: frozenset[str] | None

    def may_see(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants

    def visible(self, known: Iterable[str]) -> list[str]:
        """The tenants of `known` this operator may see; all of its own list when it names
        tenants (a tenant with no task yet is still its to see)."""
        if self.tenants is None:
            return sorted(set(known))
        return sorted(self.tenants)


def operator(name: str, token: str, tenants: Iterable[str] | str) -> Operator:
    """An operator from its name, token and tenants (`"*"` or a list with `"*"`: all)."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError("operator name: expected a non-empty string")
    token_digest = checked_digest(token, f"operator {name!r}")
    names = [tenants] if isinstance(tenants, str) else list(tenants)
    if not names or not all(isinstance(t, str) and t for t in names):
        raise ConfigurationError(f"operator {name!r}: tenants must be '*' or a list of tenants")
    scope = None if ALL_TENANTS in names else frozenset(names)
    return Operator(name=name, token_digest=token_digest, tenants=scope)


def operators_from_json(text: str) -> list[Operator]:
    """Operators from a JSON list of `{"name", "token", "tenants"}` objects (a credentials
    file: keep it readable by the console's user only)."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ConfigurationError(f"operators file: not JSON ({error})") from None
    if not isinstance(data, list) or not all(isinstance(item, Mapping) for item in data):
        raise ConfigurationError("operators file: expected a list of objects")
    found = [
        operator(item.get("name"), item.get("token"), item.get("tenants", ())) for item in data
    ]
    names = [o.name for o in found]
    if len(set(names)) != len(names):
        raise ConfigurationError("operators file: two operators have the same name")
    return found


class Credentials:
    """The operators, looked up by a presented token."""

    def __init__(self, operators: Iterable[Operator]) -> None:
        self.operators = tuple(operators)
        if not self.operators:
            raise ConfigurationError("the console needs at least one operator")
        digests = [o.token_digest for o in self.operators]
        if len(set(digests)) != len(digests):
            raise ConfigurationError("two operators have the same token")

    def check(self, token: str | None) -> Operator | None:
        """The operator whose token this is, or None; every digest is compared, in constant
        time, whatever matches."""
        found = matching([o.token_digest for o in self.operators], token)
        return None if found is None else self.operators[found]


IDLE_SECONDS: Final = 30 * 60
"""A session unused this long is closed (the operator logs in again)."""
MAX_AGE_SECONDS: Final = 12 * 60 * 60
"""A session is closed this long after its login, however busy."""


@dataclass
class _Session:
    operator: Operator
    opened: float
    seen: float


class Sessions:
    """Logged-in sessions: a random id (the cookie) -> its operator, in memory. A session
    expires when idle for `idle` seconds or `max_age` seconds after its login; `clock`
    is monotonic seconds (a test passes its own)."""

    def __init__(
        self,
        limit: int = MAX_SESSIONS,
        *,
        idle: float = IDLE_SECONDS,
        max_age: float = MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._by_id: dict[str, _Session] = {}
        self._limit = limit
        self.idle = idle
        self.max_age = max_age
        self._clock = clock

    def open(self, who: Operator) -> str:
        session = secrets.token_urlsafe(32)
        if len(self._by_id) >= self._limit:
            self._by_id.pop(next(iter(self._by_id)))
        now = self._clock()
        self._by_id[session] = _Session(who, now, now)
        return session

    def get(self, session: str | None) -> Operator | None:
        """The session's operator, if it is open and has not expired (it is closed then)."""
        found = self._by_id.get(session) if session else None
        if found is None:
            return None
        now = self._clock()
        if now - found.seen > self.idle or now - found.opened > self.max_age:
            self._by_id.pop(session or "", None)
            return None
        found.seen = now
        return found.operator

    def close(self, session: str | None) -> None:
        if session:
            self._by_id.pop(session, None)


LOGIN_ATTEMPTS: Final = 10
"""Failed logins a client may make per `LOGIN_WINDOW` seconds; more wait."""
LOGIN_WINDOW: Final = 60.0
MAX_CLIENTS: Final = 10_000
"""Clients whose failures are remembered at once (memory stays bounded)."""


class LoginThrottle:
    """Failed logins per client (its address): past `attempts` within `window` seconds,
    its next attempts are refused until the oldest failure leaves the window, so a token
    cannot be guessed at speed."""

    def __init__(
        self,
        attempts: int = LOGIN_ATTEMPTS,
        window: float = LOGIN_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempts = attempts
        self.window = window
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}

    def wait(self, client: str) -> float:
        """Seconds `client` must wait before its next attempt (0: it may try now)."""
        failures = self._failures.get(client)
        if not failures:
            return 0.0
        now = self._clock()
        while failures and now - failures[0] >= self.window:
            failures.popleft()
        if len(failures) < self.attempts:
            return 0.0
        return self.window - (now - failures[0])

    def failed(self, client: str) -> None:
        if client not in self._failures and len(self._failures) >= MAX_CLIENTS:
            self._failures.pop(next(iter(self._failures)))
        self._failures.setdefault(client, deque()).append(self._clock())
