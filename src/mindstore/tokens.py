"""Bearer tokens (pure): the credential rules the console and the MCP server share.

A token is a secret of at least `MIN_TOKEN_CHARS` characters. Only its SHA-256 digest is
kept, and a presented token is compared with every kept digest in constant time, whatever
matches, so a timing side channel does not tell how much of a guess was right, nor which
credential it was close to.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from typing import Final

from mindstore.errors import ConfigurationError

MIN_TOKEN_CHARS: Final = 16
"""A shorter token is refused: it could be guessed."""


def digest(token: str) -> bytes:
    """The SHA-256 of a token: what is kept and compared."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def checked_digest(token: object, who: str) -> bytes:
    """The digest of a credential's token, refused (`ConfigurationError` naming `who`)
    unless it is a string of at least `MIN_TOKEN_CHARS` characters."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise ConfigurationError(
            f"{who}: token must be a string of at least {MIN_TOKEN_CHARS} characters"
        )
    return digest(token)


def matching(digests: Sequence[bytes], token: str | None) -> int | None:
    """The index of the digest `token` has, or None; every digest is compared, in
    constant time, whatever matches."""
    if not token:
        return None
    presented = digest(token)
    found = None
    for index, candidate in enumerate(digests):
        if hmac.compare_digest(candidate, presented):
            found = index
    return found


def new_token() -> str:
    """A fresh random token (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)
