"""In-memory fakes of AWS KMS, Google Cloud KMS and Vault Transit, for the key providers.

Each behaves as its service does where the providers depend on it: a key per name,
per-key state and deletion (AWS: disabled, pending deletion for a window, then deleted
with its aliases; Google Cloud: versions scheduled for destruction, destroyed after the
key's duration, keys never deleted; Vault: deleted at once, only once deletion is
allowed), context binding through the service's own AEAD (a wrong context or another
key's ciphertext is refused with the service's own error), and the service's errors in
the shape its client raises them (botocore's ``ClientError``, google.api_core's
exception classes, Vault's HTTP statuses). Faults are injected by call number.
Every call yields to the event loop first, so concurrent callers interleave.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.crypto.providers.gcp_kms import VersionState


class _Faults:
    """Calls numbered from 0; call n meets `faults[n]`: raised (or, for Vault, answered)
    instead of the call, or after the service acted (an answer lost on the way back)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.faults: dict[int, tuple[Any, bool]] = {}

    def fail_call(self, offset: int, fault: Any, *, after: bool = False) -> None:
        """The call `offset` calls from now meets `fault` (`after` the service acted)."""
        self.faults[len(self.calls) + offset] = (fault, after)

    async def _enter(self, operation: str, arguments: Any) -> tuple[Any, bool]:
        await asyncio.sleep(0)
        index = len(self.calls)
        self.calls.append((operation, arguments))
        return self.faults.pop(index, (None, False))

    def operations(self) -> list[str]:
        return [operation for operation, _ in self.calls]


