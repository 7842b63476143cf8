"""The vectors' side of the lifecycle: the twin of
`test_search_lifecycle.test_an_erase_leaves_no_trace_of_its_words` for recall by meaning.
Each of the nine paths (redaction in the open page and in a sealed one, retraction,
delete, a dialog's cascade delete, erase of a task, an owner, a tenant, retention) leaves
no vector of the erased message, before any search and after one, and a semantic search
no longer finds it; a restore brings vectors back for what it restored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import mindstore
from mindstore import Store
from mindstore.backup import backup, restore
from mindstore.collection_names import SEARCH_VECTORS
from mindstore.model.paging import PagePolicy
from mindstore.search import HashingEmbedder
from mindstore.search.vectors import quantise
from test_search_lifecycle import (
    SECRET,
    Erasure,
    _delete,
    _erase_owner,
    _erase_task,
    _erase_tenant,
    _redact,
    _redact_sealed,
    _retention,
    _retract,
)

EMBEDDER = HashingEmbedder(64)


async def _dialog_delete(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    fork = await acme.dialogs.fork(made["task"], last_n=1)  # a copy of the secret message
    page = await acme.search(SECRET[0], mode="lexical")
    assert len(page.hits) == 2, fork.id
    await acme.dialogs.delete(made["task"], cascade=True)


SECRET_TEXT = " ".join(SECRET) + " common"


async def _semantic(acme: mindstore.TenantStore, query: str) -> list[str]:
    page = await acme.search(query, mode="semantic", limit=100)
    return [hit.message_id for hit in page.hits]


async def _vectors(store: Store) -> list[dict[str, Any]]:
    return await store.database[SEARCH_VECTORS].find({}).to_list(None)


@pytest.mark.parametrize(
    "erasure",
    [_redact, _redact_sealed, _retract, _delete, _dialog_delete, _erase_task, _erase_owner,
     _erase_tenant, _retention],
    ids=lambda f: f.__name__.strip("_"),
)  # fmt: skip
async def test_an_erase_leaves_no_vector_of_what_it_erased(stores: Any, erasure: Erasure) -> None:
    store = Store(stores.store.backend, page_policy=PagePolicy(page_messages=3), embedder=EMBEDDER)
    acme = store.scoped("acme")
    kept = await acme.tasks.create(owner="alice")
    await acme.tasks.add_human_message(kept.id, "common words stay", message_id="kept")
    task = await acme.tasks.create(owner="bob")
    await acme.tasks.add_human_message(task.id, "common words here", message_id="first")
    await acme.tasks.add_human_message(task.id, SECRET_TEXT, message_id="secret")
    assert (await _semantic(acme, " ".join(SECRET)))[0] == "secret"
    secret_vector = quantise(EMBEDDER.vector(SECRET_TEXT))
    secret_id = f"acme/{task.id}/1"
    assert secret_id in {v["_id"] for v in await _vectors(store)}
    await erasure(store, acme, {"task": task.id})
    for moment in ("before any search", "after a search"):
        held = await _vectors(store)
        assert secret_id not in {v["_id"] for v in held}, moment
        assert secret_vector not in {bytes(v["v"]) for v in held}, moment
        assert "secret" not in await _semantic(acme, " ".join(SECRET))
    if erasure is not _erase_tenant:
        assert "kept" in await _semantic(acme, "common words")
    assert (await acme.search_index.verify()).ok


async def test_a_restored_backup_is_found_by_meaning(
    stores: Any, store_factory: Any, tmp_path: Path
) -> None:
    acme = Store(stores.store.backend, embedder=EMBEDDER).scoped("acme")
    task = await acme.tasks.create(owner="alice")
    await acme.tasks.add_human_message(task.id, "restored lighthouse keeper", message_id="m")
    assert await _semantic(acme, "lighthouse") == ["m"]
    await backup(acme.store, tmp_path / "b", tenant="acme")
    elsewhere = await store_factory(embedder=EMBEDDER)
    other = elsewhere.scoped("acme")
    await other.tasks.add_human_message((await other.tasks.create()).id, "fresh", message_id="f")
    assert await _semantic(other, "fresh") == ["f"]
    await restore(elsewhere, tmp_path / "b")
    assert (await _semantic(other, "lighthouse keeper"))[0] == "m"
    assert await elsewhere.database[SEARCH_VECTORS].count_documents({"tenant": "acme"}) == 2
