"""`VaultTransitProvider`: each tenant's key-encryption key is a HashiCorp Vault Transit key.

The provider speaks Vault's HTTP API through `VaultClient`, one coroutine
``request(method, path, json) -> (status, body)``: a few lines over httpx, aiohttp or
hvac (docs/key-providers.md has one), carrying the address, token and namespace.
mindstore itself imports no HTTP or Vault client.

* **One Transit key per tenant**, ``<prefix>-<tenant>``
  (`crypto.providers.naming.vault_key_name`), type ``aes256-gcm96``, not derived, not
  exportable; the first `wrap` makes it.
* **encrypt and decrypt** pass the context as ``associated_data`` (base64), so a
  wrapped key moved to another context fails Vault's tag check ("cipher: message
  authentication failed"), as does another tenant's ciphertext. ``associated_data``
  came with Vault 1.13; an older Vault ignores it and says so in the answer's warnings,
  and the provider then refuses to wrap rather than wrap without the context.
* **destroy** first makes the tenant's **tombstone**, a Transit key named
  ``<prefix>.shredded-<tenant>`` of type ``ed25519`` (a key that cannot encrypt), then
  sets ``deletion_allowed`` on the tenant's key and deletes it: Vault forgets the key at
  once. Vault keeps nothing of a deleted key, so the tombstone is the lasting "shredded"
  mark: `wrap` and `status` read it, a shredded tenant never gets a new key, and `wrap`
  reads it again after encrypting, so a wrap racing a shred cannot leave a new key
  behind. (Vault's own storage backups still hold the key until they expire:
  docs/key-providers.md.)
* **Errors**: 400, 403 and 404 answers are refusals (`KeyShredded` once the tenant's
  key is destroyed, a `CryptoError` otherwise, "no key for tenant" before any key was
  made); 412, 429 and 5xx answers, ``ConnectionError`` and ``TimeoutError`` (which the
  client raises when Vault cannot be reached) are `KeyProviderUnavailable`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Protocol

from mindstore.crypto.provider import KekState
from mindstore.crypto.providers.naming import check_prefix, vault_key_name, vault_tombstone_name
from mindstore.crypto.providers.refusals import refusal_error
from mindstore.errors import CryptoError, KeyProviderUnavailable, KeyShredded, ValidationError
from mindstore.ids import check_key

__all__ = ["VaultAnswer", "VaultClient", "VaultTransitProvider"]

KEY_TYPE = "aes256-gcm96"
TOMBSTONE_TYPE = "ed25519"
_MOUNT = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
_UNAVAILABLE_STATUSES = frozenset({412, 429})

VaultAnswer = tuple[int, Mapping[str, object] | None]
"""An HTTP status and the JSON body (None for an empty one, as a 204 has)."""


class VaultClient(Protocol):
    """Vault's HTTP API: one request, its status and JSON body. ``path`` starts with
    ``/v1/``; the client adds the address and the token (and a namespace, if any).
    When Vault cannot be reached it raises ``ConnectionError`` or ``TimeoutError``."""

    async def request(
        self, method: str, path: str, json: Mapping[str, object] | None = None
    ) -> VaultAnswer: ...


class _Refused(Exception):
    """Vault answered with an error that decides something (not an outage)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}")
        self.status = status