def _api(
    operation: str,
) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """An API method of a fake: logged, and failing as `_Faults` says."""

    def decorate(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            request = args[0] if args else kwargs.get("request", kwargs)
            fault, after = await self._enter(operation, dict(request))
            if fault is not None and not after:
                raise fault
            if fault is None:
                return await method(self, *args, **kwargs)
            with contextlib.suppress(Exception):  # the service acts; its answer is lost
                await method(self, *args, **kwargs)
            raise fault

        return call

    return decorate


# =============================================================================== AWS KMS
class ClientError(Exception):
    """botocore.exceptions.ClientError's shape: ``response["Error"]["Code"]``."""

    def __init__(
        self, code: str, message: str = "", *, status: int = 400, operation: str = ""
    ) -> None:
        self.response = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        super().__init__(
            f"An error occurred ({code}) when calling the {operation} operation: {message}"
        )


class EndpointConnectionError(Exception):
    """botocore's (a BotoCoreError, not a ClientError), by name."""


class NoCredentialsError(Exception):
    """botocore's: a configuration error, not an outage."""


_ALIAS = re.compile(r"alias/[a-zA-Z0-9/_-]+")


@dataclass
class AwsKey:
    key_id: str
    material: bytes
    description: str
    tags: dict[str, str]
    state: str = "Enabled"
    deletion_day: int | None = None
    window: int | None = None


class FakeKms(_Faults):
    """AWS KMS: symmetric keys, aliases, encryption contexts, key states, deletion."""

    def __init__(self, *, update_alias_from_pending_deletion: bool = True) -> None:
        super().__init__()
        self.keys: dict[str, AwsKey] = {}
        self.aliases: dict[str, str] = {}
        self.day = 0
        self.update_alias_from_pending_deletion = update_alias_from_pending_deletion

    # ------------------------------------------------------------------ service
    def snapshot(self) -> object:
        keys = {k: (v.state, v.deletion_day) for k, v in self.keys.items()}
        return keys, dict(self.aliases)

    def elapse(self, days: int) -> None:
        """Days pass: keys whose deletion date came are deleted, with their aliases."""
        self.day += days
        for key in [k for k in self.keys.values() if k.deletion_day is not None]:
            if key.deletion_day is not None and key.deletion_day <= self.day:
                del self.keys[key.key_id]
                for alias in [a for a, t in self.aliases.items() if t == key.key_id]:
                    del self.aliases[alias]

    def target(self, alias: str) -> AwsKey | None:
        key_id = self.aliases.get(alias)
        return None if key_id is None else self.keys.get(key_id)

    def _resolve(self, key_id: str, operation: str) -> AwsKey:
        if key_id.startswith("alias/"):
            target = self.aliases.get(key_id)
            if target is None:
                raise ClientError(
                    "NotFoundException", f"Alias {key_id} is not found.", operation=operation
                )
            key_id = target
        key = self.keys.get(key_id)
        if key is None:
            raise ClientError(
                "NotFoundException", f"Key '{key_id}' does not exist", operation=operation
            )
        return key

    @staticmethod
    def _usable(key: AwsKey, operation: str) -> None:
        if key.state == "Disabled":
            raise ClientError(
                "DisabledException", f"{key.key_id} is disabled.", operation=operation
            )
        if key.state == "PendingDeletion":
            raise ClientError(
                "KMSInvalidStateException",
                f"{key.key_id} is pending deletion.",
                operation=operation,
            )

    def _check_alias(self, alias: str, operation: str) -> None:
        if not _ALIAS.fullmatch(alias) or len(alias) > 256:
            raise ClientError(
                "ValidationException", f"invalid alias name {alias!r}", operation=operation
            )
        if alias.startswith("alias/aws/"):
            raise ClientError(
                "NotAuthorizedException", "alias/aws/ is reserved", operation=operation
            )

    @staticmethod
    def _context(encryption_context: Mapping[str, str]) -> bytes:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in encryption_context.items())
        return json.dumps(sorted(encryption_context.items())).encode()

    # ------------------------------------------------------------------ API
    @_api("CreateKey")
    async def create_key(self, *, Description: str, Tags: list[dict[str, str]]) -> dict[str, Any]:
        key = AwsKey(
            str(uuid.uuid4()),
            os.urandom(32),
            Description,
            {t["TagKey"]: t["TagValue"] for t in Tags},
        )
        self.keys[key.key_id] = key
        return {
            "KeyMetadata": {
                "KeyId": key.key_id,
                "KeyState": key.state,
                "Arn": f"arn:aws:kms:eu-west-1:111122223333:key/{key.key_id}",
            }
        }

    @_api("CreateAlias")
    async def create_alias(self, *, AliasName: str, TargetKeyId: str) -> None:
        self._check_alias(AliasName, "CreateAlias")
        if AliasName in self.aliases:
            raise ClientError(
                "AlreadyExistsException", f"{AliasName} already exists", operation="CreateAlias"
            )
        key = self._resolve(TargetKeyId, "CreateAlias")
        if key.state == "PendingDeletion":
            raise ClientError(
                "KMSInvalidStateException", "target is pending deletion", operation="CreateAlias"
            )
        self.aliases[AliasName] = key.key_id

    @_api("UpdateAlias")
    async def update_alias(self, *, AliasName: str, TargetKeyId: str) -> None:
        current = self._resolve(AliasName, "UpdateAlias")
        key = self._resolve(TargetKeyId, "UpdateAlias")
        if key.state == "PendingDeletion" or (
            current.state == "PendingDeletion" and not self.update_alias_from_pending_deletion
        ):
            raise ClientError(
                "KMSInvalidStateException", "pending deletion", operation="UpdateAlias"
            )
        self.aliases[AliasName] = key.key_id

    @_api("DeleteAlias")
    async def delete_alias(self, *, AliasName: str) -> None:
        if AliasName not in self.aliases:
            raise ClientError(
                "NotFoundException", f"Alias {AliasName} is not found.", operation="DeleteAlias"
            )
        del self.aliases[AliasName]

    @_api("DescribeKey")
    async def describe_key(self, *, KeyId: str) -> dict[str, Any]:
        key = self._resolve(KeyId, "DescribeKey")
        return {
            "KeyMetadata": {
                "KeyId": key.key_id,
                "KeyState": key.state,
                "Description": key.description,
            }
        }

    @_api("DisableKey")
    async def disable_key(self, *, KeyId: str) -> None:
        key = self._resolve(KeyId, "DisableKey")
        if key.state == "PendingDeletion":
            raise ClientError(
                "KMSInvalidStateException", "pending deletion", operation="DisableKey"
            )
        key.state = "Disabled"

    @_api("EnableKey")
    async def enable_key(self, *, KeyId: str) -> None:
        key = self._resolve(KeyId, "EnableKey")
        if key.state == "PendingDeletion":
            raise ClientError("KMSInvalidStateException", "pending deletion", operation="EnableKey")
        key.state = "Enabled"

    @_api("ScheduleKeyDeletion")
    async def schedule_key_deletion(
        self, *, KeyId: str, PendingWindowInDays: int
    ) -> dict[str, Any]:
        if not isinstance(PendingWindowInDays, int) or not 7 <= PendingWindowInDays <= 30:
            raise ClientError(
                "ValidationException",
                "PendingWindowInDays: 7 to 30",
                operation="ScheduleKeyDeletion",
            )
        key = self._resolve(KeyId, "ScheduleKeyDeletion")
        if key.state == "PendingDeletion":
            raise ClientError(
                "KMSInvalidStateException", "pending deletion", operation="ScheduleKeyDeletion"
            )
        key.state, key.window = "PendingDeletion", PendingWindowInDays
        key.deletion_day = self.day + PendingWindowInDays
        return {"KeyId": key.key_id, "KeyState": key.state}

    @_api("Encrypt")
    async def encrypt(
        self, *, KeyId: str, Plaintext: bytes, EncryptionContext: Mapping[str, str]
    ) -> dict[str, Any]:
        key = self._resolve(KeyId, "Encrypt")
        self._usable(key, "Encrypt")
        nonce = os.urandom(12)
        sealed = AESGCM(key.material).encrypt(nonce, Plaintext, self._context(EncryptionContext))
        return {
            "CiphertextBlob": b"kms1" + key.key_id.encode() + nonce + sealed,
            "KeyId": f"arn:aws:kms:eu-west-1:111122223333:key/{key.key_id}",
        }

    @_api("Decrypt")
    async def decrypt(
        self, *, CiphertextBlob: bytes, KeyId: str, EncryptionContext: Mapping[str, str]
    ) -> dict[str, Any]:
        blob = bytes(CiphertextBlob)
        if not blob.startswith(b"kms1") or len(blob) < 4 + 36 + 12 + 16:
            raise ClientError("InvalidCiphertextException", "", operation="Decrypt")
        blob_key = blob[4:40].decode("ascii", "replace")
        named = self._resolve(KeyId, "Decrypt")
        if named.key_id != blob_key:
            raise ClientError("IncorrectKeyException", "wrong key", operation="Decrypt")
        self._usable(named, "Decrypt")
        try:
            plaintext = AESGCM(named.material).decrypt(
                blob[40:52], blob[52:], self._context(EncryptionContext)
            )
        except InvalidTag:
            raise ClientError("InvalidCiphertextException", "", operation="Decrypt") from None
        return {"Plaintext": plaintext, "KeyId": named.key_id}


