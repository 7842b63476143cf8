"""Who may see what (pure): operators, their credentials and the tenants each may see.

An operator is a name, a secret token and the tenants it may see (a set, or every tenant).
Only a SHA-256 digest of each token is kept, and a presented token is compared with every
digest in constant time, so a timing side channel does not tell how much of a guess was
right. Sessions are random ids held in memory by the app (`Sessions`): the cookie carries
the id, never the token, and a restart logs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from mindstore.errors import ConfigurationError

ALL_TENANTS: Final = "*"
"""In an operator's tenant list: every tenant."""
MIN_TOKEN_CHARS: Final = 16
"""A shorter token is refused: it could be guessed."""
MAX_SESSIONS: Final = 10_000
"""Sessions kept at once; the oldest is dropped beyond it (memory stays bounded)."""


def digest(token: str) -> bytes:
    """The SHA-256 of a token: what is kept and compared."""
    return hashlib.sha256(token.encode("utf-8")).digest()


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
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise ConfigurationError(
            f"operator {name!r}: token must be a string of at least {MIN_TOKEN_CHARS} characters"
        )
    names = [tenants] if isinstance(tenants, str) else list(tenants)
    if not names or not all(isinstance(t, str) and t for t in names):
        raise ConfigurationError(f"operator {name!r}: tenants must be '*' or a list of tenants")
    scope = None if ALL_TENANTS in names else frozenset(names)
    return Operator(name=name, token_digest=digest(token), tenants=scope)


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
        if not token:
            return None
        presented = digest(token)
        found = None
        for candidate in self.operators:
            if hmac.compare_digest(candidate.token_digest, presented):
                found = candidate
        return found


class Sessions:
    """Logged-in sessions: a random id (the cookie) -> its operator, in memory."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._by_id: dict[str, Operator] = {}
        self._limit = limit

    def open(self, who: Operator) -> str:
        session = secrets.token_urlsafe(32)
        if len(self._by_id) >= self._limit:
            self._by_id.pop(next(iter(self._by_id)))
        self._by_id[session] = who
        return session

    def get(self, session: str | None) -> Operator | None:
        return self._by_id.get(session) if session else None

    def close(self, session: str | None) -> None:
        if session:
            self._by_id.pop(session, None)
