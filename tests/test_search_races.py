"""Searches racing each other and the lifecycle (docs/search.md, "Racing searches"): several
stores on one database catch up the same changes at once, a task is deleted or redacted
while another store's search indexes it. Real coroutines on the shared backend; where the
order matters, `interleaving.hooked` puts the other side's whole verb between two steps
of the indexing search."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mindstore
from interleaving import hooked
from mindstore import Store
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS


async def _ids(acme: mindstore.TenantStore, query: str) -> list[str]:
    page = await acme.search(query, limit=100)
    return [hit.message_id for hit in page.hits]


async def _held(store: Store, task_id: str) -> list[str]:
    """What the index still holds of `task_id` (deleted): entries, marks, and postings
    groups of an ordinal no remaining mark holds (a group names its task by ordinal)."""
    found = [f"entry {d['_id']}" async for d in store.database[SEARCH_ENTRIES].find(
        {"tenant": "acme", "task": task_id})]  # fmt: skip
    live = set()
    async for document in store.database[SEARCH_TASKS].find({"tenant": "acme"}):
        if task_id in document["_id"]:
            found.append(f"mark {document['_id']}")
        elif not document["_id"].endswith("~terms"):
            live.add(document["r"])
    async for document in store.database[SEARCH_POSTINGS].find({"tenant": "acme"}):
        found += [f"posting {document['_id']}" for g in document.get("e") or []
                  if g["t"] not in live]  # fmt: skip
    return found


async def test_concurrent_searches_each_find_every_fresh_message_once(stores: Any) -> None:
    views = [stores.sibling().scoped("acme") for _ in range(3)]
    writer = views[0]
    made = []
    for n in range(30):
        task = await writer.tasks.create(owner="alice")
        await writer.tasks.add_human_message(task.id, f"opening {n}")
        made.append(task.id)
    for view in views:
        assert len(await _ids(view, "opening")) == 30
    for task_id in made:
        for k in range(5):
            await writer.tasks.add_human_message(task_id, f"fresh line {k}")
    pages = await asyncio.gather(*(view.search("fresh", limit=100) for view in views))
    for page in pages:
        found = [(hit.task_id, hit.index) for hit in page.hits]
        assert page.total == 150 and len(found) == 100 == len(set(found))
    assert (await writer.search_index.verify()).ok


async def test_a_search_started_during_another_ones_catch_up_waits_for_its_claims(
    stores: Any,
) -> None:
    first, second = stores.sibling().scoped("acme"), stores.sibling().scoped("acme")
    made = []
    for n in range(4):
        task = await first.tasks.create()
        await first.tasks.add_human_message(task.id, f"opening {n}")
        made.append(task.id)
    assert len(await _ids(first, "opening")) == 4
    assert len(await _ids(second, "opening")) == 4
    for task_id in made:
        await first.tasks.add_messages(task_id, [_user("fresh a"), _user("fresh b")])
    racing: list[asyncio.Task[list[str]]] = []

    async def start_the_other() -> None:  # `first` holds its claims, not yet written
        racing.append(asyncio.create_task(_ids(second, "fresh")))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not racing[0].done()  # waiting for the claims, not answering without them

    with hooked(first._search_store, "entries", ("insert_many",), start_the_other):
        assert len(await _ids(first, "fresh")) == 8
    assert len(await racing[0]) == 8


def _user(text: str) -> Any:
    from mindstore.model.messages import UserMessage
    from mindstore.model.parts import TextPart

    return UserMessage(content=[TextPart(text=text)])


@pytest.mark.parametrize("moment", ["claim", "entries", "release"])
@pytest.mark.parametrize("indexed", [False, True], ids=["new", "indexed"])
async def test_a_task_deleted_while_a_search_indexes_it_is_gone(
    stores: Any, moment: str, indexed: bool
) -> None:
    searcher, deleter = stores.sibling().scoped("acme"), stores.sibling().scoped("acme")
    kept = await deleter.tasks.create()
    await deleter.tasks.add_human_message(kept.id, "harbour kept", message_id="kept")
    task = await deleter.tasks.create()
    await deleter.tasks.add_human_message(task.id, "harbour first", message_id="first")
    if indexed:
        assert sorted(await _ids(searcher, "harbour")) == ["first", "kept"]
    await deleter.tasks.add_human_message(task.id, "harbour lighthouse", message_id="gone")

    async def delete() -> None:
        await deleter.tasks.delete(task.id)

    index = searcher._search_store
    where = {"claim": (index, "task_marks", ("insert_one", "update_one")),
             "entries": (index, "entries", ("insert_many",)),
             "release": (index, "task_marks", ("bulk_write",))}[moment]  # fmt: skip
    with hooked(*where, delete) as hook:
        await _ids(searcher, "harbour")
    assert hook.fired == 1
    for view in (searcher, deleter):
        assert await _ids(view, "harbour") == ["kept"]
        assert await _ids(view, "lighthouse") == []
    assert await _held(searcher.store, task.id) == []
    assert (await deleter.search_index.verify()).ok


@pytest.mark.parametrize("moment", ["entries", "release"])
async def test_a_message_redacted_while_a_search_indexes_it_leaves_no_word(
    stores: Any, moment: str
) -> None:
    searcher, writer = stores.sibling().scoped("acme"), stores.sibling().scoped("acme")
    task = await writer.tasks.create()
    await writer.tasks.add_human_message(task.id, "harbour first", message_id="first")
    assert await _ids(searcher, "harbour") == ["first"]
    await writer.tasks.add_human_message(task.id, "harbour zanzibarq", message_id="secret")

    async def redact() -> None:
        await writer.tasks.redact(task.id, "secret")

    index = searcher._search_store
    where = {"entries": (index, "entries", ("insert_many",)),
             "release": (index, "task_marks", ("bulk_write",))}[moment]  # fmt: skip
    with hooked(*where, redact):
        await _ids(searcher, "harbour")
    held = [await searcher.store.database[name].find({}).to_list(None)
            for name in (SEARCH_POSTINGS, SEARCH_ENTRIES, SEARCH_TASKS)]  # fmt: skip
    assert "zanzibarq" not in repr(held)
    assert await _ids(writer, "harbour") == ["first"]
    assert (await writer.search_index.verify()).ok


async def test_a_search_arriving_while_a_redaction_pulls_its_task_waits_and_finds_the_rest(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The redaction claims the task's mark as a search would: a search that comes between
    its reset and its pull waits for it, instead of indexing the task and having its
    postings pulled from under a mark that then says "indexed" (the task unsearchable
    until its next write)."""
    from mindstore.search import lifecycle as search_index

    searcher, writer = stores.sibling().scoped("acme"), stores.sibling().scoped("acme")
    task = await writer.tasks.create()
    for message_id in ("first", "second", "secret"):
        await writer.tasks.add_human_message(
            task.id, f"harbour {message_id}", message_id=message_id
        )
    assert sorted(await _ids(searcher, "harbour")) == ["first", "second", "secret"]
    racing: list[asyncio.Task[list[str]]] = []
    real_pull = search_index.pull_postings

    async def pull_with_a_search_arriving(*args: Any) -> None:
        racing.append(asyncio.create_task(_ids(searcher, "harbour")))
        for _ in range(50):
            await asyncio.sleep(0)
        assert not racing[0].done()  # waiting for the redaction's claim
        await real_pull(*args)

    monkeypatch.setattr(search_index, "pull_postings", pull_with_a_search_arriving)
    await writer.tasks.redact(task.id, "secret")
    monkeypatch.setattr(search_index, "pull_postings", real_pull)
    assert sorted(await racing[0]) == ["first", "second"]
    for view in (searcher, writer, stores.sibling().scoped("acme")):
        assert sorted(await _ids(view, "harbour")) == ["first", "second"]
    assert (await writer.search_index.verify()).ok


