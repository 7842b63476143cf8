"""A tenant's unwrapped data keys, as the pure walks read them (`fields.KeySource`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.errors import CryptoError, KeyShredded

__all__ = ["MissingKey", "OrphanedKeys", "TenantKeys"]


class MissingKey(CryptoError):
    """A ciphertext names a data key version this keyring does not hold (yet)."""

    def __init__(self, tenant: str, version: int) -> None:
        self.tenant, self.version = tenant, version
        super().__init__(f"tenant {tenant!r} has no data key version {version}")


class OrphanedKeys(MissingKey):
    """The tenant's key provider holds an active key (KEK) for it, but the database holds
    none of its data keys: they were deleted (tampering), or the database is a copy older
    than the tenant's first key. Not a new tenant: nothing is read in the clear and no new
    data key is made over its content (docs/encryption.md, "Sealed-only tenants")."""

    def __init__(self, tenant: str) -> None:
        self.tenant, self.version = tenant, 0
        CryptoError.__init__(
            self,
            f"the data keys of tenant {tenant!r} are missing from the database, but its key "
            "provider holds an active key for it: they were deleted (tampering) or this is "
            "a copy older than its first key; restore its data_keys from a backup "
            "(nothing was read in the clear, and no new key was made)",
        )


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
    orphaned: bool = False
    """The provider holds an active KEK for the tenant but the database none of its data
    keys (`OrphanedKeys`): read as sealed-only, every key asked for refused."""
    legacy_bindings: bool = True
    """Ciphertexts of format 1 (before format 2 bound more, `aead.open_value`) still open;
    False once a sweep re-sealed everything as format 2 (`Keyring.seal_only`)."""

    def current(self) -> tuple[int, AESGCM]:
        if self.shredded:
            raise KeyShredded(self.tenant)
        if self.orphaned:
            raise OrphanedKeys(self.tenant)
        if not self.keys:
            raise MissingKey(self.tenant, 1)
        version = max(self.keys)
        return version, self.keys[version]

    def key(self, version: int) -> AESGCM:
        if self.shredded:
            raise KeyShredded(self.tenant)
        if self.orphaned:
            raise OrphanedKeys(self.tenant)
        found = self.keys.get(version)
        if found is None:
            raise MissingKey(self.tenant, version)
        return found
