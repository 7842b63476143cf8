"""The KMS key providers (mindstore.crypto.providers) keep the `KeyProvider` contract.

Each provider runs against an in-memory fake of its service (tests/kms_fakes.py: AWS
KMS, Google Cloud KMS, Vault Transit, each with per-key destroy and its states, context
binding by the service's own AEAD, the service's refusals and outages). One contract test
runs over the three; service-specific tests follow, then the tenant-to-key-name
encodings (hypothesis).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kms_fakes import (
    ClientError,
    DeadlineExceeded,
    EndpointConnectionError,
    FakeCloudKms,
    FakeKms,
    FakeVault,
    InternalServerError,
    NoCredentialsError,
    PermissionDenied,
    ResourceExhausted,
    RetryError,
    ServiceUnavailable,
)
from mindstore.crypto import KeyProvider
from mindstore.crypto.aead import context_bytes
from mindstore.crypto.providers import AwsKmsProvider, GcpKmsProvider, VaultTransitProvider
from mindstore.crypto.providers.gcp_kms import SHREDDED_LABEL, VersionState
from mindstore.crypto.providers.naming import (
    aws_alias,
    aws_alias_tenant,
    aws_tombstone_alias,
    gcp_key_id,
    underscore_escape,
    underscore_unescape,
    vault_key_name,
    vault_tombstone_name,
)
from mindstore.errors import CryptoError, KeyProviderUnavailable, KeyShredded, ValidationError

RING = "projects/acme-prod/locations/europe-west1/keyRings/mindstore"
KEY = bytes(range(32))
CONTEXT = context_bytes(("mindstore data key", "acme", "1", "tenant-kek"))
OTHER_CONTEXT = context_bytes(("mindstore data key", "acme", "2", "tenant-kek"))
TENANTS = st.from_regex(r"[A-Za-z0-9_\-.:]{1,128}", fullmatch=True)


@dataclass
class Service:
    """A provider, the fake it talks to, and how to break or age that fake."""

    name: str
    provider: Any
    fake: Any
    outages: dict[str, Callable[[], object]]
    """Kinds of outage: each gives the fault (an exception, or an HTTP status for Vault)."""
    elapse: Callable[[], None]
    """The service's own deletion window passes (keys scheduled for deletion go)."""

    def fail_call(self, offset: int, kind: str, *, after: bool = False) -> None:
        """Call `offset` from now meets an outage of `kind`; `after`: once the service
        acted (its answer lost on the way back, so the caller cannot know it did)."""
        self.fake.fail_call(offset, self.outages[kind](), after=after)


def aws() -> Service:
    fake = FakeKms()
    return Service(
        "aws",
        AwsKmsProvider(fake, pending_window_days=7),
        fake,
        {
            "throttled": lambda: ClientError("ThrottlingException", "Rate exceeded"),
            "internal": lambda: ClientError("KMSInternalException", "", status=500),
            "gateway": lambda: ClientError("502", "Bad Gateway", status=502),
            "unreachable": lambda: EndpointConnectionError("Could not connect to the endpoint URL"),
            "timeout": lambda: TimeoutError("read timeout"),
        },
        lambda: fake.elapse(7),
    )


def gcp() -> Service:
    fake = FakeCloudKms((RING,))
    return Service(
        "gcp",
        GcpKmsProvider(fake, RING),
        fake,
        {
            "unavailable": lambda: ServiceUnavailable("503 The service is currently unavailable."),
            "deadline": lambda: DeadlineExceeded("504 Deadline Exceeded"),
            "exhausted": lambda: ResourceExhausted("429 Quota exceeded"),
            "retry": lambda: RetryError("Timeout of 60.0s exceeded"),
            "unreachable": lambda: ConnectionError("connection reset"),
        },
        lambda: fake.elapse(timedelta(days=1)),
    )


def vault() -> Service:
    fake = FakeVault()
    return Service(
        "vault",
        VaultTransitProvider(fake),
        fake,
        {
            "sealed": lambda: 503,
            "rate-limited": lambda: 429,
            "internal": lambda: 500,
            "unreachable": lambda: ConnectionError("connection refused"),
            "timeout": lambda: TimeoutError("timed out"),
        },
        lambda: None,
    )


