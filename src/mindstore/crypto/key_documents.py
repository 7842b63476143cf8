"""A data key's stored document in `data_keys` (pure): its id, the tenant's id range, the
shred tombstone, and what its wrap is bound to (the flags and the associated data).

The keyring (`crypto.keyring`) reads and writes these documents; backup and erase
(`backup.unit_export`, `backup.shape_units`) recognise a tenant-wrapped key by `TENANT_KEK`.
Kept apart so the keyring module holds the keyring's behaviour and this one the format it
stores, which a change to either must keep readable.
"""

from __future__ import annotations

from typing import Any

from mindstore.crypto.aead import FORMAT, context_bytes

__all__ = [
    "BINDINGS", "TENANT_KEK", "key_id", "tenant_filter", "tombstone_id", "wrap_context",
    "wrap_flags",
]  # fmt: skip

TENANT_KEK = "tenant"
"""`kek` of a data key wrapped by the tenant's key in the provider."""

BINDINGS = FORMAT
"""A data key's `bindings` flag: the tenant's sweep re-sealed everything in this
ciphertext format, so an older one (`aead.LEGACY_FORMAT`) is refused from then on
(`TenantKeys.legacy_bindings`); bound into the wrap like `sealed_only`."""


def tombstone_id(tenant: str) -> str:
    """The document a shred leaves in place of the tenant's keys."""
    return f"{tenant}/shredded"


def wrap_flags(document: dict[str, Any]) -> str:
    """The flags a data key's wrap is bound to: which key wraps it, and sealed-only."""
    flags = []
    if document.get("kek") == TENANT_KEK:
        flags.append("tenant-kek")
    if document.get("sealed_only") is True:
        flags.append("sealed-only")
    if document.get("bindings") == BINDINGS:
        flags.append(f"bindings-{BINDINGS}")
    return " ".join(flags)


def wrap_context(tenant: str, version: int, flags: str = "") -> bytes:
    """The associated data of a data key's wrap: a wrap moved to another tenant or
    version, or with a flag removed, does not unwrap."""
    return context_bytes(("mindstore data key", tenant, str(version), flags))


def key_id(tenant: str, version: int) -> str:
    """The `_id` of the tenant's data key `version`."""
    return f"{tenant}/v{version}"


def tenant_filter(tenant: str) -> dict[str, Any]:
    """All of a tenant's documents, found through the `_id` index (`tenant/...`; the
    character after ``/`` is ``0``, and no tenant id holds ``/``)."""
    return {"_id": {"$gte": f"{tenant}/", "$lt": f"{tenant}0"}, "tenant": tenant}
