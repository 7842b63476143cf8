"""`GcpKmsProvider`: each tenant's key-encryption key is a CryptoKey in Google Cloud KMS.

The provider talks to Cloud KMS through google-cloud-kms's
``KeyManagementServiceAsyncClient`` (or anything with its methods: `GcpKmsClient`);
mindstore itself never imports a Google Cloud SDK.

* **One CryptoKey per tenant** in one key ring (made by the operator; key rings cannot
  be deleted, so the provider never makes one). The key id is ``<prefix>-<tenant>``
  (`crypto.providers.naming.gcp_key_id`); the first `wrap` makes the key, with
  ``destroy_scheduled_duration`` as given.
* **encrypt and decrypt** pass the context as ``additional_authenticated_data``, so a
  wrapped key moved to another context is refused by Cloud KMS itself
  (``InvalidArgument``), as is another key's ciphertext.
* **destroy** labels the key ``mindstore-shredded=true``, then schedules every
  CryptoKeyVersion for destruction (``DESTROY_SCHEDULED``; Cloud KMS destroys the key
  material after the key's scheduled-destruction duration, 24 hours by default, and an
  operator can restore a version until then). Cloud KMS never deletes a CryptoKey and
  never reuses its name, and the label stays after the versions are gone: it is the
  lasting "shredded" mark `wrap` and `status` read, so a shredded tenant never gets a
  new key. A tenant shredded before it had a key gets a key with no version and the
  label.
* **Refusals**: a refusal of encrypt or decrypt is `KeyShredded` if the tenant's key is
  destroyed (labelled, or its primary version destroyed or scheduled for it), a
  `CryptoError` otherwise. ``ServiceUnavailable``, ``DeadlineExceeded``, other server
  errors, ``TooManyRequests``/``ResourceExhausted``, ``Aborted``, a ``RetryError``,
  connection errors and timeouts are `KeyProviderUnavailable`. Anything else is raised
  as it came. google.api_core's exceptions are recognised by class name (it is not
  imported).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from datetime import timedelta
from enum import IntEnum
from typing import Protocol, TypeVar

from mindstore.crypto.provider import KekState
from mindstore.crypto.providers.naming import check_prefix, gcp_key_id
from mindstore.crypto.providers.refusals import refusal_error
from mindstore.errors import CryptoError, KeyProviderUnavailable, KeyShredded, ValidationError
from mindstore.ids import check_key

__all__ = [
    "GcpCryptoKey",
    "GcpCryptoKeyVersion",
    "GcpDecryptResponse",
    "GcpEncryptResponse",
    "GcpKmsClient",
    "GcpKmsProvider",
    "VersionState",
]

SHREDDED_LABEL = "mindstore-shredded"
MIN_DESTROY_SCHEDULED = timedelta(hours=24)
MAX_DESTROY_SCHEDULED = timedelta(days=120)
_KEY_RING = re.compile(r"projects/[^/]+/locations/[^/]+/keyRings/[A-Za-z0-9_-]{1,63}")
_PURPOSE_ENCRYPT_DECRYPT = 1
_GOOGLE_SYMMETRIC_ENCRYPTION = 1
_PROTECTION_LEVELS = {"SOFTWARE": 1, "HSM": 2}
_UNAVAILABLE = frozenset({
    "ServerError", "TooManyRequests", "GatewayTimeout", "RetryError", "Aborted", "Cancelled",
})  # fmt: skip
"""google.api_core exception classes (and their subclasses) that decide nothing."""
_Answer = TypeVar("_Answer")


class VersionState(IntEnum):
    """``CryptoKeyVersion.CryptoKeyVersionState`` of Cloud KMS (the same numbers)."""

    CRYPTO_KEY_VERSION_STATE_UNSPECIFIED = 0
    ENABLED = 1
    DISABLED = 2
    DESTROYED = 3
    DESTROY_SCHEDULED = 4
    PENDING_GENERATION = 5
    PENDING_IMPORT = 6
    IMPORT_FAILED = 7
    GENERATION_FAILED = 8
    PENDING_EXTERNAL_DESTRUCTION = 9
    EXTERNAL_DESTRUCTION_FAILED = 10


_GONE = frozenset({
    VersionState.DESTROYED, VersionState.DESTROY_SCHEDULED,
    VersionState.PENDING_EXTERNAL_DESTRUCTION, VersionState.EXTERNAL_DESTRUCTION_FAILED,
})  # fmt: skip
_NOT_YET = frozenset({VersionState.PENDING_GENERATION, VersionState.PENDING_IMPORT})


class GcpCryptoKeyVersion(Protocol):
    """The fields of a ``CryptoKeyVersion`` the provider reads."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> int: ...