BUILDERS: dict[str, Callable[[], Service]] = {"aws": aws, "gcp": gcp, "vault": vault}
OUTAGES = [(name, kind) for name, build in BUILDERS.items() for kind in build().outages]


@pytest.fixture(params=list(BUILDERS))
def service(request: pytest.FixtureRequest) -> Service:
    return BUILDERS[request.param]()


async def refused(awaitable: Awaitable[object]) -> CryptoError:
    """The `CryptoError` `awaitable` raises: a refusal, neither a shred nor an outage."""
    with pytest.raises(CryptoError) as caught:
        await awaitable
    assert type(caught.value) is CryptoError, repr(caught.value)
    return caught.value


async def shredded(awaitable: Awaitable[object], tenant: str = "acme") -> None:
    with pytest.raises(KeyShredded) as caught:
        await awaitable
    assert caught.value.tenant == tenant


def flipped(blob: bytes, index: int) -> bytes:
    changed = bytearray(blob)
    changed[index] ^= 0x01
    return bytes(changed)


# ================================================================== the contract
def test_each_provider_is_a_key_provider(service: Service) -> None:
    assert isinstance(service.provider, KeyProvider)
    assert service.provider.provider_id


async def test_wrap_then_unwrap_and_status(service: Service) -> None:
    provider = service.provider
    assert await provider.status("acme") == "absent"
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    assert KEY not in wrapped
    assert await provider.status("acme") == "active"
    assert await provider.unwrap("acme", wrapped, CONTEXT) == KEY
    assert await provider.status("globex") == "absent"


async def test_each_wrap_gives_fresh_bytes(service: Service) -> None:
    first = await service.provider.wrap("acme", KEY, CONTEXT)
    second = await service.provider.wrap("acme", KEY, CONTEXT)
    assert first != second
    for wrapped in (first, second):
        assert await service.provider.unwrap("acme", wrapped, CONTEXT) == KEY


async def test_another_context_is_refused(service: Service) -> None:
    wrapped = await service.provider.wrap("acme", KEY, CONTEXT)
    await refused(service.provider.unwrap("acme", wrapped, OTHER_CONTEXT))
    await refused(service.provider.unwrap("acme", wrapped, b""))
    assert await service.provider.unwrap("acme", wrapped, CONTEXT) == KEY


async def test_another_tenants_wrapped_key_is_refused(service: Service) -> None:
    provider = service.provider
    acme = await provider.wrap("acme", KEY, CONTEXT)
    await provider.wrap("globex", KEY, CONTEXT)
    await refused(provider.unwrap("globex", acme, CONTEXT))
    error = await refused(provider.unwrap("initech", acme, CONTEXT))  # no key at all
    assert "initech" in str(error)
    assert await provider.status("initech") == "absent"  # asking made nothing