# ======================================================================= Google Cloud KMS
class GoogleAPIError(Exception):
    """google.api_core.exceptions' hierarchy, by the same names."""


class GoogleAPICallError(GoogleAPIError):
    code: int | None = None


class GoogleClientError(GoogleAPICallError):
    """google.api_core's ``ClientError`` (4xx)."""


class BadRequest(GoogleClientError):
    code = 400


class InvalidArgument(BadRequest):
    pass


class FailedPrecondition(BadRequest):
    pass


class NotFound(GoogleClientError):
    code = 404


class Conflict(GoogleClientError):
    code = 409


class AlreadyExists(Conflict):
    pass


class Forbidden(GoogleClientError):
    code = 403


class PermissionDenied(Forbidden):
    pass


class TooManyRequests(GoogleClientError):
    code = 429


class ResourceExhausted(TooManyRequests):
    pass


class ServerError(GoogleAPICallError):
    code = 500


class InternalServerError(ServerError):
    pass


class ServiceUnavailable(ServerError):
    code = 503


class GatewayTimeout(ServerError):
    code = 504


class DeadlineExceeded(GatewayTimeout):
    pass


class RetryError(GoogleAPIError):
    pass


_KEY_ID = re.compile(r"[a-zA-Z0-9_-]{1,63}")
_LABEL = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")


@dataclass
class GcpVersion:
    name: str
    state: VersionState
    material: bytes | None
    destroy_at: float | None = None


@dataclass
class GcpKey:
    name: str
    uid: bytes
    labels: dict[str, str]
    duration: timedelta
    versions: list[GcpVersion] = field(default_factory=list)
    primary: int | None = None


@dataclass(frozen=True)
class VersionView:
    name: str
    state: int


@dataclass(frozen=True)
class KeyView:
    name: str
    primary: VersionView
    labels: dict[str, str]


@dataclass(frozen=True)
class EncryptView:
    name: str
    ciphertext: bytes


@dataclass(frozen=True)
class DecryptView:
    plaintext: bytes