class GcpCryptoKey(Protocol):
    """The fields of a ``CryptoKey`` the provider reads (``primary`` is an empty
    version, name ``""``, when the key has none)."""

    @property
    def name(self) -> str: ...
    @property
    def primary(self) -> GcpCryptoKeyVersion: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


class GcpEncryptResponse(Protocol):
    @property
    def ciphertext(self) -> bytes: ...


class GcpDecryptResponse(Protocol):
    @property
    def plaintext(self) -> bytes: ...


class GcpKmsClient(Protocol):
    """The ``KeyManagementServiceAsyncClient`` methods the provider calls, each with a
    ``request`` mapping (google-cloud-kms accepts a dict for every request)."""

    async def create_crypto_key(self, request: dict[str, object]) -> GcpCryptoKey: ...
    async def get_crypto_key(self, request: dict[str, object]) -> GcpCryptoKey: ...
    async def update_crypto_key(self, request: dict[str, object]) -> GcpCryptoKey: ...
    async def list_crypto_key_versions(
        self, request: dict[str, object]
    ) -> AsyncIterable[GcpCryptoKeyVersion]: ...
    async def destroy_crypto_key_version(
        self, request: dict[str, object]
    ) -> GcpCryptoKeyVersion: ...
    async def encrypt(self, request: dict[str, object]) -> GcpEncryptResponse: ...
    async def decrypt(self, request: dict[str, object]) -> GcpDecryptResponse: ...