def _errors(body: Mapping[str, object] | None) -> str:
    found = body.get("errors") if body is not None else None
    if isinstance(found, list):
        return "; ".join(str(error).strip() for error in found)
    return ""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class VaultTransitProvider:
    """A `KeyProvider` keeping one Vault Transit key per tenant."""

    def __init__(
        self, client: VaultClient, *, mount: str = "transit", prefix: str = "mindstore"
    ) -> None:
        """
        Args:
            client: Sends requests to Vault (see `VaultClient`).
            mount: Where the Transit secrets engine is mounted (``transit``,
                ``secret/transit``...).
            prefix: Starts every key name: ``<prefix>-<tenant>`` and the tombstones'
                ``<prefix>.shredded-<tenant>``. 1-32 characters of ``[A-Za-z0-9_]``.

        Raises:
            ValidationError: A `mount` or `prefix` that cannot be one (named).
        """
        if not isinstance(mount, str) or not _MOUNT.fullmatch(mount) or ".." in mount:
            raise ValidationError(
                f"invalid mount: expected a Vault mount path such as 'transit', got {mount!r}"
            )
        self.mount = mount
        self.prefix = check_prefix(prefix)
        self._client = client

    @property
    def provider_id(self) -> str:
        """``vault-transit:<mount>/<prefix>``."""
        return f"vault-transit:{self.mount}/{self.prefix}"

    def key_name(self, tenant: str) -> str:
        """The Transit key name of `tenant`."""
        return vault_key_name(self.prefix, tenant)

    # ------------------------------------------------------------------ calls
    async def _request(
        self, method: str, path: str, json: Mapping[str, object] | None = None
    ) -> Mapping[str, object]:
        """One request to ``/v1/<mount>/<path>``; the body of a 2xx answer, errors as
        `_Refused` or `KeyProviderUnavailable`."""
        try:
            status, body = await self._client.request(method, f"/v1/{self.mount}/{path}", json)
        except (ConnectionError, TimeoutError) as exc:
            raise KeyProviderUnavailable(f"Vault could not be reached: {exc}") from exc
        if 200 <= status < 300:
            return body or {}
        if status >= 500 or status in _UNAVAILABLE_STATUSES:
            raise KeyProviderUnavailable(
                f"Vault did not answer {method} {path} (HTTP {status}: {_errors(body)}): "
                "retry later"
            )
        raise _Refused(status, _errors(body))

    async def _exists(self, name: str) -> bool:
        try:
            await self._request("GET", f"keys/{name}")
        except _Refused as refusal:
            if refusal.status == 404:
                return False
            raise CryptoError(f"Vault refused to read Transit key {name!r}: {refusal}") from None
        return True

    async def _create(self, name: str, key_type: str) -> None:
        """Make the Transit key `name` (Vault keeps an existing one as it is)."""
        try:
            await self._request("POST", f"keys/{name}", {
                "type": key_type, "derived": False, "exportable": False,
                "allow_plaintext_backup": False,
            })  # fmt: skip
        except _Refused as refusal:
            raise CryptoError(f"Vault refused to make Transit key {name!r}: {refusal}") from None

    async def _delete(self, name: str) -> None:
        """Allow the deletion of Transit key `name`, then delete it (gone already: done)."""
        try:
            await self._request("POST", f"keys/{name}/config", {"deletion_allowed": True})
            await self._request("DELETE", f"keys/{name}")
        except _Refused as refusal:
            if await self._exists(name):
                raise CryptoError(
                    f"Vault refused to delete Transit key {name!r}: {refusal}"
                ) from None

    async def _shredded_or_refused(self, tenant: str, what: str, refusal: _Refused) -> CryptoError:
        """The error for a refused encrypt or decrypt (`refusal_error`)."""
        state = await self.status(tenant)
        return refusal_error(state, tenant, what, refusal, service="Vault", key="Transit key")

    # ------------------------------------------------------------------ KeyProvider
    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        """`data_key` encrypted by the tenant's Transit key (made now if it has none),
        `context` as associated data. `KeyShredded` once the tenant's tombstone exists."""
        name, tombstone = self.key_name(check_key(tenant, "tenant")), self._tombstone(tenant)
        if await self._exists(tombstone):
            raise KeyShredded(tenant)
        if not await self._exists(name):
            await self._create(name, KEY_TYPE)
        try:
            body = await self._request("POST", f"encrypt/{name}", {
                "plaintext": _b64(bytes(data_key)), "associated_data": _b64(bytes(context)),
            })  # fmt: skip
        except _Refused as refusal:
            raise await self._shredded_or_refused(tenant, "wrap", refusal) from None
        warnings = body.get("warnings")
        if isinstance(warnings, list) and any("associated_data" in str(w) for w in warnings):
            raise CryptoError(
                "this Vault ignored associated_data (it needs Vault 1.13 or later): a data "
                "key wrapped without its context is not stored"
            )
        data = body.get("data")
        ciphertext = data.get("ciphertext") if isinstance(data, Mapping) else None
        if not isinstance(ciphertext, str) or not ciphertext.startswith("vault:"):
            raise CryptoError("Vault answered encrypt without a ciphertext")
        if await self._exists(tombstone):  # shredded while this wrap ran: leave no key
            await self._delete(name)
            raise KeyShredded(tenant)
        return ciphertext.encode("ascii")

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        """The data key back (decrypt with `context` as associated data)."""
        name = self.key_name(check_key(tenant, "tenant"))
        try:
            ciphertext = bytes(wrapped).decode("ascii")
        except UnicodeDecodeError:
            raise CryptoError(
                f"a data key of tenant {tenant!r} is not a Vault Transit ciphertext"
            ) from None
        try:
            body = await self._request("POST", f"decrypt/{name}", {
                "ciphertext": ciphertext, "associated_data": _b64(bytes(context)),
            })  # fmt: skip
        except _Refused as refusal:
            raise await self._shredded_or_refused(tenant, "unwrap", refusal) from None
        data = body.get("data")
        plaintext = data.get("plaintext") if isinstance(data, Mapping) else None
        try:
            if isinstance(plaintext, str):
                return base64.b64decode(plaintext, validate=True)
        except (binascii.Error, ValueError):
            pass
        raise CryptoError("Vault answered decrypt without a base64 plaintext")

    async def destroy(self, tenant: str) -> None:
        """Make the tenant's tombstone, then allow the deletion of its key and delete it."""
        name, tombstone = self.key_name(check_key(tenant, "tenant")), self._tombstone(tenant)
        if not await self._exists(tombstone):
            await self._create(tombstone, TOMBSTONE_TYPE)
        if await self._exists(name):
            await self._delete(name)

    def _tombstone(self, tenant: str) -> str:
        return vault_tombstone_name(self.prefix, tenant)

    async def status(self, tenant: str) -> KekState:
        """The tombstone exists: "destroyed"; else the key exists: "active"; else "absent"."""
        name = self.key_name(check_key(tenant, "tenant"))
        if await self._exists(self._tombstone(tenant)):
            return "destroyed"
        return "active" if await self._exists(name) else "absent"
