"""The encryption guards a green suite once lost unnoticed, each held by a test that fails
without it (docs/encryption.md):

* every seal and every wrap draws a fresh nonce, so one value sealed (or one key wrapped)
  twice gives unrelated bytes, never a reused keystream;
* a wrapped data key is bound to its tenant and its version: copied under another
  tenant's or version's id it does not unwrap, and nothing is written or read with it;
* no backup file holds key material: no data key, no master key, no key the master key
  wrapped (a vault's wrapped data keys may travel; they are useless without the vault);
* an offloaded payload is bound to its id: two payloads swapped in the database are
  refused, not read as each other;
* the re-encryption sweep is pinned to the key version: a value sealed with an older key
  is re-sealed even when everything is sealed, and a sweep cut short resumes only under
  the key it was sweeping with;
* a sealed-only tenant refuses a task's own fields put in the clear: its agent state, a
  metadata value, a content part's field (each checked on its own, `task_fields`);
* a search snippet is bound to its message: snippets swapped between two index entries,
  or an entry pointed at another message, do not open.

Both keyring forms run where the guard concerns them: one shared master key
(``Keyring(LocalMasterKey(...))``) and the per-tenant vault
(``Keyring(LocalKeyVault(path, LocalMasterKey(...)))``). The keys they wrap are seen
through recording wrappers of the public `MasterKey` and `KeyProvider` protocols.
"""

from __future__ import annotations

import base64
import gzip
import os
import tarfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from interleaving import Hooked, always
from mindstore import PagePolicy
from mindstore.backup import backup
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.crypto.aead import is_sealed, key_version, open_value, seal_value
from mindstore.crypto.provider import KekState
from mindstore.errors import CryptoError
from mindstore.formats.agent_state import AgentState
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TaskConfigPart, TextPart
from mindstore.store import Store
from paging_fixtures import unfolded

SECRET = "Casa do Rio, room 12"
SMALL_PAGES = PagePolicy(page_messages=4)
OFFLOAD = 1024
Factory = Callable[..., Awaitable[Store]]
COLLECTIONS = ("tasks", "task_pages", "payloads")
"""Where a task's ciphertexts live: the task document (messages, own fields, pending
entries), its sealed pages and its offloaded payloads."""


# ----------------------------------------------------------------------------- recording


class RecordingMaster:
    """A `MasterKey` that keeps every key it is asked to wrap (the data keys of a shared
    master key, or a vault's per-tenant keys) and every wrap it gave back."""

    def __init__(self, inner: LocalMasterKey) -> None:
        self.inner = inner
        self.keys: list[bytes] = []
        self.wraps: list[bytes] = []

    @property
    def key_id(self) -> str:
        return self.inner.key_id

    async def wrap(self, data_key: bytes, context: bytes) -> bytes:
        self.keys.append(data_key)
        wrapped = await self.inner.wrap(data_key, context)
        self.wraps.append(wrapped)
        return wrapped

    async def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        return await self.inner.unwrap(wrapped, context)


class RecordingProvider:
    """A `KeyProvider` that keeps every data key it is asked to wrap."""

    def __init__(self, inner: LocalKeyVault) -> None:
        self.inner = inner
        self.keys: list[bytes] = []

    @property
    def provider_id(self) -> str:
        return self.inner.provider_id

    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        self.keys.append(data_key)
        return await self.inner.wrap(tenant, data_key, context)

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        return await self.inner.unwrap(tenant, wrapped, context)

    async def destroy(self, tenant: str) -> None:
        await self.inner.destroy(tenant)

    async def status(self, tenant: str) -> KekState:
        return await self.inner.status(tenant)


class Keys:
    """A keyring of one form, and what its wrappers saw: every data key, every key the
    master key wrapped, the master key's bytes."""

    def __init__(self, form: str, tmp_path: Path) -> None:
        self.master_bytes = os.urandom(32)
        self.master = RecordingMaster(LocalMasterKey(self.master_bytes))
        self.provider: RecordingProvider | None = None
        if form == "vault":
            self.provider = RecordingProvider(LocalKeyVault(tmp_path / "vault", self.master))
            self.keyring = Keyring(self.provider)
        else:
            self.keyring = Keyring(self.master)

    @property
    def data_keys(self) -> list[bytes]:
        return list(self.provider.keys if self.provider is not None else self.master.keys)

    @property
    def secrets(self) -> list[bytes]:
        """Every key a backup must not hold: data keys, the vault's keys, the master key."""
        return [*self.master.keys, *self.data_keys, self.master_bytes]


