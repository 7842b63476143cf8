"""Key providers: where a tenant's key-encryption key (KEK) lives, outside the database.

Each tenant's data keys are stored in the database (`data_keys`) wrapped by that
tenant's own KEK, which only the provider holds: a key (or key version) per tenant in a
KMS, or an entry of the local vault (`crypto.vault.LocalKeyVault`). So the wrapped data
keys can travel with every copy of the data (replicas, snapshots, dumps, mindstore
backups), and `destroy` in the provider is what shreds a tenant: from then on every copy
reads as `KeyShredded` (docs/encryption.md, "Threat model, copy by copy").

A provider is anything with the members of `KeyProvider`. The contract every
implementation keeps (tests/test_crypto_providers.py holds it to fakes of AWS KMS, Google Cloud
KMS and Vault Transit, in tests/kms_fakes.py):

* `wrap(tenant, data_key, context)` makes the tenant's KEK on first use; `context` is
  bound as associated data (KMS "encryption context", "additional authenticated data"),
  so a wrapped key copied to another tenant, version or flag does not unwrap. Two wraps
  of one key give different bytes (a fresh nonce each time).
* `unwrap(tenant, wrapped, context)` gives the data key back, or raises: `KeyShredded`
  once the tenant's KEK was destroyed; `CryptoError` when the provider refuses (another
  tenant's or a changed blob, another context, a tenant it has no key for);
  `KeyProviderUnavailable` when the provider cannot be reached (retryable: nothing was
  decided).
* `destroy(tenant)` destroys the tenant's KEK (idempotent; a tenant with no KEK is
  marked destroyed, so a late `wrap` cannot make a new one). A KMS may keep the key for
  its own deletion window; `status` says which.
* `status(tenant)` is "active", "destroyed" or "absent", without key material. The
  keyring asks it for a tenant with no data keys (active: they were deleted; destroyed:
  shredded) and around a shred (absent: not the provider that holds the tenant's KEK).
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

__all__ = ["KekState", "KeyProvider"]

KekState = Literal["active", "destroyed", "absent"]
"""A tenant's KEK in its provider: in use, destroyed (shredded), or never made."""


@runtime_checkable
class KeyProvider(Protocol):
    """Holds one key-encryption key per tenant and wraps that tenant's data keys with it."""

    @property
    def provider_id(self) -> str:
        """Names the provider (stored beside each wrapped data key; never secret)."""
        ...

    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        """`data_key` wrapped by the tenant's KEK (made now if it has none), bound to
        `context`. `KeyShredded` if the tenant's KEK was destroyed."""
        ...

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        """The data key back. `KeyShredded`, `CryptoError` or `KeyProviderUnavailable`
        as the module doc says."""
        ...

    async def destroy(self, tenant: str) -> None:
        """Destroy the tenant's KEK: every data key it wrapped, in every copy, is gone."""
        ...

    async def status(self, tenant: str) -> KekState:
        """Whether the tenant's KEK is in use, destroyed, or was never made."""
        ...