class FakeCloudKms(_Faults):
    """Cloud KMS: key rings, CryptoKeys with versions, AAD, scheduled destruction."""

    def __init__(self, key_rings: tuple[str, ...]) -> None:
        super().__init__()
        self.key_rings = set(key_rings)
        self.keys: dict[str, GcpKey] = {}
        self.now = 0.0

    # ------------------------------------------------------------------ service
    def snapshot(self) -> object:
        return {
            name: (dict(key.labels), [(v.name, v.state) for v in key.versions])
            for name, key in self.keys.items()
        }

    def elapse(self, duration: timedelta) -> None:
        self.now += duration.total_seconds()
        for key in self.keys.values():
            for version in key.versions:
                if (
                    version.state == VersionState.DESTROY_SCHEDULED
                    and version.destroy_at is not None
                    and version.destroy_at <= self.now
                ):
                    version.state, version.material = VersionState.DESTROYED, None

    def add_version(
        self, name: str, *, state: VersionState = VersionState.ENABLED, primary: bool = True
    ) -> GcpVersion:
        """A new version of key `name` (a rotation), made primary by default."""
        key = self.keys[name]
        version = GcpVersion(
            f"{name}/cryptoKeyVersions/{len(key.versions) + 1}", state, os.urandom(32)
        )
        key.versions.append(version)
        if primary:
            key.primary = len(key.versions) - 1
        return version

    def _key(self, name: object) -> GcpKey:
        key = self.keys.get(str(name))
        if key is None:
            raise NotFound(f"404 {name} not found.")
        return key

    @staticmethod
    def _view(key: GcpKey) -> KeyView:
        primary = key.versions[key.primary] if key.primary is not None else None
        view = VersionView(primary.name, int(primary.state)) if primary else VersionView("", 0)
        return KeyView(key.name, view, dict(key.labels))

    @staticmethod
    def _check_labels(labels: Mapping[str, str]) -> None:
        for name, value in labels.items():
            if not _LABEL.fullmatch(name) or not _LABEL_VALUE.fullmatch(value):
                raise InvalidArgument(f"400 invalid label {name}={value}")

    # ------------------------------------------------------------------ API
    @_api("CreateCryptoKey")
    async def create_crypto_key(self, request: dict[str, Any]) -> KeyView:
        parent, key_id, spec = request["parent"], request["crypto_key_id"], request["crypto_key"]
        if parent not in self.key_rings:
            raise NotFound(f"404 KeyRing {parent} not found.")
        if not _KEY_ID.fullmatch(key_id):
            raise InvalidArgument(f"400 invalid crypto_key_id {key_id!r}")
        name = f"{parent}/cryptoKeys/{key_id}"
        if name in self.keys:
            raise AlreadyExists(f"409 CryptoKey {name} already exists.")
        if spec.get("purpose") != 1:
            raise InvalidArgument("400 purpose must be ENCRYPT_DECRYPT")
        duration = spec.get("destroy_scheduled_duration", timedelta(hours=24))
        if not isinstance(duration, timedelta) or not timedelta(hours=24) <= duration <= timedelta(
            days=120
        ):
            raise InvalidArgument(f"400 invalid destroy_scheduled_duration {duration!r}")
        labels = dict(spec.get("labels", {}))
        self._check_labels(labels)
        self.keys[name] = GcpKey(name, os.urandom(16), labels, duration)
        if not request.get("skip_initial_version_creation", False):
            self.add_version(name)
        return self._view(self.keys[name])

    @_api("GetCryptoKey")
    async def get_crypto_key(self, request: dict[str, Any]) -> KeyView:
        return self._view(self._key(request["name"]))

    @_api("UpdateCryptoKey")
    async def update_crypto_key(self, request: dict[str, Any]) -> KeyView:
        spec, paths = request["crypto_key"], request["update_mask"]["paths"]
        key = self._key(spec["name"])
        if list(paths) != ["labels"]:
            raise InvalidArgument(f"400 unsupported update mask {paths}")
        self._check_labels(spec["labels"])
        key.labels = dict(spec["labels"])
        return self._view(key)

    @_api("ListCryptoKeyVersions")
    async def list_crypto_key_versions(self, request: dict[str, Any]) -> AsyncIterator[VersionView]:
        key = self._key(request["parent"])
        snapshot = [VersionView(v.name, int(v.state)) for v in key.versions]

        async def pages() -> AsyncIterator[VersionView]:
            for view in snapshot:
                await asyncio.sleep(0)
                yield view

        return pages()

    @_api("DestroyCryptoKeyVersion")
    async def destroy_crypto_key_version(self, request: dict[str, Any]) -> VersionView:
        name = str(request["name"])
        key = self._key(name.split("/cryptoKeyVersions/")[0])
        version = next((v for v in key.versions if v.name == name), None)
        if version is None:
            raise NotFound(f"404 {name} not found.")
        if version.state not in (VersionState.ENABLED, VersionState.DISABLED):
            raise FailedPrecondition(f"400 {name} is in state {version.state.name}")
        version.state = VersionState.DESTROY_SCHEDULED
        version.destroy_at = self.now + key.duration.total_seconds()
        return VersionView(version.name, int(version.state))

    @_api("Encrypt")
    async def encrypt(self, request: dict[str, Any]) -> EncryptView:
        key = self._key(request["name"])
        if key.primary is None:
            raise FailedPrecondition(f"400 {key.name} has no primary version")
        index, version = key.primary, key.versions[key.primary]
        if version.state != VersionState.ENABLED or version.material is None:
            raise FailedPrecondition(
                f"400 {version.name} is not enabled, current state is: {version.state.name}."
            )
        nonce = os.urandom(12)
        aad = bytes(request.get("additional_authenticated_data", b""))
        sealed = AESGCM(version.material).encrypt(nonce, bytes(request["plaintext"]), aad)
        return EncryptView(version.name, key.uid + bytes([index]) + nonce + sealed)

    @_api("Decrypt")
    async def decrypt(self, request: dict[str, Any]) -> DecryptView:
        key = self._key(request["name"])
        blob = bytes(request["ciphertext"])
        refused = InvalidArgument(
            "400 Decryption failed: verify that 'name' refers to the correct CryptoKey."
        )
        if len(blob) < 16 + 1 + 12 + 16 or blob[:16] != key.uid or blob[16] >= len(key.versions):
            raise refused
        version = key.versions[blob[16]]
        if version.state != VersionState.ENABLED or version.material is None:
            raise FailedPrecondition(
                f"400 {version.name} is not enabled, current state is: {version.state.name}."
            )
        aad = bytes(request.get("additional_authenticated_data", b""))
        try:
            return DecryptView(AESGCM(version.material).decrypt(blob[17:29], blob[29:], aad))
        except InvalidTag:
            raise refused from None