async def test_a_changed_or_swapped_blob_is_refused(service: Service) -> None:
    provider = service.provider
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    other = await provider.wrap("acme", KEY, OTHER_CONTEXT)
    for changed in (
        flipped(wrapped, -1),
        flipped(wrapped, len(wrapped) // 2),
        wrapped[:-1],
        wrapped[:8],
        b"",
        other,
    ):
        await refused(provider.unwrap("acme", changed, CONTEXT))


async def test_destroy_shreds_every_copy_for_good(service: Service) -> None:
    provider = service.provider
    copies = [(await provider.wrap("acme", KEY, c), c) for c in (CONTEXT, OTHER_CONTEXT)]
    globex = await provider.wrap("globex", KEY, CONTEXT)
    await provider.destroy("acme")
    for _phase in ("at once", "after the service's deletion window"):
        for wrapped, context in copies:
            await shredded(provider.unwrap("acme", wrapped, context))
        before = service.fake.snapshot()
        await shredded(provider.wrap("acme", KEY, CONTEXT))
        assert service.fake.snapshot() == before  # no new key for a shredded tenant
        assert await provider.status("acme") == "destroyed"
        assert await provider.unwrap("globex", globex, CONTEXT) == KEY
        assert await provider.status("globex") == "active"
        service.elapse()


async def test_destroy_is_idempotent(service: Service) -> None:
    await service.provider.wrap("acme", KEY, CONTEXT)
    await service.provider.destroy("acme")
    after_first = service.fake.snapshot()
    await service.provider.destroy("acme")
    assert service.fake.snapshot() == after_first
    assert await service.provider.status("acme") == "destroyed"


async def test_destroy_marks_a_tenant_that_never_had_a_key(service: Service) -> None:
    provider = service.provider
    acme = await provider.wrap("acme", KEY, CONTEXT)
    await provider.destroy("initech")
    for _phase in ("at once", "after the service's deletion window"):
        assert await provider.status("initech") == "destroyed"
        await shredded(provider.wrap("initech", KEY, CONTEXT), "initech")
        await shredded(provider.unwrap("initech", acme, CONTEXT), "initech")
        assert await provider.unwrap("acme", acme, CONTEXT) == KEY
        service.elapse()


@pytest.mark.parametrize(("name", "kind"), OUTAGES)
async def test_an_outage_is_unavailable_and_decides_nothing(name: str, kind: str) -> None:
    service = BUILDERS[name]()
    provider = service.provider
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    before = service.fake.snapshot()
    operations: list[Callable[[], Awaitable[object]]] = [
        lambda: provider.wrap("globex", KEY, CONTEXT),
        lambda: provider.unwrap("acme", wrapped, CONTEXT),
        lambda: provider.destroy("acme"),
        lambda: provider.status("acme"),
    ]
    for operation in operations:
        service.fail_call(0, kind)
        with pytest.raises(KeyProviderUnavailable):
            await operation()
        assert service.fake.snapshot() == before  # nothing made, nothing destroyed
    assert await provider.status("globex") == "absent"
    assert await provider.unwrap("acme", wrapped, CONTEXT) == KEY


LOST = [pytest.param(False, id="refused-call"), pytest.param(True, id="lost-answer")]


@pytest.mark.parametrize("after", LOST)
@pytest.mark.parametrize("name", list(BUILDERS))
async def test_a_shred_cut_short_anywhere_completes_when_run_again(name: str, after: bool) -> None:
    probe = BUILDERS[name]()
    await probe.provider.wrap("acme", KEY, CONTEXT)
    started = len(probe.fake.calls)
    await probe.provider.destroy("acme")
    steps = len(probe.fake.calls) - started
    assert steps >= 2
    for step in range(steps):
        service = BUILDERS[name]()
        provider = service.provider
        wrapped = await provider.wrap("acme", KEY, CONTEXT)
        service.fail_call(step, next(iter(service.outages)), after=after)
        with pytest.raises(KeyProviderUnavailable):
            await provider.destroy("acme")
        await provider.destroy("acme")
        for _phase in ("at once", "after the service's deletion window"):
            await shredded(provider.unwrap("acme", wrapped, CONTEXT))
            await shredded(provider.wrap("acme", KEY, CONTEXT))
            assert await provider.status("acme") == "destroyed", f"cut at step {step}"
            service.elapse()


@pytest.mark.parametrize("after", LOST)
@pytest.mark.parametrize("name", list(BUILDERS))
async def test_a_first_wrap_cut_short_anywhere_works_when_run_again(name: str, after: bool) -> None:
    probe = BUILDERS[name]()
    await probe.provider.wrap("acme", KEY, CONTEXT)
    for step in range(len(probe.fake.calls)):
        service = BUILDERS[name]()
        service.fail_call(step, next(iter(service.outages)), after=after)
        with pytest.raises(KeyProviderUnavailable):
            await service.provider.wrap("acme", KEY, CONTEXT)
        wrapped = await service.provider.wrap("acme", KEY, CONTEXT)
        assert await service.provider.unwrap("acme", wrapped, CONTEXT) == KEY
        assert await service.provider.status("acme") == "active"


@pytest.mark.parametrize("name", list(BUILDERS))
async def test_a_wrap_racing_a_shred_leaves_the_tenant_shredded(name: str) -> None:
    for delay in range(12):
        service = BUILDERS[name]()
        provider = service.provider

        async def shred_later(delay: int = delay, provider: Any = provider) -> None:
            for _ in range(delay):
                await asyncio.sleep(0)
            await provider.destroy("acme")

        results = await asyncio.gather(
            provider.wrap("acme", KEY, CONTEXT), shred_later(), return_exceptions=True
        )
        wrapped, shred = results
        assert shred is None, f"delay {delay}: {shred!r}"
        for _phase in ("at once", "after the service's deletion window"):
            if isinstance(wrapped, bytes):
                await shredded(provider.unwrap("acme", wrapped, CONTEXT))
            else:
                assert isinstance(wrapped, KeyShredded), f"delay {delay}: {wrapped!r}"
            await shredded(provider.wrap("acme", KEY, CONTEXT))
            assert await provider.status("acme") == "destroyed"
            service.elapse()


async def test_a_tenant_outside_the_id_alphabet_is_refused(service: Service) -> None:
    for operation in (
        lambda: service.provider.wrap("a/b", KEY, CONTEXT),
        lambda: service.provider.unwrap("", b"x", CONTEXT),
        lambda: service.provider.destroy("a b"),
        lambda: service.provider.status("é"),
    ):
        with pytest.raises(ValidationError, match="tenant"):
            await operation()
    assert service.fake.calls == []


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("aws", lambda: NoCredentialsError("Unable to locate credentials")),
        ("gcp", lambda: RuntimeError("a bug in the client")),
        ("vault", lambda: ValueError("a bug in the client")),
    ],
)
async def test_other_errors_are_not_taken_for_outages(
    name: str, error: Callable[[], Exception]
) -> None:
    service = BUILDERS[name]()
    service.fake.fail_call(0, error())
    with pytest.raises(type(error())):
        await service.provider.wrap("acme", KEY, CONTEXT)