FORMS = ["shared", "vault"]


async def keyring_store(
    factory: Factory, form: str, tmp_path: Path, **options: Any
) -> tuple[Store, Keys]:
    keys = Keys(form, tmp_path)
    store = await factory(keyring=keys.keyring, offload_threshold=OFFLOAD, **options)
    return store, keys


def sealed_in(value: Any) -> list[Any]:
    """Every ciphertext a stored value holds, at any depth."""
    if is_sealed(value):
        return [value]
    if isinstance(value, dict):
        return [found for item in value.values() for found in sealed_in(item)]
    if isinstance(value, list):
        return [found for item in value for found in sealed_in(item)]
    return []


def agreeing_positions(one: bytes, two: bytes) -> int:
    """How many byte positions two blobs agree at. Two seals with fresh nonces agree about
    one position in 256 past their header; a reused nonce makes them agree everywhere but
    the tag (the same keystream over the same plaintext)."""
    return sum(a == b for a, b in zip(one, two, strict=False))


# ----------------------------------------------------------------------------- 1. content nonce

VALUES = st.one_of(
    st.text(min_size=16, max_size=200),
    st.binary(min_size=16, max_size=200),
    st.dictionaries(
        st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=8),
        st.integers(-(2**63), 2**63 - 1),
        min_size=1,
        max_size=4,
    ),
)


@settings(max_examples=40, deadline=None)
@given(value=VALUES, version=st.integers(min_value=1, max_value=300))
def test_one_value_sealed_twice_gives_unrelated_bytes(value: Any, version: int) -> None:
    key = AESGCM(os.urandom(32))
    context = ("acme", "task", "message", "content.0.text")
    sealed = [seal_value(value, key, version, context) for _ in range(2)]
    one, two = (bytes(blob) for blob in sealed)
    assert one != two
    assert agreeing_positions(one, two) <= 12  # the header (2-3 bytes) and chance
    assert [open_value(blob, lambda _v: key, context) for blob in sealed] == [value, value]


async def test_one_text_written_twice_is_stored_as_unrelated_ciphertexts(
    store_factory: Factory, tmp_path: Path
) -> None:
    """Through the store: two messages and a title written twice with the same text."""
    store, _keys = await keyring_store(store_factory, "shared", tmp_path)
    tasks = store.scoped("acme").tasks
    text = f"{SECRET}, the same words twice over"
    task = await tasks.create(title=text)
    first = await tasks.add_human_message(task.id, text)
    second = await tasks.add_human_message(task.id, text)
    raw = await store.database["tasks"].find_one({"_id": f"acme/{task.id}"})
    title_before = bytes(raw["title"])
    by_id = {m["id"]: m for m in raw["messages"]}
    one = bytes(by_id[first.id]["content"][0]["text"])
    two = bytes(by_id[second.id]["content"][0]["text"])
    assert agreeing_positions(one, two) <= 12
    await tasks.set_title(task.id, text)
    raw = await store.database["tasks"].find_one({"_id": f"acme/{task.id}"})
    title_after = bytes(raw["title"])
    assert title_before != title_after  # same value, same key, same context
    assert agreeing_positions(title_before, title_after) <= 12
    assert [m.text() for m in await tasks.messages(task.id)][-2:] == [text, text]


# ----------------------------------------------------------------------------- 2. wrap nonce


async def test_one_key_wrapped_twice_gives_unrelated_bytes(tmp_path: Path) -> None:
    """The shared master key's wraps and the vault's: the same data key under the same
    context, twice."""
    data_key, context = os.urandom(32), b"mindstore data key acme v1"
    master = LocalMasterKey.generate()
    one, two = await master.wrap(data_key, context), await master.wrap(data_key, context)
    assert one != two and agreeing_positions(one, two) <= 12
    assert await master.unwrap(one, context) == await master.unwrap(two, context) == data_key
    vault = LocalKeyVault(tmp_path / "vault", master)
    one, two = await vault.wrap("acme", data_key, context), await vault.wrap("acme", data_key,
                                                                            context)  # fmt: skip
    assert one != two and agreeing_positions(one, two) <= 12
    assert await vault.unwrap("acme", one, context) == data_key
    assert await vault.unwrap("acme", two, context) == data_key