# ======================================================================== Vault Transit
_VAULT_NAME = r"\w(?:(?:[\w\-.@]+)?\w)?"
_VAULT_PATH = re.compile(
    rf"/v1/(?P<mount>.+?)/(?P<op>keys|encrypt|decrypt)/(?P<name>{_VAULT_NAME})(?P<config>/config)?",
    re.ASCII,
)


@dataclass
class VaultKey:
    name: str
    type: str
    versions: list[bytes]
    deletion_allowed: bool = False


def _vault_error(status: int, *errors: str) -> tuple[int, dict[str, Any]]:
    return status, {"errors": list(errors)}


class FakeVault(_Faults):
    """Vault's Transit engine over HTTP: keys, encrypt/decrypt with associated data,
    config, delete. `upsert`: the token may create keys through encrypt (a policy with
    ``create`` on the encrypt path); `associated_data`: False is a Vault before 1.13,
    which ignores the parameter and says so in its warnings."""

    def __init__(
        self, *, mount: str = "transit", upsert: bool = False, associated_data: bool = True
    ) -> None:
        super().__init__()
        self.mount = mount
        self.keys: dict[str, VaultKey] = {}
        self.upsert = upsert
        self.associated_data = associated_data
        self.before: Callable[[str, str], Awaitable[None]] | None = None

    def snapshot(self) -> object:
        return {
            name: (key.type, len(key.versions), key.deletion_allowed)
            for name, key in self.keys.items()
        }

    def rotate(self, name: str) -> None:
        self.keys[name].versions.append(os.urandom(32))

    @staticmethod
    def _info(key: VaultKey) -> dict[str, Any]:
        return {
            "name": key.name,
            "type": key.type,
            "deletion_allowed": key.deletion_allowed,
            "derived": False,
            "latest_version": len(key.versions),
            "keys": {str(i + 1): 1700000000 for i in range(len(key.versions))},
        }

    async def request(
        self, method: str, path: str, json: Mapping[str, object] | None = None
    ) -> tuple[int, Mapping[str, object] | None]:
        fault, after = await self._enter(f"{method} {path}", dict(json or {}))
        if fault is not None and not after:
            return self._fault(fault)
        if self.before is not None:
            await self.before(method, path)
        answer = self._route(method, path, json)
        return answer if fault is None else self._fault(fault)

    @staticmethod
    def _fault(fault: BaseException | int) -> tuple[int, Mapping[str, object] | None]:
        if isinstance(fault, BaseException):
            raise fault
        return _vault_error(fault, "Vault is sealed" if fault == 503 else "fault")

    def _route(
        self, method: str, path: str, json: Mapping[str, object] | None
    ) -> tuple[int, Mapping[str, object] | None]:
        found = _VAULT_PATH.fullmatch(path)
        if found is None or found["mount"] != self.mount:
            return _vault_error(404, "1 error occurred:\n\t* unsupported path\n\n")
        name, op, body = found["name"], found["op"], dict(json or {})
        if op == "keys" and found["config"]:
            return self._config(method, name, body)
        if op == "keys":
            return self._keys(method, name, body)
        if method != "POST":
            return _vault_error(405, "unsupported operation")
        return self._encrypt(name, body) if op == "encrypt" else self._decrypt(name, body)

    def _keys(self, method: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        key = self.keys.get(name)
        if method == "GET":
            return (200, {"data": self._info(key)}) if key else _vault_error(404)
        if method == "POST":
            if key is not None:
                return 200, {"data": self._info(key), "warnings": [f"key {name} already existed"]}
            key_type = body.get("type", "aes256-gcm96")
            if key_type not in ("aes256-gcm96", "ed25519"):
                return _vault_error(400, f"unknown key type {key_type}")
            self.keys[name] = VaultKey(name, key_type, [os.urandom(32)])
            return 200, {"data": self._info(self.keys[name])}
        if method == "DELETE":
            if key is None:
                return _vault_error(
                    400, f"error deleting policy {name}: could not delete key; not found"
                )
            if not key.deletion_allowed:
                return _vault_error(400, "deletion is not allowed for this key")
            del self.keys[name]
            return 204, None
        return _vault_error(405, "unsupported operation")

    def _config(self, method: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        key = self.keys.get(name)
        if method != "POST":
            return _vault_error(405, "unsupported operation")
        if key is None:
            return _vault_error(400, f"no existing key named {name} could be found")
        if "deletion_allowed" in body:
            key.deletion_allowed = bool(body["deletion_allowed"])
        return 200, {"data": self._info(key)}

    def _associated(self, body: dict[str, Any]) -> tuple[bytes | None, list[str]]:
        if "associated_data" not in body:
            return None, []
        if not self.associated_data:
            return None, ["Endpoint ignored these unrecognized parameters: [associated_data]"]
        return base64.b64decode(str(body["associated_data"]), validate=True), []

    def _encrypt(self, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        key = self.keys.get(name)
        if key is None:
            if not self.upsert:
                return _vault_error(403, "1 error occurred:\n\t* permission denied\n\n")
            key = self.keys[name] = VaultKey(name, "aes256-gcm96", [os.urandom(32)])
        if key.type != "aes256-gcm96":
            return _vault_error(400, f"key type {key.type} does not support encryption")
        associated, warnings = self._associated(body)
        plaintext = base64.b64decode(str(body.get("plaintext", "")), validate=True)
        nonce = os.urandom(12)
        sealed = AESGCM(key.versions[-1]).encrypt(nonce, plaintext, associated)
        ciphertext = f"vault:v{len(key.versions)}:" + base64.b64encode(nonce + sealed).decode()
        answer: dict[str, Any] = {
            "data": {"ciphertext": ciphertext, "key_version": len(key.versions)}
        }
        if warnings:
            answer["warnings"] = warnings
        return 200, answer

    def _decrypt(self, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        key = self.keys.get(name)
        if key is None:
            return _vault_error(400, "encryption key not found")
        ciphertext = str(body.get("ciphertext", ""))
        found = re.fullmatch(r"vault:v(\d+):(.*)", ciphertext, re.DOTALL)
        if found is None:
            return _vault_error(400, "invalid ciphertext: no prefix")
        version = int(found[1])
        if not 1 <= version <= len(key.versions):
            return _vault_error(400, "invalid key version")
        try:
            raw = base64.b64decode(found[2], validate=True)
        except ValueError:
            return _vault_error(400, "invalid ciphertext: could not decode")
        associated, _ = self._associated(body)
        try:
            plaintext = AESGCM(key.versions[version - 1]).decrypt(raw[:12], raw[12:], associated)
        except (InvalidTag, ValueError):
            return _vault_error(400, "cipher: message authentication failed")
        return 200, {"data": {"plaintext": base64.b64encode(plaintext).decode()}}