# ================================================================== AWS KMS
@pytest.mark.parametrize("days", [6, 31, 0, -7, 7.0, "7", True, None])
def test_aws_pending_window_out_of_range_is_refused_by_name(days: object) -> None:
    with pytest.raises(ValidationError, match="pending_window_days"):
        AwsKmsProvider(FakeKms(), pending_window_days=days)  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["", "a-b", "a/b", "aws", "AWS", "x" * 33, 7])
def test_aws_prefix_out_of_range_is_refused_by_name(prefix: object) -> None:
    with pytest.raises(ValidationError, match="prefix"):
        AwsKmsProvider(FakeKms(), prefix=prefix)  # type: ignore[arg-type]


@pytest.mark.parametrize("days", [7, 30])
async def test_aws_destroy_disables_at_once_and_deletes_after_the_window(days: int) -> None:
    fake = FakeKms()
    provider = AwsKmsProvider(fake, prefix="ms", pending_window_days=days)
    await provider.wrap("acme", KEY, CONTEXT)
    key = fake.target("alias/ms-acme")
    assert key is not None and key.state == "Enabled"
    assert key.tags == {"mindstore:tenant": "acme"}
    await provider.destroy("acme")
    assert fake.operations()[-3:] == ["DisableKey", "ScheduleKeyDeletion", "UpdateAlias"]
    assert (key.state, key.window) == ("PendingDeletion", days)
    tombstone = fake.target(aws_tombstone_alias("ms"))
    assert tombstone is not None and tombstone.state == "Disabled"
    assert fake.aliases["alias/ms-acme"] == tombstone.key_id
    fake.elapse(days - 1)
    assert key.key_id in fake.keys
    fake.elapse(1)
    assert key.key_id not in fake.keys
    assert fake.aliases["alias/ms-acme"] == tombstone.key_id  # the shredded mark stays
    await shredded(provider.wrap("acme", KEY, CONTEXT))


async def test_aws_one_tombstone_serves_every_shredded_tenant() -> None:
    fake = FakeKms()
    provider = AwsKmsProvider(fake)
    for tenant in ("acme", "globex", "initech"):
        await provider.wrap(tenant, KEY, CONTEXT)
        await provider.destroy(tenant)
    again = AwsKmsProvider(fake)  # another process
    await again.destroy("umbrella")
    targets = {
        fake.aliases[aws_alias("mindstore", t)] for t in ("acme", "globex", "initech", "umbrella")
    }
    assert targets == {fake.aliases[aws_tombstone_alias("mindstore")]}


async def test_aws_shred_when_kms_refuses_update_alias_from_a_key_pending_deletion() -> None:
    fake = FakeKms(update_alias_from_pending_deletion=False)
    provider = AwsKmsProvider(fake)
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    await provider.destroy("acme")
    assert fake.operations()[-3:] == ["UpdateAlias", "DeleteAlias", "CreateAlias"]
    fake.elapse(30)
    await shredded(provider.unwrap("acme", wrapped, CONTEXT))
    await shredded(provider.wrap("acme", KEY, CONTEXT))