# ----------------------------------------------------------------------------- 3, 4. wrap context


async def two_tenants(store: Store) -> dict[str, str]:
    """acme (data keys v1 and v2, content under each) and globex (v1): tenant -> task."""
    tasks: dict[str, str] = {}
    for tenant in ("acme", "globex"):
        view = store.scoped(tenant).tasks
        task = await view.create(title=f"{SECRET} {tenant}")
        await view.add_human_message(task.id, f"{SECRET} of {tenant}", message_id="m1")
        tasks[tenant] = task.id
    assert store.keyring is not None
    assert await store.keyring.rotate("acme") == 2
    await store.scoped("acme").tasks.add_human_message(tasks["acme"], f"{SECRET} v2",
                                                       message_id="m2")  # fmt: skip
    return tasks


async def copy_key(store: Store, source: str, target: str) -> None:
    """Copy the data key document `source` (``tenant/v<version>``) under the id `target`,
    its tenant and version rewritten to match (what an attacker with write access to the
    database would do to make one tenant's or version's key serve as another's)."""
    keys = store.database["data_keys"]
    document = await keys.find_one({"_id": source})
    assert document is not None and document["kind"] == "key"
    tenant, _, version = target.partition("/v")
    moved = {**document, "_id": target, "tenant": tenant, "version": int(version)}
    await keys.replace_one({"_id": target}, moved, upsert=True)


async def snapshot(store: Store, tenant: str) -> list[Any]:
    return [
        await store.database[name].find({"tenant": tenant}).sort("_id", 1).to_list(None)
        for name in COLLECTIONS
    ]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    "source, target",
    [("acme/v1", "globex/v1"), ("acme/v1", "acme/v2"), ("acme/v2", "acme/v3")],
    ids=["other-tenant", "other-version", "new-version"],
)
async def test_a_data_key_copied_under_another_id_does_not_unwrap(
    store_factory: Factory, tmp_path: Path, form: str, source: str, target: str
) -> None:
    store, keys = await keyring_store(store_factory, form, tmp_path)
    tasks = await two_tenants(store)
    tenant = target.partition("/")[0]
    other = "globex" if tenant == "acme" else "acme"
    await copy_key(store, source, target)
    reader = Store(
        store.backend, keyring=keys.keyring, offload_threshold=OFFLOAD
    )  # a fresh process
    assert reader.keyring is not None
    # the keyring's load refuses the copied key: it was wrapped for another tenant or version
    with pytest.raises(CryptoError):
        await reader.keyring.refresh(tenant)
    view = reader.scoped(tenant).tasks
    with pytest.raises(CryptoError):
        await view.messages(tasks[tenant])
    # nothing is sealed with the copied key: a write is refused and stores nothing
    before = await snapshot(reader, tenant)
    with pytest.raises(CryptoError):
        await view.add_human_message(tasks[tenant], f"{SECRET} after the copy", message_id="m9")
    assert await snapshot(reader, tenant) == before
    with pytest.raises(CryptoError):
        await view.messages(tasks[tenant])
    # the other tenant is untouched
    kept = await reader.scoped(other).tasks.messages(tasks[other])
    assert kept[0].text() == f"{SECRET} of {other}"


@pytest.mark.parametrize("form", FORMS)
async def test_every_tenant_and_version_wraps_under_its_own_context(
    store_factory: Factory, tmp_path: Path, form: str
) -> None:
    """The keyring's load, directly: a wrapped key presented for each other (tenant,
    version) of the store is refused, whoever wraps it."""
    store, keys = await keyring_store(store_factory, form, tmp_path)
    await two_tenants(store)
    documents = await store.database["data_keys"].find({"kind": "key"}).to_list(None)
    assert sorted(d["_id"] for d in documents) == ["acme/v1", "acme/v2", "globex/v1"]
    originals = {d["_id"]: d for d in documents}
    for source in originals:
        for target in originals:
            if source == target:
                continue
            await copy_key(store, source, target)
            reader = Store(store.backend, keyring=keys.keyring)
            assert reader.keyring is not None
            with pytest.raises(CryptoError):
                await reader.keyring.refresh(target.partition("/")[0])
            await store.database["data_keys"].replace_one({"_id": target}, originals[target])
    reader = Store(store.backend, keyring=keys.keyring)  # restored: every key loads again
    assert reader.keyring is not None
    for tenant, versions in (("acme", [1, 2]), ("globex", [1])):
        assert sorted((await reader.keyring.refresh(tenant)).keys) == versions


