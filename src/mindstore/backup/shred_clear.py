"""What a shred erases: a tenant's content still stored in the clear in the live database.

A task stored before its tenant was encrypted holds its content in the clear until the
re-encryption sweep seals it and marks it `encrypted` (a task created under a keyring is
marked when it is created). Destroying the tenant's keys cannot reach that content, so
`Keyring.shred` erases it (this function, which the store binds into its keyring):

* every task of the tenant that is not marked encrypted, whole, by `erase(task_id=...)`:
  its document, sealed pages, payloads, dialog node, search entries, and the LangGraph
  thread whose messages it holds. Whole rather than field by field: its sealed fields
  (none, or those a sweep cut short reached) are unreadable after the shred anyway, and
  a task with its content cut out would be a husk every reader and `verify` trips on;
* the tenant's memory items stored in the clear (`erase_clear_memories`): those sealed
  under its keys are unreadable after the shred and stay, like encrypted tasks;
* the tenant's search index (`search.index.forget_tenant`): the texts and terms of tasks
  indexed in the clear, and, for the rest, blind tokens and ciphertexts under a key the
  shred destroys. The next search of the tenant starts over (through a keyring it is
  `KeyShredded`).

Tasks marked encrypted stay: their content is ciphertext under the destroyed key, and
their clear fields (ids, roles, times, usage: docs/encryption.md) keep analytics whole.
Run before the shred marks the remaining tasks, so a shred cut short and run again finds
the unswept tasks it has not erased yet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from mindstore.collection_names import MEMORY_ITEMS, TASKS
from mindstore.crypto.fields import ENCRYPTED
from mindstore.ids import task_id_of
from mindstore.protocols import HasDatabase
from mindstore.search.index import forget_tenant

from .erase import erase

__all__ = ["erase_clear_memories", "erase_unswept", "shred_eraser"]


async def erase_unswept(store: HasDatabase, tenant: str) -> int:
    """Erase `tenant`'s tasks not marked encrypted (each whole) and its search index.

    Returns:
        How many tasks were erased.
    """
    marks = store.database[TASKS].find({"tenant": tenant}, {"_id": 1, ENCRYPTED: 1})
    # the mark read back, not filtered on: no index holds it (the tenant's tasks are read
    # by their `tenant` index, two small fields each)
    unswept = sorted({task_id_of(d["_id"]) async for d in marks if d.get(ENCRYPTED) is not True})
    for task_id in unswept:
        await erase(store, tenant, task_id=task_id)
    await forget_tenant(store.database, tenant)
    await erase_clear_memories(store, tenant)
    return len(unswept)


async def erase_clear_memories(store: HasDatabase, tenant: str) -> int:
    """Delete `tenant`'s memory items whose value is stored in the clear (written before
    the tenant was encrypted: no `z` mark, `mindstore.memory.items`); returns how many."""
    collection = store.database[MEMORY_ITEMS]
    marks = collection.find({"tenant": tenant}, {"_id": 1, "z": 1})
    clear = [d["_id"] async for d in marks if d.get("z") is not True]
    for start in range(0, len(clear), 500):
        await collection.delete_many({"tenant": tenant, "_id": {"$in": clear[start : start + 500]}})
    return len(clear)


def shred_eraser(store: HasDatabase) -> Callable[[str], Awaitable[int]]:
    """`erase_unswept` over `store`: what `Keyring.bind` takes as its `clear_eraser`."""
    return partial(erase_unswept, store)