async def test_aws_encryption_context_names_the_tenant_and_the_context() -> None:
    fake = FakeKms()
    provider = AwsKmsProvider(fake)
    await provider.wrap("Acme.eu:1", KEY, CONTEXT)
    operation, arguments = fake.calls[-1]
    assert operation == "Encrypt"
    assert arguments["KeyId"] == "alias/mindstore-/acme/-eu/_1"
    assert arguments["EncryptionContext"] == {
        "mindstore:tenant": "Acme.eu:1",
        "mindstore:context": CONTEXT.hex(),
    }


async def test_aws_racing_first_wraps_share_one_key() -> None:
    fake = FakeKms()
    provider = AwsKmsProvider(fake)
    wrapped = await asyncio.gather(*(provider.wrap("acme", KEY, CONTEXT) for _ in range(3)))
    live = [k for k in fake.keys.values() if k.state == "Enabled"]
    assert len(live) == 1 and fake.aliases["alias/mindstore-acme"] == live[0].key_id
    assert all(k.state == "PendingDeletion" for k in fake.keys.values() if k not in live)
    for blob in wrapped:
        assert await provider.unwrap("acme", blob, CONTEXT) == KEY


async def test_aws_a_key_an_operator_disabled_is_refused_not_shredded() -> None:
    fake = FakeKms()
    provider = AwsKmsProvider(fake)
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    key = fake.target("alias/mindstore-acme")
    assert key is not None
    await fake.disable_key(KeyId=key.key_id)
    assert await provider.status("acme") == "active"
    error = await refused(provider.unwrap("acme", wrapped, CONTEXT))
    assert "DisabledException" in str(error)
    await fake.enable_key(KeyId=key.key_id)
    assert await provider.unwrap("acme", wrapped, CONTEXT) == KEY


async def test_aws_access_denied_is_a_refusal() -> None:
    fake = FakeKms()
    provider = AwsKmsProvider(fake)
    fake.fail_call(0, ClientError("AccessDeniedException", "not authorized to kms:Encrypt"))
    error = await refused(provider.wrap("acme", KEY, CONTEXT))
    assert "AccessDeniedException" in str(error)


# ================================================================== Google Cloud KMS
@pytest.mark.parametrize("duration", [timedelta(hours=23), timedelta(days=121), 86400, None])
def test_gcp_destroy_duration_out_of_range_is_refused_by_name(duration: object) -> None:
    with pytest.raises(ValidationError, match="destroy_scheduled_duration"):
        GcpKmsProvider(FakeCloudKms((RING,)), RING, destroy_scheduled_duration=duration)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("key_ring", "projects/p/keyRings/r"),
        ("key_ring", RING + "/cryptoKeys/k"),
        ("prefix", "a-b"),
        ("prefix", "x" * 17),
        ("protection_level", "EXTERNAL"),
    ],
)
def test_gcp_arguments_out_of_range_are_refused_by_name(argument: str, value: str) -> None:
    options: dict[str, Any] = {"key_ring": RING, argument: value}
    with pytest.raises(ValidationError, match=argument):
        GcpKmsProvider(FakeCloudKms((RING,)), **options)


async def test_gcp_destroy_schedules_every_version_then_they_are_destroyed() -> None:
    fake = FakeCloudKms((RING,))
    provider = GcpKmsProvider(fake, RING, destroy_scheduled_duration=timedelta(days=3))
    old = await provider.wrap("acme", KEY, CONTEXT)
    name = provider.key_name("acme")
    fake.add_version(name)  # rotated by an operator
    fake.add_version(name, state=VersionState.DISABLED, primary=False)
    fake.keys[name].labels["team"] = "payments"
    new = await provider.wrap("acme", KEY, CONTEXT)
    await provider.destroy("acme")
    key = fake.keys[name]
    assert [v.state for v in key.versions] == [VersionState.DESTROY_SCHEDULED] * 3
    assert key.labels == {
        "mindstore-role": "tenant-kek",
        "team": "payments",
        SHREDDED_LABEL: "true",
    }
    fake.elapse(timedelta(days=3) - timedelta(seconds=1))
    assert all(v.state == VersionState.DESTROY_SCHEDULED for v in key.versions)
    fake.elapse(timedelta(seconds=1))
    assert all(v.state == VersionState.DESTROYED and v.material is None for v in key.versions)
    for wrapped in (old, new):
        await shredded(provider.unwrap("acme", wrapped, CONTEXT))