# ----------------------------------------------------------------------------- 5. backups


def backup_blobs(root: Path) -> dict[str, bytes]:
    """Every file of a backup as the bytes a reader gets: gzip members decompressed, a tar
    archive's members read (and decompressed) one by one, the manifest as it is."""
    found: dict[str, bytes] = {}

    def add(name: str, raw: bytes) -> None:
        found[name] = gzip.decompress(raw) if name.endswith(".gz") else raw

    for file in sorted(root.rglob("*")):
        if not file.is_file():
            continue
        if tarfile.is_tarfile(file):
            with tarfile.open(file) as archive:
                for member in archive.getmembers():
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        add(f"{file.name}:{member.name}", extracted.read())
        else:
            add(str(file.relative_to(root)), file.read_bytes())
    return found


def forms(secret: bytes) -> list[bytes]:
    """The ways a key can be written into a text file."""
    return [secret, secret.hex().encode(), secret.hex().upper().encode(),
            base64.b64encode(secret), base64.urlsafe_b64encode(secret),
            base64.b64encode(secret).rstrip(b"=")]  # fmt: skip


@pytest.mark.parametrize("form", FORMS)
async def test_no_backup_file_holds_key_material(
    store_factory: Factory, tmp_path: Path, form: str
) -> None:
    store, keys = await keyring_store(store_factory, form, tmp_path)
    await two_tenants(store)
    assert store.keyring is not None
    await store.keyring.reencrypt("acme")  # re-wraps acme's keys (sealed-only)
    by_master = [bytes(d["wrapped"]) for d in await store.database["data_keys"].find(
        {"kind": "key"}).to_list(None) if form == "shared"]  # fmt: skip
    by_master += keys.master.wraps  # the vault's per-tenant keys, as the master wrapped them
    assert len(keys.data_keys) >= 3 and by_master
    await backup(store, tmp_path / "all")
    await backup(store, tmp_path / "acme", tenant="acme")
    await backup(store, tmp_path / "all.tar", tar=True)
    blobs = {f"{root}/{name}": blob for root in ("all", "acme", "all.tar")
             for name, blob in backup_blobs(tmp_path / root).items()}  # fmt: skip
    assert any(name.endswith("manifest.json") for name in blobs)
    assert any("tasks" in name for name in blobs) and any("data_keys" in n for n in blobs) \
        == (form == "vault")  # fmt: skip
    for name, blob in blobs.items():
        assert SECRET.encode() not in blob, name
        for secret in [*keys.secrets, *by_master]:
            for written in forms(secret):
                assert written not in blob, name


# ----------------------------------------------------------------------------- 6. payloads


@pytest.mark.parametrize("where", ["two-messages", "two-parts"])
async def test_swapped_payloads_are_refused_not_read_as_each_other(
    store_factory: Factory, tmp_path: Path, where: str
) -> None:
    store, _keys = await keyring_store(store_factory, "shared", tmp_path)
    tasks = store.scoped("acme").tasks
    task = await tasks.create()
    first, second = f"{SECRET} one " + "a" * 3 * OFFLOAD, f"{SECRET} two " + "b" * 3 * OFFLOAD
    if where == "two-messages":
        await tasks.add_human_message(task.id, first, message_id="m1")
        await tasks.add_human_message(task.id, second, message_id="m2")
    else:
        parts = [TextPart(text=first), TextPart(text=second)]
        await tasks.add_message(task.id, UserMessage(id="m1", content=parts))
    expected = [m.to_dict() for m in await tasks.messages(task.id)]
    payloads = store.database["payloads"]
    stored = await payloads.find({"tenant": "acme"}).sort("_id", 1).to_list(None)
    assert len(stored) == 2 and all(is_sealed(p["data"]) for p in stored)
    one, two = stored
    await payloads.update_one({"_id": one["_id"]}, {"$set": {"data": two["data"]}})
    await payloads.update_one({"_id": two["_id"]}, {"$set": {"data": one["data"]}})
    with pytest.raises(CryptoError):
        await tasks.messages(task.id)
    for message_id in {"m1", "m2"} & {m["id"] for m in expected}:
        with pytest.raises(CryptoError):
            await tasks.get_message(task.id, message_id)
    await payloads.update_one({"_id": one["_id"]}, {"$set": {"data": one["data"]}})
    await payloads.update_one({"_id": two["_id"]}, {"$set": {"data": two["data"]}})
    assert [m.to_dict() for m in await tasks.messages(task.id)] == expected  # put back: reads


