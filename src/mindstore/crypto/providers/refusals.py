"""What a key provider raises when its service refuses a wrap or an unwrap. Pure: no I/O."""

from __future__ import annotations

from mindstore.crypto.provider import KekState
from mindstore.errors import CryptoError, KeyShredded


def refusal_error(
    state: KekState, tenant: str, what: str, refusal: Exception, *, service: str, key: str = "key"
) -> CryptoError:
    """The error for a refused `what` ("wrap", "unwrap"), given the state of the tenant's
    key: `KeyShredded` once it is destroyed, a `CryptoError` saying the `service` holds no
    such `key` when there is none, one naming the service's reason otherwise."""
    if state == "destroyed":
        return KeyShredded(tenant)
    if state == "absent":
        return CryptoError(f"{service} holds no {key} for tenant {tenant!r} ({what})")
    return CryptoError(f"{service} refused to {what} for tenant {tenant!r}: {refusal}")
