"""After a shred: a task stored in the clear before its tenant was encrypted (never swept).

A store's shred erases such tasks (and the tenant's search index), so the live database
holds no plaintext of the tenant. Where one is left marked instead (a keyring bound to a
database alone, with nothing to erase with), a store without a keyring refuses every read
of it (`KeyringRequired`), from the `encrypted` mark on the task document each read
already fetches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import bson
import pytest

from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.errors import KeyringRequired, KeyShredded, NotFound
from mindstore.store import Store, TenantStore

SECRET = "Casa do Rio, room 12"
MASTER = bytes(range(32))


async def dump(store: Store) -> dict[str, list[Any]]:
    """Every document of every collection of the store's database, in `_id` order."""
    database = store.database
    return {
        name: sorted(await database[name].find({}).to_list(None), key=lambda d: str(d["_id"]))
        for name in sorted(await database.list_collection_names())
    }


async def unswept(store_factory: Any) -> tuple[Store, str, str]:
    """A store without a keyring holding a dialog and a task of tenant acme in the clear
    (searched: the index holds their text)."""
    plain: Store = await store_factory()
    acme = plain.scoped("acme")
    dialog = await acme.dialogs.create("ann", "You are terse.", title="old")
    await acme.dialogs.put_text(dialog.id, SECRET)
    task = await acme.tasks.create(owner="ann", title="old")
    await acme.tasks.add_human_message(task.id, SECRET, message_id="m1")
    await acme.tasks.add_human_message(task.id, f"Noted: {SECRET}", message_id="m2")
    assert (await acme.search("Casa")).hits  # indexed in the clear
    return plain, dialog.id, task.id


def keyring(tmp_path: Path) -> Keyring:
    return Keyring(LocalKeyVault(tmp_path, LocalMasterKey(MASTER)))