# ----------------------------------------------------------------------------- 7, 8. sweep


async def history(store: Store, tenant: str = "acme", count: int = 3) -> list[str]:
    """Tasks holding a ciphertext in every place a sweep re-seals: own fields (title,
    metadata, agent state), messages in the task document and in sealed pages, pending
    changes to paged messages, offloaded payloads."""
    tasks = store.scoped(tenant).tasks
    made = []
    for n in range(count):
        task = await tasks.create(
            title=f"{SECRET} {n}",
            metadata={"note": SECRET},
            config=TaskConfigPart(model_name="gpt-x"),
        )
        early = await tasks.add_assistant_message(task.id)
        await tasks.add_human_message(task.id, f"{SECRET} {n} " + "x" * 2 * OFFLOAD)
        for i in range(8):  # the early messages go into sealed pages
            await tasks.add_human_message(task.id, f"{SECRET} filler {i}")
        await tasks.save_agent_state(task.id, AgentState(context_summary=f"{SECRET} {n}"))
        with unfolded(tasks):  # a change to a paged message, left in `pending` (the task's
            await tasks.add_text_part(task.id, early.id, f"{SECRET} late part {n}")  # next
            # write would fold it)
        made.append(task.id)
    return made


async def versions_by_place(store: Store, tenant: str = "acme") -> dict[str, list[int]]:
    """The key version of every ciphertext of the tenant's tasks, by where it is stored."""
    found: dict[str, list[int]] = {}
    for name in COLLECTIONS:
        async for document in store.database[name].find({"tenant": tenant}):
            for field, value in document.items():
                place = f"{name}.{field}"
                found.setdefault(place, []).extend(key_version(v) for v in sealed_in(value))
    return {place: versions for place, versions in found.items() if versions}


async def reads(store: Store, task_ids: list[str]) -> list[Any]:
    tasks = store.scoped("acme").tasks
    return [([m.to_dict() for m in await tasks.messages(t)], await tasks.agent_state(t),
             (await tasks.get(t)).title) for t in task_ids]  # fmt: skip


class Stop(Exception):
    """A sweep cut short (a crash, a kill) after its first task."""


def stop_after_one(progress: Any) -> None:
    if progress.tasks_done == 1:
        raise Stop


@pytest.mark.parametrize("pages", ["small", "environment"])
async def test_after_rotations_and_a_sweep_cut_short_every_ciphertext_is_at_the_newest_key(
    store_factory: Factory, tmp_path: Path, pages: str
) -> None:
    """Rotate; a sweep stops after one task; rotate again; sweep: every ciphertext of
    every task is at the newest version (the cursor of the stopped sweep was taken under
    another key, so the sweep starts over; values already sealed are re-sealed too)."""
    policy = {"page_policy": SMALL_PAGES} if pages == "small" else {}
    store, _keys = await keyring_store(store_factory, "shared", tmp_path, **policy)
    assert store.keyring is not None
    task_ids = await history(store)
    expected = await reads(store, task_ids)
    placed = await versions_by_place(store)
    must = {"tasks.title", "tasks.metadata", "tasks.agent_state", "tasks.messages",
            "payloads.data"}  # fmt: skip
    policy = store.page_policy
    if pages == "small" or (policy is not None and policy.page_messages < 9):
        must |= {"task_pages.messages", "tasks.pending"}
    assert must <= set(placed) and {v for vs in placed.values() for v in vs} == {1}
    assert await store.keyring.rotate("acme") == 2
    with pytest.raises(Stop):
        await store.keyring.reencrypt("acme", progress=stop_after_one)
    assert await store.keyring.rotate("acme") == 3
    swept = await store.keyring.reencrypt("acme")
    assert swept.tasks_done == len(task_ids)
    placed = await versions_by_place(store)
    assert must <= set(placed)
    assert {place: sorted(set(vs)) for place, vs in placed.items()} == {p: [3] for p in placed}
    assert await reads(store, task_ids) == expected