async def test_a_search_past_its_catch_up_rounds_still_indexes_a_task_a_redaction_pulled(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `ROUNDS` a search answers from the index as it stands (a task behind is found
    as it was), but a redacted task's postings are gone, not behind: it is indexed again
    (with no catch-up rounds at all, the search found none of its other messages)."""
    from mindstore.search import catchup

    acme = stores.sibling().scoped("acme")
    task = await acme.tasks.create()
    for message_id in ("first", "second", "secret"):
        await acme.tasks.add_human_message(task.id, f"harbour {message_id}", message_id=message_id)
    assert len(await _ids(acme, "harbour")) == 3
    await acme.tasks.redact(task.id, "secret")
    monkeypatch.setattr(catchup, "ROUNDS", 0)
    assert sorted(await _ids(acme, "harbour")) == ["first", "second"]


async def test_a_redaction_that_fails_while_pulling_releases_its_claim(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redaction cut short after its claim releases it: searches index the task again at
    once instead of waiting out the claim's two-minute lease."""
    from mindstore.search import lifecycle

    acme = stores.sibling().scoped("acme")
    task = await acme.tasks.create()
    for message_id in ("first", "secret"):
        await acme.tasks.add_human_message(task.id, f"harbour {message_id}", message_id=message_id)
    assert len(await _ids(acme, "harbour")) == 2

    async def cut_short(*_: Any) -> None:
        raise ConnectionError("the pull never arrived")

    monkeypatch.setattr(lifecycle, "pull_postings", cut_short)
    with pytest.raises(ConnectionError):
        await acme.tasks.redact(task.id, "secret")
    monkeypatch.undo()
    marks = await acme.store.database[SEARCH_TASKS].find({"tenant": "acme"}).to_list(None)
    assert [mark.get("w") for mark in marks if "w" in mark] == [""]
    assert await _ids(acme, "harbour") == ["first"]