async def test_gcp_keys_are_made_with_the_duration_and_protection_level() -> None:
    fake = FakeCloudKms((RING,))
    provider = GcpKmsProvider(
        fake,
        RING,
        prefix="ms",
        protection_level="HSM",
        destroy_scheduled_duration=timedelta(days=30),
    )
    await provider.wrap("Acme.eu", KEY, CONTEXT)
    request = next(
        arguments for operation, arguments in fake.calls if operation == "CreateCryptoKey"
    )
    assert request["crypto_key_id"] == "ms-Acme_deu"
    assert request["crypto_key"]["destroy_scheduled_duration"] == timedelta(days=30)
    assert request["crypto_key"]["version_template"]["protection_level"] == 2
    assert fake.keys[f"{RING}/cryptoKeys/ms-Acme_deu"].duration == timedelta(days=30)


async def test_gcp_a_version_still_being_made_is_destroyed_on_the_next_run() -> None:
    fake = FakeCloudKms((RING,))
    provider = GcpKmsProvider(fake, RING)
    await provider.wrap("acme", KEY, CONTEXT)
    name = provider.key_name("acme")
    pending = fake.add_version(name, state=VersionState.PENDING_GENERATION, primary=False)
    with pytest.raises(KeyProviderUnavailable, match="run it again"):
        await provider.destroy("acme")
    assert await provider.status("acme") == "destroyed"  # recorded by the label already
    pending.state = VersionState.ENABLED  # Cloud KMS finished making it
    await provider.destroy("acme")
    assert pending.state == VersionState.DESTROY_SCHEDULED


async def test_gcp_a_version_restored_by_an_operator_does_not_unshred_writes() -> None:
    fake = FakeCloudKms((RING,))
    provider = GcpKmsProvider(fake, RING)
    await provider.wrap("acme", KEY, CONTEXT)
    await provider.destroy("acme")
    version = fake.keys[provider.key_name("acme")].versions[0]
    version.state = VersionState.ENABLED  # restored and enabled within the window
    await shredded(provider.wrap("acme", KEY, CONTEXT))
    assert await provider.status("acme") == "destroyed"


async def test_gcp_a_version_an_operator_disabled_is_refused_not_shredded() -> None:
    fake = FakeCloudKms((RING,))
    provider = GcpKmsProvider(fake, RING)
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    version = fake.keys[provider.key_name("acme")].versions[0]
    version.state = VersionState.DISABLED
    assert await provider.status("acme") == "active"
    error = await refused(provider.unwrap("acme", wrapped, CONTEXT))
    assert "FailedPrecondition" in str(error)
    version.state = VersionState.ENABLED
    assert await provider.unwrap("acme", wrapped, CONTEXT) == KEY


async def test_gcp_permission_denied_is_a_refusal() -> None:
    fake = FakeCloudKms((RING,))
    provider = GcpKmsProvider(fake, RING)
    fake.fail_call(0, PermissionDenied("403 Permission 'cloudkms.cryptoKeys.get' denied"))
    error = await refused(provider.wrap("acme", KEY, CONTEXT))
    assert "PermissionDenied" in str(error)


async def test_gcp_internal_error_is_an_outage() -> None:
    fake = FakeCloudKms((RING,))
    fake.fail_call(0, InternalServerError("500 Internal error"))
    with pytest.raises(KeyProviderUnavailable):
        await GcpKmsProvider(fake, RING).status("acme")


async def test_gcp_a_missing_key_ring_is_a_refusal_naming_it() -> None:
    provider = GcpKmsProvider(FakeCloudKms(()), RING)
    error = await refused(provider.wrap("acme", KEY, CONTEXT))
    assert "KeyRing" in str(error)


