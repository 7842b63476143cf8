"""Blind terms (pure): under a keyring the index stores keyed tokens, never words.

A tenant's search key is derived from its current data key (an AES-GCM encryption of a
fixed block under a fixed nonce and the tenant as associated data: a PRF of the key), so
it exists only while the data key does: a shred destroys it with the content. A term's
token is the first 16 bytes of HMAC-SHA256(search key, term), URL-safe base64: equal terms
give equal tokens within a tenant, so the index still shows how often a token occurs and
in which messages, never the word; another tenant's tokens for the same word differ.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["Blinder", "derive_search_key"]

_LABEL = b"mindstore search key v1"


def derive_search_key(data_key: AESGCM, tenant: str) -> bytes:
    """The tenant's 32-byte search key from its data key (see the module doc)."""
    block = data_key.encrypt(b"\x00" * 12, _LABEL.ljust(32, b"\x00"), tenant.encode())
    return hashlib.sha256(block).digest()


class Blinder:
    """Terms -> tokens under one search key."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._cache: dict[str, str] = {}

    def __call__(self, term: str) -> str:
        found = self._cache.get(term)
        if found is None:
            digest = hmac.new(self._key, term.encode("utf-8", "surrogatepass"), "sha256")
            found = base64.urlsafe_b64encode(digest.digest()[:16]).decode().rstrip("=")
            if len(self._cache) < 100_000:
                self._cache[term] = found
        return found