async def test_a_sweep_reseals_what_an_older_key_sealed_when_all_is_sealed(
    store_factory: Factory, tmp_path: Path
) -> None:
    """Everything is sealed (with v1); after a rotation one sweep moves all of it to v2,
    pages at the default page size included (a long history of small messages)."""
    store, _keys = await keyring_store(store_factory, "shared", tmp_path)
    assert store.keyring is not None
    tasks = store.scoped("acme").tasks
    task = await tasks.create(title=SECRET)
    policy = store.page_policy
    count = 2 * policy.page_messages + 2 if policy is not None else 3  # one seal due
    await tasks.add_messages(task.id, [UserMessage(content=[TextPart(text=f"{SECRET} {i}")])
                                       for i in range(count)])  # fmt: skip
    expected = await reads(store, [task.id])
    assert {v for vs in (await versions_by_place(store)).values() for v in vs} == {1}
    await store.keyring.rotate("acme")
    swept = await store.keyring.reencrypt("acme")
    assert swept.values_sealed > 0
    placed = await versions_by_place(store)
    if policy is not None:
        assert "task_pages.messages" in placed
    assert {place: sorted(set(vs)) for place, vs in placed.items()} == {p: [2] for p in placed}
    assert await reads(store, [task.id]) == expected


class RacingTasks:
    """A database whose first update of a task document (the sweep's: the writer writes
    through its own store) lets another writer's whole verb land between the sweep's read
    of the task and its write."""

    def __init__(self, database: Any, writer: Callable[[], Awaitable[Any]]) -> None:
        self.database = database

        self.tasks = Hooked(database["tasks"], ("update_one",), writer, always, times=1,
                            skip=0, log=None, label="tasks")  # fmt: skip

    def __getitem__(self, name: str) -> Any:
        return self.tasks if name == "tasks" else self.database[name]


