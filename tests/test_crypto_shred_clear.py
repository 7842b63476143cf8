"""After a shred: a task stored in the clear before its tenant was encrypted (never swept).

A store with a keyring refuses the shredded tenant (`KeyShredded`); a store without one
must refuse every read of such a task too (`KeyringRequired`), from the `encrypted` mark
the shred left on the task document, which each read already fetches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.errors import KeyringRequired
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


async def shredded_unswept(store_factory: Any, tmp_path: Path) -> tuple[Store, str, str]:
    """A keyring-less store over a tenant shredded after a dialog and a task were stored in
    the clear (and searched: the index holds their text), never swept."""
    plain: Store = await store_factory()
    acme = plain.scoped("acme")
    dialog = await acme.dialogs.create("ann", "You are terse.", title="old")
    await acme.dialogs.put_text(dialog.id, SECRET)
    task = await acme.tasks.create(owner="ann", title="old")
    await acme.tasks.add_human_message(task.id, SECRET, message_id="m1")
    await acme.tasks.add_human_message(task.id, f"Noted: {SECRET}", message_id="m2")
    assert (await acme.search("Casa")).hits  # indexed in the clear
    sealed = Store(plain.backend, keyring=Keyring(LocalKeyVault(tmp_path, LocalMasterKey(MASTER))))
    await sealed.keyring.rotate("acme")  # acme is encrypted; nothing is swept
    await sealed.keyring.shred("acme")
    return Store(plain.backend), dialog.id, task.id  # a fresh process: nothing cached


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
    blind, dialog, task = await shredded_unswept(store_factory, tmp_path)
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
