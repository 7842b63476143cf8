"""A tenant's unwrapped data keys, as the pure walks read them (`fields.KeySource`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.errors import CryptoError, KeyShredded

__all__ = ["MissingKey", "TenantKeys"]


class MissingKey(CryptoError):
    """A ciphertext names a data key version this keyring does not hold (yet)."""

    def __init__(self, tenant: str, version: int) -> None:
        self.tenant, self.version = tenant, version
        super().__init__(f"tenant {tenant!r} has no data key version {version}")


@dataclass
class TenantKeys:
    """One tenant's unwrapped data keys (a `fields.KeySource`)."""

    tenant: str
    keys: dict[int, AESGCM] = field(default_factory=dict)
    shredded: bool = False
    loaded_at: float = 0.0
    sealed_only: bool = False
    """Every value the split seals must be a ciphertext: one in the clear is tampering
    (`fields.open_document` refuses it). True from a tenant's first key when it had no
    content yet, and after its re-encryption sweep finished (docs/encryption.md)."""
    legacy_bindings: bool = True
    """Ciphertexts of format 1 (before format 2 bound more, `aead.open_value`) still open;
    False once a sweep re-sealed everything as format 2 (`Keyring.seal_only`)."""

    def current(self) -> tuple[int, AESGCM]:
        if self.shredded:
            raise KeyShredded(self.tenant)
        if not self.keys:
            raise MissingKey(self.tenant, 1)
        version = max(self.keys)
        return version, self.keys[version]

    def key(self, version: int) -> AESGCM:
        if self.shredded:
            raise KeyShredded(self.tenant)
        found = self.keys.get(version)
        if found is None:
            raise MissingKey(self.tenant, version)
        return found