def read_verbs(
    view: TenantStore, task: str, dialog: str
) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The store's public reads that hand out a task's content, by name."""
    tasks, dialogs = view.tasks, view.dialogs
    return {
        "tasks.get": lambda: tasks.get(task),
        "tasks.header": lambda: tasks.header(task),
        "tasks.load": lambda: tasks.load(task),
        "tasks.list": lambda: tasks.list(),
        "tasks.read_range": lambda: tasks.read_range(task, 0),
        "tasks.read_range empty": lambda: tasks.read_range(task, 1, 1),
        "tasks.messages": lambda: tasks.messages(task),
        "tasks.ends": lambda: tasks.ends(task, 1, 1),
        "tasks.tail": lambda: tasks.tail(task, 1),
        "tasks.get_message": lambda: tasks.get_message(task, "m1"),
        "tasks.get_updates": lambda: tasks.get_updates(task, "m1"),
        "tasks.get_updates all": lambda: tasks.get_updates(task),
        "tasks.current_task_level": lambda: tasks.current_task_level(task),
        "tasks.level_messages": lambda: tasks.level_messages(task, None),
        "tasks.current_task_messages": lambda: tasks.current_task_messages(task),
        "tasks.find_current_task_boundaries": lambda: tasks.find_current_task_boundaries(task),
        "tasks.task_boundaries": lambda: tasks.task_boundaries(task, "m1"),
        "tasks.sub_task_spans": lambda: tasks.sub_task_spans(task),
        "tasks.context_source": lambda: tasks.context_source(task),
        "tasks.context": lambda: tasks.context(task),
        "tasks.current_task_config": lambda: tasks.current_task_config(task),
        "tasks.agent_state": lambda: tasks.agent_state(task),
        "tasks.watch": lambda: anext(aiter(tasks.watch(task))),
        "dialogs.top_prompt": lambda: dialogs.top_prompt(dialog),
        "dialogs.head": lambda: dialogs.head(dialog),
        "dialogs.tail": lambda: dialogs.tail(dialog),
        "dialogs.overview": lambda: dialogs.overview(dialog),
        "dialogs.export_dialog": lambda: dialogs.export_dialog(dialog),
        "dialogs.export_tree": lambda: dialogs.export_tree(dialog),
        "search": lambda: view.search("Casa"),
    }


async def test_after_a_shred_a_store_without_a_keyring_reads_nothing_of_an_unswept_task(
    store_factory: Any, tmp_path: Path
) -> None:
    plain, dialog, task = await unswept(store_factory)
    alone = keyring(tmp_path).bind(plain.database)  # no store: no eraser, the shred marks
    await alone.rotate("acme")  # acme is encrypted; nothing is swept
    await alone.shred("acme")
    blind = Store(plain.backend)  # a fresh process without a keyring: nothing cached
    before = await dump(blind)
    view = blind.scoped("acme")
    answered: dict[str, str] = {}  # what each read did instead of refusing
    for name, read in read_verbs(view, task, dialog).items():
        try:
            answered[name] = repr(await read())[:80]
        except KeyringRequired:
            continue
        except Exception as exc:  # an answer from the task all the same (NotFound: no entry)
            answered[name] = repr(exc)[:80]
    assert answered == {}, f"read without a keyring after the shred: {sorted(answered)}"
    assert await dump(blind) == before


async def test_a_shred_leaves_no_plaintext_of_the_tenant_in_the_live_database(
    store_factory: Any, tmp_path: Path
) -> None:
    plain, dialog, task = await unswept(store_factory)
    other = await plain.scoped("globex").tasks.create(owner="gus", title=SECRET)
    sealed = Store(plain.backend, keyring=keyring(tmp_path))
    acme = sealed.scoped("acme")
    kept = await acme.tasks.create(owner="ann", title="sealed")  # acme's first key: sealed
    await acme.tasks.add_human_message(kept.id, SECRET, message_id="m1")
    assert SECRET.encode() in bson_dump(await dump(plain))  # the unswept tasks, the index

    await sealed.keyring.shred("acme")

    after = await dump(plain)
    acme_only = {
        name: [d for d in docs if d.get("tenant") == "acme"] for name, docs in after.items()
    }
    assert b"Casa" not in bson_dump(acme_only)
    assert [d["_id"].split("/")[1] for d in acme_only["tasks"]] == [kept.id]  # the sealed one
    assert acme_only["tasks"][0]["encrypted"] is True
    for gone in (task, dialog):  # erased whole: a store without a keyring finds nothing
        with pytest.raises(NotFound):
            await plain.scoped("acme").tasks.get(gone)
    assert (await plain.scoped("globex").tasks.get(other.id)).title == SECRET  # untouched
    with pytest.raises(KeyShredded):
        await acme.tasks.messages(kept.id)
    await sealed.keyring.shred("acme")  # run again (a shred cut short): nothing more to do
    assert unversioned(await dump(plain)) == unversioned(after)  # the mark bumps versions


def unversioned(collections: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {n: [{**d, "version": None} for d in docs] for n, docs in collections.items()}


def bson_dump(collections: dict[str, list[Any]]) -> bytes:
    """The documents as BSON bytes: what a reader of the database files or a dump sees."""
    return b"".join(bson.encode(d) for docs in collections.values() for d in docs)


async def test_the_refusal_costs_no_round_trip_the_read_did_not_make(
    store_factory: Any, tmp_path: Path
) -> None:
    """The mark comes with the task document each read fetches: an ordinary task's reads
    take the round trips they took before, and a marked task's are refused after the
    read's first one."""
    plain, _dialog, task = await unswept(store_factory)
    fresh = await plain.scoped("acme").tasks.create(owner="ann")
    await plain.scoped("acme").tasks.add_human_message(fresh.id, "hello", message_id="m1")
    alone = keyring(tmp_path).bind(plain.database)
    await alone.rotate("acme")
    await alone.shred("acme")
    await plain.database["tasks"].update_one(  # one task of acme not marked: it reads
        {"_id": f"acme/{fresh.id}"}, {"$unset": {"encrypted": ""}}
    )
    blind = Store(plain.backend)
    tasks = blind.scoped("acme").tasks
    reads = {
        "tail": (lambda t: tasks.tail(t, 1), 1),
        "messages": (lambda t: tasks.messages(t), 1),
        "ends": (lambda t: tasks.ends(t, 1, 1), 1),
        "header": (lambda t: tasks.header(t), 1),
        "get_message": (lambda t: tasks.get_message(t, "m1"), 2),
    }
    for name, (read, trips) in reads.items():
        with plain.backend.recorder.capture() as log:
            await read(fresh.id)
        assert log.round_trips == trips, name
        with plain.backend.recorder.capture() as log, pytest.raises(KeyringRequired):
            await read(task)
        assert log.round_trips == 1, name