# ================================================================== Vault Transit
async def test_vault_destroy_allows_deletion_then_deletes_the_key() -> None:
    fake = FakeVault()
    provider = VaultTransitProvider(fake, prefix="ms")
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    assert fake.keys["ms-acme"].type == "aes256-gcm96"
    await provider.destroy("acme")
    steps = [operation for operation in fake.operations() if not operation.startswith("GET")]
    assert steps[-3:] == [
        "POST /v1/transit/keys/ms.shredded-acme",
        "POST /v1/transit/keys/ms-acme/config",
        "DELETE /v1/transit/keys/ms-acme",
    ]
    assert "ms-acme" not in fake.keys
    assert fake.keys["ms.shredded-acme"].type == "ed25519"  # a tombstone cannot encrypt
    await shredded(provider.unwrap("acme", wrapped, CONTEXT))
    sent = len(fake.calls)
    await shredded(provider.wrap("acme", KEY, CONTEXT))
    assert fake.operations()[sent:] == ["GET /v1/transit/keys/ms.shredded-acme"]  # no key made


async def test_vault_deletion_is_refused_without_deletion_allowed() -> None:
    fake = FakeVault()
    provider = VaultTransitProvider(fake)
    await provider.wrap("acme", KEY, CONTEXT)
    assert await fake.request("DELETE", "/v1/transit/keys/mindstore-acme") == (
        400,
        {"errors": ["deletion is not allowed for this key"]},
    )


async def test_vault_before_1_13_ignores_associated_data_so_wrap_refuses() -> None:
    fake = FakeVault(associated_data=False)
    provider = VaultTransitProvider(fake)
    error = await refused(provider.wrap("acme", KEY, CONTEXT))
    assert "associated_data" in str(error)


async def test_vault_a_shred_landing_during_a_wrap_leaves_no_key() -> None:
    fake = FakeVault(upsert=True)  # a broad policy: encrypt may make keys
    provider = VaultTransitProvider(fake)
    other = VaultTransitProvider(fake)

    async def shred_at_encrypt(method: str, path: str) -> None:
        if path.endswith("/encrypt/mindstore-acme"):
            fake.before = None
            await other.destroy("acme")  # another process shreds acme right now

    fake.before = shred_at_encrypt
    await shredded(provider.wrap("acme", KEY, CONTEXT))
    assert "mindstore-acme" not in fake.keys
    assert await provider.status("acme") == "destroyed"


async def test_vault_a_denied_request_is_a_refusal() -> None:
    fake = FakeVault()
    provider = VaultTransitProvider(fake)
    fake.fail_call(0, 403)
    await refused(provider.status("acme"))


@pytest.mark.parametrize("mount", ["", "/transit", "transit/", "a//b", "../sys", "a b"])
def test_vault_mount_out_of_range_is_refused_by_name(mount: str) -> None:
    with pytest.raises(ValidationError, match="mount"):
        VaultTransitProvider(FakeVault(), mount=mount)


async def test_vault_another_mount_is_used_in_every_path() -> None:
    fake = FakeVault(mount="kms/transit")
    provider = VaultTransitProvider(fake, mount="kms/transit")
    wrapped = await provider.wrap("acme", KEY, CONTEXT)
    assert await provider.unwrap("acme", wrapped, CONTEXT) == KEY
    assert all(" /v1/kms/transit/" in operation for operation in fake.operations())


# ================================================================== key names
_VAULT_NAME = re.compile(r"\w(([\w\-.@]+)?\w)?", re.ASCII)


@given(TENANTS)
def test_aws_alias_is_valid_and_decodes_to_its_tenant(tenant: str) -> None:
    alias = aws_alias("mindstore", tenant)
    assert re.fullmatch(r"alias/[a-z0-9/_-]+", alias) and len(alias) <= 256
    assert not alias.startswith("alias/aws/") and alias != aws_tombstone_alias("mindstore")
    decoded = aws_alias_tenant("mindstore", alias)
    assert decoded == tenant or (decoded is None and "/0" in alias)


@given(TENANTS, TENANTS)
def test_aws_aliases_never_meet_not_even_case_blind(first: str, second: str) -> None:
    if first != second:
        assert aws_alias("p", first).lower() != aws_alias("p", second).lower()


