"""The master key: what wraps (encrypts) the data keys stored in the database.

mindstore never stores a master key. A `MasterKey` is anything with a `key_id` and async
`wrap` / `unwrap` of a data key under a context (the tenant and key version, bound as
associated data, so a wrapped key copied to another tenant or version does not unwrap).
`LocalMasterKey` is a 32-byte key held by the process (from a file, a secret manager,
the environment); a cloud KMS implements the same three members by calling its
encrypt/decrypt API with the context as its "encryption context" / "additional
authenticated data" (docs/encryption.md, "A KMS master key").
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.crypto.aead import KEY_BYTES
from mindstore.errors import ConfigurationError, CryptoError

__all__ = ["LocalMasterKey", "MasterKey"]

_WRAP_FORMAT = b"\x01"
_NONCE_BYTES = 12


@runtime_checkable
class MasterKey(Protocol):
    """Wraps and unwraps data keys. Implement it to keep the master key in a KMS."""

    @property
    def key_id(self) -> str:
        """Names the master key (stored next to each wrapped data key; never secret)."""
        ...

    async def wrap(self, data_key: bytes, context: bytes) -> bytes:
        """`data_key` encrypted, authenticated together with `context`."""
        ...

    async def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        """The data key back; `CryptoError` if `wrapped` or `context` is not what was
        wrapped (another tenant's key, a changed byte, another master key)."""
        ...


class LocalMasterKey:
    """A 32-byte AES-256-GCM master key held in this process."""

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise ConfigurationError(f"a master key is {KEY_BYTES} bytes")
        self._aead = AESGCM(key)
        self._id = "local:" + hashlib.sha256(b"mindstore master key id\x00" + key).hexdigest()[:16]

    @classmethod
    def generate(cls) -> LocalMasterKey:
        return cls(os.urandom(KEY_BYTES))

    @classmethod
    def from_file(cls, path: str | Path) -> LocalMasterKey:
        """Read a key file: 32 raw bytes, or 64 hex digits (whitespace around ignored)."""
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigurationError(f"cannot read master key file {str(path)!r}: {exc}") from None
        if len(raw) == KEY_BYTES:
            return cls(raw)
        text = raw.strip()
        try:
            key = bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            key = b""
        if len(key) != KEY_BYTES:
            raise ConfigurationError(
                f"master key file {str(path)!r}: expected {KEY_BYTES} raw bytes or "
                f"{KEY_BYTES * 2} hex digits"
            )
        return cls(key)

    @property
    def key_id(self) -> str:
        return self._id

    async def wrap(self, data_key: bytes, context: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return _WRAP_FORMAT + nonce + self._aead.encrypt(nonce, data_key, _WRAP_FORMAT + context)

    async def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        if wrapped[:1] != _WRAP_FORMAT or len(wrapped) < 1 + _NONCE_BYTES + 16:
            raise CryptoError("not a data key wrapped by a local master key")
        nonce = wrapped[1 : 1 + _NONCE_BYTES]
        try:
            return self._aead.decrypt(nonce, wrapped[1 + _NONCE_BYTES :], _WRAP_FORMAT + context)
        except InvalidTag:
            raise CryptoError(
                "a data key does not unwrap with this master key (another master key, "
                "or a wrapped key moved or changed)"
            ) from None
