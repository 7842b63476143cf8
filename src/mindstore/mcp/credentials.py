"""Who may reach the MCP server over HTTP (pure): each credential a name, a secret token,
one tenant, and optionally one owner of it.

The token rules are the console's (`mindstore.tokens`): at least 16 characters, only a
SHA-256 digest kept, a presented token compared with every digest in constant time. A
credential opens exactly its own scope: the HTTP app routes each request to the server
of its credential's tenant and owner, so no argument of a call can reach another.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mindstore.errors import ConfigurationError, ValidationError
from mindstore.ids import check_key, check_name
from mindstore.tokens import checked_digest, matching


@dataclass(frozen=True)
class Credential:
    """A client allowed in: its name, token digest, tenant and owner (None: every owner)."""

    name: str
    token_digest: bytes
    tenant: str
    owner: str | None = None

    @property
    def scope(self) -> tuple[str, str | None]:
        return self.tenant, self.owner


def credential(name: str, token: str, tenant: str, owner: str | None = None) -> Credential:
    """A credential from its name, token, tenant and optional owner (each checked:
    `ConfigurationError` naming the credential)."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError("credential name: expected a non-empty string")
    token_digest = checked_digest(token, f"credential {name!r}")
    try:
        check_key(tenant, "tenant")
        if owner is not None:
            check_name(owner, "owner")
    except ValidationError as error:
        raise ConfigurationError(f"credential {name!r}: {error}") from None
    return Credential(name, token_digest, tenant, owner)


def credentials_from_json(text: str) -> list[Credential]:
    """Credentials from a JSON list of `{"name", "token", "tenant", "owner"?}` objects (a
    credentials file: keep it readable by the server's user only)."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ConfigurationError(f"credentials file: not JSON ({error})") from None
    if not isinstance(data, list) or not all(isinstance(item, Mapping) for item in data):
        raise ConfigurationError("credentials file: expected a list of objects")
    for item in data:
        unknown = set(item) - {"name", "token", "tenant", "owner"}
        if unknown:
            raise ConfigurationError(f"credentials file: unknown field {sorted(unknown)[0]!r}")
    return [
        credential(item.get("name"), item.get("token"), item.get("tenant"), item.get("owner"))
        for item in data
    ]


class Credentials:
    """The credentials, looked up by a presented bearer token."""

    def __init__(self, credentials: Iterable[Credential]) -> None:
        self.credentials = tuple(credentials)
        if not self.credentials:
            raise ConfigurationError("the MCP server needs at least one credential")
        names = [c.name for c in self.credentials]
        if len(set(names)) != len(names):
            raise ConfigurationError("two credentials have the same name")
        digests = [c.token_digest for c in self.credentials]
        if len(set(digests)) != len(digests):
            raise ConfigurationError("two credentials have the same token")

    def check(self, token: str | None) -> Credential | None:
        """The credential whose token this is, or None (constant time per digest)."""
        found = matching([c.token_digest for c in self.credentials], token)
        return None if found is None else self.credentials[found]