def test_aws_alias_of_every_tenant_character() -> None:
    alphabet = "".join(chr(c) for c in range(128) if re.fullmatch(r"[A-Za-z0-9_\-.:]", chr(c)))
    for tenant in (alphabet, *alphabet, "-" + alphabet + "."):
        alias = aws_alias("p", tenant)
        assert aws_alias_tenant("p", alias) == tenant
    assert aws_alias("p", "Acme.eu:1") == "alias/p-/acme/-eu/_1"
    assert aws_alias_tenant("p", "alias/p-/Acme") is None  # not an alias this makes
    assert aws_alias_tenant("q", aws_alias("p", "acme")) is None


@given(TENANTS)
def test_gcp_key_id_is_valid_and_unique(tenant: str) -> None:
    key_id = gcp_key_id("mindstore", tenant)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,63}", key_id)
    escaped = key_id.removeprefix("mindstore-")
    assert underscore_unescape(escaped) == tenant or escaped.startswith("_x")


@given(TENANTS, TENANTS)
def test_gcp_key_ids_never_meet(first: str, second: str) -> None:
    if first != second:
        assert gcp_key_id("mindstore", first) != gcp_key_id("mindstore", second)


@given(TENANTS)
def test_vault_names_are_valid_and_decode(tenant: str) -> None:
    name, tombstone = vault_key_name("ms", tenant), vault_tombstone_name("ms", tenant)
    assert _VAULT_NAME.fullmatch(name) and _VAULT_NAME.fullmatch(tombstone)
    assert underscore_unescape(name.removeprefix("ms-")) == tenant
    assert tombstone != name and not tombstone.startswith("ms-")


def test_long_tenants_get_hashed_names_that_fit_and_differ() -> None:
    longest = [c * 128 for c in "A.:_-"] + ["A" * 127 + "B", "a" * 60, "a" * 61]
    aliases = [aws_alias("mindstore", t) for t in longest]
    key_ids = [gcp_key_id("mindstore", t) for t in longest]
    assert len(set(aliases)) == len(set(key_ids)) == len(longest)
    for tenant, alias, key_id in zip(longest, aliases, key_ids, strict=True):
        assert len(alias) <= 256 and re.fullmatch(r"alias/[a-z0-9/_-]+", alias)
        assert len(key_id) <= 63 and re.fullmatch(r"[a-zA-Z0-9_-]+", key_id)
        assert (aws_alias_tenant("mindstore", alias) == tenant) != ("/0" in alias)
        assert (underscore_unescape(key_id[10:]) == tenant) != key_id.startswith("mindstore-_x")
    assert "/0" in aliases[0] and key_ids[0].startswith("mindstore-_x")


def test_underscore_escape_of_every_tenant_character() -> None:
    assert underscore_escape("a_b.c:d-e-") == "a__b_dc_cd-e_h"
    for tenant in ("_", ".", ":", "-", "--", "a-", "-a", "__h", "_h"):
        assert underscore_unescape(underscore_escape(tenant)) == tenant
    for stray in ("_", "a_", "_z", "a_h-", "a-"):
        assert underscore_unescape(stray) is None


# ----------------------------------------------------------------------------- with a store


async def test_a_store_on_each_provider_reads_restores_and_shreds_every_copy(
    service: Service, store_factory: Any, tmp_path: Any
) -> None:
    """The keyring over each provider: content reads back, a backup restored into an
    empty database reads with the same provider, and after a shred (and the service's own
    deletion window) the restored copy reads as shredded."""
    from mindstore.backup import backup, restore
    from mindstore.crypto import Keyring

    store = await store_factory(keyring=Keyring(service.provider))
    acme = store.scoped("acme")
    task = await acme.tasks.create(owner="ann", title="Lisbon")
    await acme.tasks.add_human_message(task.id, "Casa do Rio", message_id="m1")
    await store.scoped("beta").tasks.create(owner="bob", title="kept")
    await backup(store, tmp_path / "b")
    restored = await store_factory(keyring=Keyring(service.provider))
    await restore(restored, tmp_path / "b")
    assert [m.text() for m in await restored.scoped("acme").tasks.messages(task.id)] == [
        "Casa do Rio"
    ]
    await store.keyring.shred("acme")  # type: ignore[union-attr]
    service.elapse()
    again = await store_factory(keyring=Keyring(service.provider))
    await restore(again, tmp_path / "b")
    with pytest.raises(KeyShredded):
        await again.scoped("acme").tasks.messages(task.id)
    assert [r.title for r in (await again.scoped("beta").tasks.list()).items] == ["kept"]
