"""`AwsKmsProvider`: each tenant's key-encryption key is a KMS key of its own in AWS KMS.

The provider talks to KMS through an aiobotocore-style client (`AwsKmsClient`: the few
methods used, keyword arguments as in boto3); mindstore itself never imports an AWS SDK.

* **One KMS key per tenant**, found by its alias ``alias/<prefix>-<tenant>``
  (`crypto.providers.naming`). The first `wrap` makes it (CreateKey, then CreateAlias;
  a process that loses the race to create the alias schedules its own new key for
  deletion and uses the winner's).
* **Encrypt and Decrypt** name the alias and pass an encryption context holding the
  tenant and the context (hex), so a wrapped key moved to another tenant or context is
  refused by KMS itself (``InvalidCiphertextException``, ``IncorrectKeyException``).
* **destroy** disables the tenant's key (it stops decrypting at once), schedules its
  deletion after ``pending_window_days`` (7-30, as KMS allows), and points the tenant's
  alias at the provider's **tombstone key** (``alias/<prefix>/shredded``: one disabled
  key per prefix, made on the first shred). KMS deletes a key's aliases with the key, so
  without the tombstone a shredded tenant's alias would vanish after the window and the
  next `wrap` would make the tenant a fresh key; a tenant alias on the tombstone is the
  lasting "shredded" mark, and it is what `status` reads.
* **Refusals**: a refusal of Encrypt or Decrypt is `KeyShredded` if the tenant's key is
  destroyed (its alias on the tombstone, or the key pending deletion), a `CryptoError`
  otherwise (another tenant's or a changed blob, another context, a disabled key, no key
  at all). Throttling, KMS's internal and dependency errors, 5xx answers, connection
  errors and timeouts are `KeyProviderUnavailable`. Anything else (missing credentials,
  a bug) is raised as it came.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypedDict, TypeVar

from mindstore.crypto.provider import KekState
from mindstore.crypto.providers.naming import aws_alias, aws_tombstone_alias, check_prefix
from mindstore.errors import CryptoError, KeyProviderUnavailable, KeyShredded, ValidationError
from mindstore.ids import check_key

__all__ = ["AwsKmsClient", "AwsKmsProvider", "AwsTag"]

MIN_PENDING_WINDOW_DAYS = 7
MAX_PENDING_WINDOW_DAYS = 30
TENANT_CONTEXT_KEY = "mindstore:tenant"
CONTEXT_KEY = "mindstore:context"
_ROLE_TAG = "mindstore:role"
_TENANT_TAG = "mindstore:tenant"
_UNAVAILABLE_CODES = frozenset({
    "ThrottlingException", "Throttling", "ThrottledException", "TooManyRequestsException",
    "RequestLimitExceeded", "KMSInternalException", "DependencyTimeoutException",
    "KeyUnavailableException", "ServiceUnavailable", "ServiceUnavailableException",
    "InternalFailure", "InternalError", "RequestTimeout", "RequestTimeoutException",
})  # fmt: skip
"""Error codes that mean KMS did not decide (retry later)."""
_TRANSPORT_ERRORS = frozenset({
    "EndpointConnectionError", "ConnectionClosedError", "ConnectTimeoutError",
    "ReadTimeoutError", "HTTPClientError", "ProxyConnectionError",
})  # fmt: skip
"""botocore's transport errors, by class name (botocore is not imported)."""
_DESTROYED_STATES = frozenset({"PendingDeletion", "PendingReplicaDeletion"})
_Answer = TypeVar("_Answer")


class AwsTag(TypedDict):
    """A KMS tag, as CreateKey takes it."""

    TagKey: str
    TagValue: str


class AwsKmsClient(Protocol):
    """The AWS KMS client methods the provider calls (aiobotocore's ``kms`` client, or
    any object with these coroutines). Answers are the API's JSON as mappings; errors
    are botocore's: a ``ClientError`` carries ``response["Error"]["Code"]``."""

    async def create_key(
        self, *, Description: str, Tags: Sequence[AwsTag]
    ) -> Mapping[str, object]: ...
    async def create_alias(self, *, AliasName: str, TargetKeyId: str) -> object: ...
    async def update_alias(self, *, AliasName: str, TargetKeyId: str) -> object: ...
    async def delete_alias(self, *, AliasName: str) -> object: ...
    async def describe_key(self, *, KeyId: str) -> Mapping[str, object]: ...
    async def disable_key(self, *, KeyId: str) -> object: ...
    async def schedule_key_deletion(self, *, KeyId: str, PendingWindowInDays: int) -> object: ...
    async def encrypt(
        self, *, KeyId: str, Plaintext: bytes, EncryptionContext: Mapping[str, str]
    ) -> Mapping[str, object]: ...
    async def decrypt(
        self, *, CiphertextBlob: bytes, KeyId: str, EncryptionContext: Mapping[str, str]
    ) -> Mapping[str, object]: ...