@pytest.mark.parametrize("clock", ["running", "same-millisecond"])
@pytest.mark.parametrize("write", ["title", "part"])
async def test_a_write_landing_under_the_sweep_is_kept_and_resealed(
    store_factory: Factory, tmp_path: Path, write: str, clock: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The sweep's task update is pinned to the document it read: a write between its
    read and its update (a title set, a part added to a message the sweep re-seals) makes
    the update miss, the task is read again, and the write stays (sealed with the newest
    key), never overwritten by what the sweep read; also within the millisecond of the
    task's last write (the version pins a verb's write, the title pins `set_title`, which
    bumps no version; neither depends on the clock)."""
    import mindstore.repositories.engine as engine
    import mindstore.repositories.task_lifecycle as task_repository
    from mindstore.crypto.sweep import reencrypt

    store, _keys = await keyring_store(store_factory, "shared", tmp_path)
    assert store.keyring is not None
    tasks = store.scoped("acme").tasks
    task = await tasks.create(title=f"{SECRET} before", config=TaskConfigPart(model_name="m"))
    await tasks.add_human_message(task.id, f"{SECRET} question")
    turn = await tasks.add_assistant_message(task.id)
    await tasks.add_text_part(task.id, turn.id, f"{SECRET} answer")
    await store.keyring.rotate("acme")
    stored = await store.database["tasks"].find_one({"_id": f"acme/{task.id}"})
    if clock == "same-millisecond":
        for module in (task_repository, engine):
            monkeypatch.setattr(module, "utcnow", lambda: stored["updated_at"])

    async def writer() -> None:
        if write == "title":
            await tasks.set_title(task.id, f"{SECRET} renamed")
        else:
            await tasks.add_text_part(task.id, turn.id, f"{SECRET} more")
        after = await store.database["tasks"].find_one({"_id": f"acme/{task.id}"})
        assert (after["updated_at"] == stored["updated_at"]) == (clock == "same-millisecond")

    racing = RacingTasks(store.database, writer)
    await reencrypt(racing, await store.keyring.keys("acme"))
    assert racing.tasks.fired == 1
    title = f"{SECRET} renamed" if write == "title" else f"{SECRET} before"
    answer = [f"{SECRET} answer", f"{SECRET} more"] if write == "part" else [f"{SECRET} answer"]
    assert (await tasks.get(task.id)).title == title
    message = await tasks.get_message(task.id, turn.id)
    assert message is not None
    assert [part.text for part in message.content if isinstance(part, TextPart)] == answer
    placed = await versions_by_place(store)
    assert {place: sorted(set(vs)) for place, vs in placed.items()} == {p: [2] for p in placed}


# ----------------------------------------------------------------------------- 9. own fields


async def sealed_only_task(store: Store) -> str:
    """A task of a sealed-only tenant holding every own field sealed."""
    tasks = store.scoped("acme").tasks
    task = await tasks.create(title="t", metadata={"city": SECRET}, content=[TextPart(text=SECRET)])
    await tasks.save_agent_state(task.id, AgentState(summary=SECRET, node="n"))
    assert (await store.keyring.keys("acme")).sealed_only
    return task.id


@pytest.mark.parametrize(
    ("field", "forged", "named"),
    [
        ("agent_state", {"summary": "FORGED", "node": "n"}, r"task\.agent_state"),
        ("metadata.city", "FORGED", r"task\.metadata\.city"),
        ("content.0.text", "FORGED", r"content\.0\.text"),
    ],
)
async def test_a_sealed_only_tenant_refuses_an_own_field_in_the_clear(
    store_factory: Factory, tmp_path: Path, field: str, forged: Any, named: str
) -> None:
    """Each own field is checked by the sealed-only walk on its own: dropping any one of
    them from `task_fields` lets its forged value be read as the tenant's content."""
    sealed, _keys = await keyring_store(store_factory, "shared", tmp_path)
    task_id = await sealed_only_task(sealed)
    tasks = sealed.database["tasks"]
    await tasks.update_one({"tenant": "acme"}, {"$set": {field: forged}})
    reader = Store(sealed.backend, keyring=sealed.keyring).scoped("acme").tasks
    with pytest.raises(CryptoError, match=named + ".*sealed-only"):
        if field == "agent_state":
            await reader.agent_state(task_id)
        else:
            await reader.load(task_id)


# ----------------------------------------------------------------------------- 10. snippets


@pytest.mark.parametrize("move", ["swapped", "renamed"])
async def test_a_snippet_moved_to_another_message_does_not_open(
    store_factory: Factory, tmp_path: Path, move: str
) -> None:
    """A task's packed snippets (one chunk here) are sealed whole, bound to the tenant,
    the task and the chunk's `_id`: swapped with another task's chunk, or said to be of
    another task, they do not open."""
    sealed, _keys = await keyring_store(store_factory, "shared", tmp_path)
    acme = sealed.scoped("acme")
    tasks = [await acme.tasks.create() for _ in range(2)]
    for task, (m, city) in zip(tasks, [("m1", "Lisbon"), ("m2", "Porto")], strict=True):
        await acme.tasks.add_human_message(task.id, f"zebracorn in {city}", message_id=m)
    page = await acme.search("zebracorn", limit=10)
    assert sorted(hit.message_id for hit in page.hits) == ["m1", "m2"]
    entries = sealed.database["search_entries"]
    one, two = [await entries.find_one({"tenant": "acme", "task": t.id}) for t in tasks]
    assert is_sealed(one["z"]) and is_sealed(two["z"])
    if move == "swapped":
        await entries.update_one({"_id": one["_id"]}, {"$set": {"z": two["z"]}})
        await entries.update_one({"_id": two["_id"]}, {"$set": {"z": one["z"]}})
    else:
        await entries.update_one({"_id": one["_id"]}, {"$set": {"task": tasks[1].id}})
    with pytest.raises(CryptoError, match=r"search\.z"):
        await acme.search("zebracorn", limit=10)