class _Refused(Exception):
    """Cloud KMS answered with an error that decides something (not an outage)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def _classes(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


class GcpKmsProvider:
    """A `KeyProvider` keeping one Cloud KMS CryptoKey per tenant in one key ring."""

    def __init__(
        self,
        client: GcpKmsClient,
        key_ring: str,
        *,
        prefix: str = "mindstore",
        destroy_scheduled_duration: timedelta = MIN_DESTROY_SCHEDULED,
        protection_level: str = "SOFTWARE",
    ) -> None:
        """
        Args:
            client: A ``KeyManagementServiceAsyncClient`` (or any `GcpKmsClient`).
            key_ring: The key ring's resource name,
                ``projects/<project>/locations/<location>/keyRings/<ring>``; it must exist.
            prefix: Starts every key id: ``<prefix>-<tenant>``. 1-16 characters of
                ``[A-Za-z0-9_]``; one prefix per deployment.
            destroy_scheduled_duration: How long a shredded tenant's versions stay
                ``DESTROY_SCHEDULED`` before Cloud KMS destroys them: 24 hours to 120
                days (set on each key when it is made; a key's own value never changes).
            protection_level: ``"SOFTWARE"`` or ``"HSM"``.

        Raises:
            ValidationError: An argument out of range (named).
        """
        if not isinstance(key_ring, str) or not _KEY_RING.fullmatch(key_ring):
            raise ValidationError(
                "invalid key_ring: expected projects/<project>/locations/<location>/"
                f"keyRings/<ring>, got {key_ring!r}"
            )
        if not isinstance(destroy_scheduled_duration, timedelta) or not (
            MIN_DESTROY_SCHEDULED <= destroy_scheduled_duration <= MAX_DESTROY_SCHEDULED
        ):
            raise ValidationError(
                "invalid destroy_scheduled_duration: expected a timedelta from 24 hours to "
                f"120 days (what Cloud KMS accepts), got {destroy_scheduled_duration!r}"
            )
        if protection_level not in _PROTECTION_LEVELS:
            raise ValidationError(
                f"invalid protection_level: expected 'SOFTWARE' or 'HSM', got {protection_level!r}"
            )
        self.key_ring = key_ring
        self.prefix = check_prefix(prefix, limit=16)
        self.destroy_scheduled_duration = destroy_scheduled_duration
        self.protection_level = protection_level
        self._client = client

    @property
    def provider_id(self) -> str:
        """``gcp-kms:<key ring>``."""
        return f"gcp-kms:{self.key_ring}"

    def key_name(self, tenant: str) -> str:
        """The resource name of `tenant`'s CryptoKey."""
        return f"{self.key_ring}/cryptoKeys/{gcp_key_id(self.prefix, tenant)}"

    # ------------------------------------------------------------------ calls
    async def _call(self, method: str, call: Callable[[], Awaitable[_Answer]]) -> _Answer:
        """One Cloud KMS call; its errors as `_Refused` or `KeyProviderUnavailable`."""
        try:
            return await call()
        except Exception as exc:
            names = _classes(exc)
            if "GoogleAPIError" in names:
                if names & _UNAVAILABLE:
                    raise KeyProviderUnavailable(
                        f"Cloud KMS did not answer {method} ({type(exc).__name__}): retry later"
                    ) from exc
                raise _Refused(type(exc).__name__, str(exc)) from exc
            if isinstance(exc, ConnectionError | TimeoutError):
                raise KeyProviderUnavailable(
                    f"Cloud KMS could not be reached ({method}): {exc}"
                ) from exc
            raise

    async def _get(self, name: str) -> GcpCryptoKey | None:
        try:
            return await self._call(
                "GetCryptoKey", lambda: self._client.get_crypto_key(request={"name": name})
            )
        except _Refused as refusal:
            if refusal.kind == "NotFound":
                return None
            raise CryptoError(f"Cloud KMS refused GetCryptoKey of {name!r}: {refusal}") from None

    async def _create(self, tenant: str, *, shredded: bool) -> bool:
        """Make `tenant`'s CryptoKey (with a first version, or none and the shredded
        label); False if it exists already (made meanwhile by another process)."""
        labels = {"mindstore-role": "tenant-kek"}
        if shredded:
            labels[SHREDDED_LABEL] = "true"
        request: dict[str, object] = {
            "parent": self.key_ring,
            "crypto_key_id": gcp_key_id(self.prefix, tenant),
            "crypto_key": {
                "purpose": _PURPOSE_ENCRYPT_DECRYPT,
                "version_template": {
                    "algorithm": _GOOGLE_SYMMETRIC_ENCRYPTION,
                    "protection_level": _PROTECTION_LEVELS[self.protection_level],
                },
                "destroy_scheduled_duration": self.destroy_scheduled_duration,
                "labels": labels,
            },
            "skip_initial_version_creation": shredded,
        }
        try:
            await self._call(
                "CreateCryptoKey", lambda: self._client.create_crypto_key(request=request)
            )
        except _Refused as refusal:
            if refusal.kind == "AlreadyExists":
                return False
            raise CryptoError(
                f"Cloud KMS refused CreateCryptoKey for {tenant!r}: {refusal}"
            ) from None
        return True

    @staticmethod
    def _destroyed(key: GcpCryptoKey) -> bool:
        if key.labels.get(SHREDDED_LABEL) == "true":
            return True
        return bool(key.primary.name) and key.primary.state in _GONE

    async def _shredded_or_refused(self, tenant: str, what: str, refusal: _Refused) -> CryptoError:
        """The error for a refused encrypt or decrypt: `KeyShredded` once the tenant's
        key is destroyed, a `CryptoError` naming Cloud KMS's reason otherwise."""
        state = await self.status(tenant)
        return refusal_error(state, tenant, what, refusal, service="Cloud KMS")

    # ------------------------------------------------------------------ KeyProvider
    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        """`data_key` encrypted by the tenant's CryptoKey (made now if it has none),
        `context` as additional authenticated data. `KeyShredded` once labelled shredded."""
        name = self.key_name(check_key(tenant, "tenant"))
        key = await self._get(name)
        if key is None:
            await self._create(tenant, shredded=False)  # ours, or the one made meanwhile
            key = await self._get(name)
            if key is None:
                raise CryptoError(f"Cloud KMS lost the key of tenant {tenant!r} just made")
        if self._destroyed(key):
            raise KeyShredded(tenant)
        request: dict[str, object] = {
            "name": name, "plaintext": bytes(data_key),
            "additional_authenticated_data": bytes(context),
        }  # fmt: skip
        try:
            answer = await self._call("Encrypt", lambda: self._client.encrypt(request=request))
        except _Refused as refusal:
            raise await self._shredded_or_refused(tenant, "wrap", refusal) from None
        return bytes(answer.ciphertext)

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        """The data key back (decrypt with `context` as additional authenticated data)."""
        name = self.key_name(check_key(tenant, "tenant"))
        request: dict[str, object] = {
            "name": name, "ciphertext": bytes(wrapped),
            "additional_authenticated_data": bytes(context),
        }  # fmt: skip
        try:
            answer = await self._call("Decrypt", lambda: self._client.decrypt(request=request))
        except _Refused as refusal:
            raise await self._shredded_or_refused(tenant, "unwrap", refusal) from None
        return bytes(answer.plaintext)

    async def destroy(self, tenant: str) -> None:
        """Label the tenant's key shredded and schedule every version's destruction (a
        tenant without a key gets a labelled key with no version)."""
        name = self.key_name(check_key(tenant, "tenant"))
        key = await self._get(name)
        if key is None:
            if await self._create(tenant, shredded=True):
                return
            key = await self._get(name)  # a wrap made it meanwhile: shred that one
            if key is None:
                raise CryptoError(f"Cloud KMS lost the key of tenant {tenant!r} just made")
        if key.labels.get(SHREDDED_LABEL) != "true":
            labels = {**key.labels, SHREDDED_LABEL: "true"}
            request: dict[str, object] = {
                "crypto_key": {"name": name, "labels": labels},
                "update_mask": {"paths": ["labels"]},
            }
            try:
                await self._call(
                    "UpdateCryptoKey", lambda: self._client.update_crypto_key(request=request)
                )
            except _Refused as refusal:
                raise CryptoError(f"Cloud KMS refused to label {name!r}: {refusal}") from None
        await self._destroy_versions(name)

    async def _destroy_versions(self, name: str) -> None:
        pending: list[str] = []

        async def listed() -> list[GcpCryptoKeyVersion]:
            versions = await self._client.list_crypto_key_versions(request={"parent": name})
            return [version async for version in versions]

        try:
            versions = await self._call("ListCryptoKeyVersions", listed)
        except _Refused as refusal:
            raise CryptoError(
                f"Cloud KMS refused to list the versions of {name!r}: {refusal}"
            ) from None
        for version in versions:
            state = version.state
            if state in _NOT_YET:
                pending.append(version.name)
            if state not in (VersionState.ENABLED, VersionState.DISABLED):
                continue
            await self._destroy_version(version.name)
        if pending:
            raise KeyProviderUnavailable(
                f"Cloud KMS is still making versions {pending} of {name!r}: the shred is "
                "recorded (the key is labelled); run it again to destroy them"
            )

    async def _destroy_version(self, name: str) -> None:
        try:
            await self._call(
                "DestroyCryptoKeyVersion",
                lambda: self._client.destroy_crypto_key_version(request={"name": name}),
            )
        except _Refused as refusal:
            if refusal.kind != "FailedPrecondition":  # scheduled meanwhile: done
                raise CryptoError(f"Cloud KMS refused to destroy {name!r}: {refusal}") from None

    async def status(self, tenant: str) -> KekState:
        """From the tenant's CryptoKey: none is "absent"; labelled shredded, or its
        primary version destroyed or scheduled for it, "destroyed"; otherwise "active"."""
        key = await self._get(self.key_name(check_key(tenant, "tenant")))
        if key is None:
            return "absent"
        return "destroyed" if self._destroyed(key) else "active"