class _Refused(Exception):
    """KMS answered with an error that decides something (not an outage)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code


def _error_code(exc: BaseException) -> tuple[str, str, int] | None:
    """(code, message, HTTP status) of a botocore ``ClientError``; None for other errors."""
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    error = response.get("Error")
    if not isinstance(error, Mapping) or not isinstance(error.get("Code"), str):
        return None
    metadata = response.get("ResponseMetadata")
    status = metadata.get("HTTPStatusCode") if isinstance(metadata, Mapping) else None
    message = error.get("Message")
    return (
        str(error["Code"]),
        message if isinstance(message, str) else "",
        status if isinstance(status, int) else 0,
    )


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return any(cls.__name__ in _TRANSPORT_ERRORS for cls in type(exc).__mro__)


class AwsKmsProvider:
    """A `KeyProvider` keeping one AWS KMS key per tenant."""

    def __init__(
        self, client: AwsKmsClient, *, prefix: str = "mindstore", pending_window_days: int = 30
    ) -> None:
        """
        Args:
            client: An aiobotocore ``kms`` client (or any `AwsKmsClient`), already open.
            prefix: Starts every alias the provider makes: ``alias/<prefix>-<tenant>``
                and the tombstone's ``alias/<prefix>/shredded``. 1-32 characters of
                ``[A-Za-z0-9_]``; one prefix per deployment.
            pending_window_days: How long KMS keeps a shredded tenant's key (disabled)
                before deleting it: 7 to 30 days, as ScheduleKeyDeletion allows.

        Raises:
            ValidationError: A `prefix` or `pending_window_days` out of range (named).
        """
        if (
            isinstance(pending_window_days, bool)
            or not isinstance(pending_window_days, int)
            or not MIN_PENDING_WINDOW_DAYS <= pending_window_days <= MAX_PENDING_WINDOW_DAYS
        ):
            raise ValidationError(
                f"invalid pending_window_days: expected a whole number of days from "
                f"{MIN_PENDING_WINDOW_DAYS} to {MAX_PENDING_WINDOW_DAYS} (what "
                f"ScheduleKeyDeletion accepts), got {pending_window_days!r}"
            )
        self.prefix = check_prefix(prefix)
        if self.prefix.lower() == "aws":
            raise ValidationError("invalid prefix: 'aws' (alias/aws/ is reserved by AWS)")
        self.pending_window_days = pending_window_days
        self._client = client
        self._tombstone_id: str | None = None

    @property
    def provider_id(self) -> str:
        """``aws-kms:<prefix>``."""
        return f"aws-kms:{self.prefix}"

    def alias(self, tenant: str) -> str:
        """The alias of `tenant`'s key (`crypto.providers.naming.aws_alias`)."""
        return aws_alias(self.prefix, tenant)

    # ------------------------------------------------------------------ calls
    async def _call(self, method: str, call: Callable[[], Awaitable[_Answer]]) -> _Answer:
        """One KMS call; its errors as `_Refused` or `KeyProviderUnavailable`."""
        try:
            return await call()
        except Exception as exc:
            found = _error_code(exc)
            if found is None:
                if _is_transport_error(exc):
                    raise KeyProviderUnavailable(
                        f"AWS KMS could not be reached ({method}): {exc}"
                    ) from exc
                raise
            code, message, status = found
            if code in _UNAVAILABLE_CODES or status >= 500:
                raise KeyProviderUnavailable(
                    f"AWS KMS did not answer {method} ({code}): retry later"
                ) from exc
            raise _Refused(code, message) from exc

    async def _describe(self, key_id: str) -> tuple[str, str] | None:
        """(KeyId, KeyState) of a key or alias, or None if KMS has no such key."""
        try:
            answer = await self._call(
                "DescribeKey", lambda: self._client.describe_key(KeyId=key_id)
            )
        except _Refused as refusal:
            if refusal.code == "NotFoundException":
                return None
            raise CryptoError(f"AWS KMS refused DescribeKey of {key_id!r}: {refusal}") from None
        metadata = answer.get("KeyMetadata")
        if not isinstance(metadata, Mapping):
            raise CryptoError(f"AWS KMS answered DescribeKey of {key_id!r} without KeyMetadata")
        found, state = metadata.get("KeyId"), metadata.get("KeyState")
        if not isinstance(found, str) or not isinstance(state, str):
            raise CryptoError(f"AWS KMS answered DescribeKey of {key_id!r} without a key state")
        return found, state

    def _encryption_context(self, tenant: str, context: bytes) -> dict[str, str]:
        return {TENANT_CONTEXT_KEY: tenant, CONTEXT_KEY: bytes(context).hex()}

    async def _tombstone(self, *, create: bool) -> str | None:
        """The tombstone key's id (made, disabled, if `create` and there is none yet)."""
        if self._tombstone_id is not None:
            return self._tombstone_id
        alias = aws_tombstone_alias(self.prefix)
        found = await self._describe(alias)
        if found is None and create:
            key_id = await self._create_key(
                f"mindstore tombstone of prefix {self.prefix!r}: a tenant alias pointing "
                "here was shredded. Never enable or delete this key.",
                {_ROLE_TAG: "tombstone"},
            )
            await self._refusable("DisableKey", lambda: self._client.disable_key(KeyId=key_id))
            if await self._link(alias, key_id):
                self._tombstone_id = key_id
                return key_id
            found = await self._describe(alias)
        if found is not None:
            self._tombstone_id = found[0]
        return self._tombstone_id

    async def _create_key(self, description: str, tags: Mapping[str, str]) -> str:
        try:
            answer = await self._call("CreateKey", lambda: self._client.create_key(
                Description=description,
                Tags=[AwsTag(TagKey=k, TagValue=v) for k, v in tags.items()],
            ))  # fmt: skip
        except _Refused as refusal:
            raise CryptoError(f"AWS KMS refused CreateKey: {refusal}") from None
        metadata = answer.get("KeyMetadata")
        key_id = metadata.get("KeyId") if isinstance(metadata, Mapping) else None
        if not isinstance(key_id, str):
            raise CryptoError("AWS KMS answered CreateKey without a KeyId")
        return key_id

    async def _link(self, alias: str, key_id: str) -> bool:
        """Point the new `alias` at the new key `key_id`; False (and the key scheduled
        for deletion: it never encrypted anything) if another process made `alias`. A
        call KMS did not answer may have made the alias: the key is kept then (an
        orphan key costs, and leaks nothing; deleting a key the alias points at would
        read as a shred)."""
        try:
            await self._call(
                "CreateAlias",
                lambda: self._client.create_alias(AliasName=alias, TargetKeyId=key_id),
            )
        except _Refused as refusal:
            await self._discard(key_id)
            if refusal.code == "AlreadyExistsException":
                return False
            raise CryptoError(f"AWS KMS refused CreateAlias {alias!r}: {refusal}") from None
        return True  # (KMS not answering: the alias may exist, so the key is kept)

    async def _discard(self, key_id: str) -> None:
        """Schedule an unused key's deletion, best effort (an orphan costs, leaks nothing)."""
        with contextlib.suppress(_Refused, KeyProviderUnavailable):
            await self._call("ScheduleKeyDeletion", lambda: self._client.schedule_key_deletion(
                KeyId=key_id, PendingWindowInDays=MIN_PENDING_WINDOW_DAYS
            ))  # fmt: skip

    async def _shredded_or_refused(self, tenant: str, what: str, refusal: _Refused) -> CryptoError:
        """The error for a refused Encrypt or Decrypt: `KeyShredded` once the tenant's
        key is destroyed, a `CryptoError` naming KMS's reason otherwise."""
        if await self.status(tenant) == "destroyed":
            return KeyShredded(tenant)
        if refusal.code == "NotFoundException":
            return CryptoError(f"AWS KMS holds no key for tenant {tenant!r} ({what})")
        return CryptoError(f"AWS KMS refused to {what} for tenant {tenant!r}: {refusal}")

    # ------------------------------------------------------------------ KeyProvider
    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        """`data_key` encrypted under the tenant's KMS key (made now if it has none), the
        tenant and `context` in the encryption context. `KeyShredded` once shredded."""
        alias = self.alias(check_key(tenant, "tenant"))
        plaintext, encryption_context = bytes(data_key), self._encryption_context(tenant, context)
        for _attempt in range(3):
            try:
                answer = await self._call("Encrypt", lambda: self._client.encrypt(
                    KeyId=alias, Plaintext=plaintext, EncryptionContext=encryption_context
                ))  # fmt: skip
            except _Refused as refusal:
                if refusal.code != "NotFoundException":
                    raise await self._shredded_or_refused(tenant, "wrap", refusal) from None
                key_id = await self._create_key(
                    f"mindstore key-encryption key of tenant {tenant!r}", {_TENANT_TAG: tenant}
                )
                await self._link(alias, key_id)  # ours, or the key another process linked
                continue
            blob = answer.get("CiphertextBlob")
            if not isinstance(blob, bytes | bytearray):
                raise CryptoError("AWS KMS answered Encrypt without a CiphertextBlob")
            return bytes(blob)
        raise CryptoError(f"the KMS alias {alias!r} of tenant {tenant!r} keeps disappearing")

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        """The data key back (Decrypt pinned to the tenant's alias and context)."""
        alias = self.alias(check_key(tenant, "tenant"))
        try:
            answer = await self._call("Decrypt", lambda: self._client.decrypt(
                CiphertextBlob=bytes(wrapped), KeyId=alias,
                EncryptionContext=self._encryption_context(tenant, context),
            ))  # fmt: skip
        except _Refused as refusal:
            raise await self._shredded_or_refused(tenant, "unwrap", refusal) from None
        plaintext = answer.get("Plaintext")
        if not isinstance(plaintext, bytes | bytearray):
            raise CryptoError("AWS KMS answered Decrypt without a Plaintext")
        return bytes(plaintext)

    async def destroy(self, tenant: str) -> None:
        """Disable the tenant's key, schedule its deletion, and point its alias at the
        tombstone (a tenant without a key gets an alias on the tombstone too)."""
        alias = self.alias(check_key(tenant, "tenant"))
        for _attempt in range(3):
            tombstone = await self._tombstone(create=True)
            assert tombstone is not None
            found = await self._describe(alias)
            if found is None:
                if await self._mark(alias, tombstone):
                    return
                continue  # a wrap made the tenant a key meanwhile: shred that one
            key_id, state = found
            if key_id == tombstone:
                return
            if state not in _DESTROYED_STATES:
                await self._disable_and_schedule(key_id)
            if await self._retarget(alias, tombstone):
                return
        raise CryptoError(f"the KMS alias {alias!r} of tenant {tenant!r} keeps changing")

    async def _disable_and_schedule(self, key_id: str) -> None:
        """Disable the key (it stops decrypting now), then schedule its deletion."""
        await self._refusable("DisableKey", lambda: self._client.disable_key(KeyId=key_id))
        await self._refusable("ScheduleKeyDeletion", lambda: self._client.schedule_key_deletion(
            KeyId=key_id, PendingWindowInDays=self.pending_window_days
        ))  # fmt: skip

    async def _refusable(self, method: str, call: Callable[[], Awaitable[object]]) -> None:
        """A call whose refusal ends the operation (a `CryptoError` naming it)."""
        try:
            await self._call(method, call)
        except _Refused as refusal:
            raise CryptoError(f"AWS KMS refused {method}: {refusal}") from None

    async def _mark(self, alias: str, tombstone: str) -> bool:
        """Make `alias` on the tombstone; False if the alias exists (made meanwhile)."""
        try:
            await self._call("CreateAlias", lambda: self._client.create_alias(
                AliasName=alias, TargetKeyId=tombstone
            ))  # fmt: skip
        except _Refused as refusal:
            if refusal.code == "AlreadyExistsException":
                return False
            raise CryptoError(f"AWS KMS refused CreateAlias {alias!r}: {refusal}") from None
        return True

    async def _retarget(self, alias: str, tombstone: str) -> bool:
        """Point `alias` at the tombstone. Where KMS refuses UpdateAlias from a key
        pending deletion, the alias is deleted and made again on the tombstone; False if
        a wrap made it again in between (on a new key, which `destroy` then shreds)."""
        try:
            await self._call("UpdateAlias", lambda: self._client.update_alias(
                AliasName=alias, TargetKeyId=tombstone
            ))  # fmt: skip
            return True
        except _Refused as refusal:
            if refusal.code != "KMSInvalidStateException":
                raise CryptoError(f"AWS KMS refused UpdateAlias {alias!r}: {refusal}") from None
        await self._refusable("DeleteAlias", lambda: self._client.delete_alias(AliasName=alias))
        return await self._mark(alias, tombstone)

    async def status(self, tenant: str) -> KekState:
        """From the tenant's alias: none is "absent"; on the tombstone, or on a key
        pending deletion, "destroyed"; otherwise "active" (a disabled key included)."""
        found = await self._describe(self.alias(check_key(tenant, "tenant")))
        if found is None:
            return "absent"
        key_id, state = found
        if state in _DESTROYED_STATES or key_id == await self._tombstone(create=False):
            return "destroyed"
        return "active"
