"""Paging guards that no other test broke: each test here fails with its guard removed.

Found by breaking every guard of the paging and exactly-once machinery one at a time
(docs/write-paths.md, "Paged storage"); tests/test_paging_races.py covers the others.
As there, writers are separate "processes" (sibling stores: own locks and header caches)
on one database, and the race lands at an exact point (`interleaving.hooked`), no sleeps.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import StoreFactory
from interleaving import READS, hooked
from mindstore import PagePolicy, TenantStore
from mindstore.errors import InvalidTransition, NotFound
from mindstore.model.parts import ToolCallPart
from paging_fixtures import crash, unfolded
from test_paging_races import (
    CONFIG,
    READS_OF_A_HISTORY,
    SMALL,
    _forge,
    answered_calls,
    answers,
    check_stored,
    grow,
    ids,
    make_namesakes,
    raw_task,
    sealed_call,
)

BIG = 600_000
"""Characters of a large message: four of them put the open page past twice the default
page's bytes (2 MiB), so the default page size makes the task due for a seal."""


async def test_a_writer_that_never_seals_still_stops_a_seal_by_the_default_page_size(
    stores: StoreFactory,
) -> None:
    """A process with the default page size seals a task; meanwhile a process that never
    seals (page_policy=None) answers a call held by a message being moved. Its write does
    not know the sealer's page size, so it counts a change to an earlier open message
    (`patched`) whenever the task is due by its own page size or by the default one
    (`TaskWriter._seal_may_run`): the seal then matches nothing, and the copy it read
    (call still open) never replaces the answered one."""
    unpaged = {"page_policy": None, "offload_threshold": 10**9}
    builder = stores.sibling(**unpaged).scoped("acme")
    other = stores.sibling(**unpaged).scoped("acme")
    sealer = stores.sibling(page_policy=PagePolicy(), offload_threshold=10**9).scoped("acme")
    tid = (await builder.tasks.create(config=CONFIG)).id
    asked = await builder.tasks.add_assistant_message(tid, message_id="a0")
    await builder.tasks.add_tool_call_part(
        tid, asked.id, ToolCallPart(tool_call_id="c0", tool_name="search", args={})
    )
    for i in range(3):
        await builder.tasks.add_human_message(tid, f"{i}" * BIG, message_id=f"b{i}")
    assert (await raw_task(builder, tid)).get("pages", 0) == 0

    async def answer() -> None:
        await other.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")

    with hooked(sealer.tasks.port.scope, "pages", ("replace_one",), answer) as writes:
        await sealer.tasks.add_human_message(tid, "3" * BIG, message_id="b3")  # due: seals
    assert writes.fired == 1
    assert (await raw_task(sealer, tid)).get("pages", 0) == 0  # the seal lost
    messages = await sealer.tasks.messages(tid)
    assert answered_calls(messages) == answers(messages) == {"c0"}
    assert ids(messages) == await check_stored(sealer, tid)
    await sealer.tasks.add_human_message(tid, "next", message_id="next")  # seals now
    messages = await sealer.tasks.messages(tid)
    assert (await raw_task(sealer, tid))["pages"] >= 1
    assert answered_calls(messages) == answers(messages) == {"c0"}
    assert ids(messages) == await check_stored(sealer, tid)


# `context` reads its pages inside its one pipeline over the task document (`$lookup`):
# there is no moment between the two reads for a delete to land in
@pytest.mark.parametrize("read", sorted(set(READS_OF_A_HISTORY) - {"context"}))
async def test_a_read_racing_a_delete_never_returns_a_history_without_its_pages(
    stores: StoreFactory, read: str
) -> None:
    """Between a reader's read of the task document and its read of the pages, another
    process deletes the task (document first, then its pages). The pages the reader's
    mark counts are gone: it must not answer with the open page alone (a history that
    lost its beginning) but read again, and find no task."""
    writer = stores.sibling(page_policy=SMALL).scoped("acme")
    reader = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await writer.tasks.create()).id
    await grow(writer.tasks, tid, 12)
    assert (await raw_task(writer, tid))["pages"] >= 2

    async def delete() -> None:
        assert await writer.tasks.delete(tid)

    run = READS_OF_A_HISTORY[read]
    with (
        hooked(reader.tasks.port.scope, "pages", READS, delete) as page_reads,
        pytest.raises(NotFound),
    ):
        got = await run(reader.tasks, tid)
        pytest.fail(f"read {[m.id for m in got]} of a deleted task")
    assert page_reads.fired == 1


@pytest.fixture
async def namesakes(stores: StoreFactory) -> tuple[TenantStore, TenantStore]:
    return await make_namesakes(stores)


async def test_a_backup_of_one_tenant_never_reads_pages_stored_under_another(
    namesakes: tuple[TenantStore, TenantStore], stores: StoreFactory, tmp_path: Any
) -> None:
    """Both tenants paged, each with a task "T"; pages that claim the other tenant's task
    (its key, its page numbers) are stored under each tenant. A backup of one tenant reads
    its own pages only: it completes, and restores the history its reads return."""
    from mindstore.backup import backup, restore, verify

    for attacker, victim in (namesakes, namesakes[::-1]):
        await _forge(attacker, victim)
    for view in namesakes:
        path = tmp_path / view.tenant
        await backup(view.store, path, tenant=view.tenant)
        await verify(path)
        target = await stores.fresh()
        await restore(target, path)
        restored = await target.scoped(view.tenant).tasks.messages("T")
        expected = await view.tasks.messages("T")
        assert [m.to_dict() for m in restored] == [m.to_dict() for m in expected]


async def test_bringing_a_page_back_for_a_retract_keeps_every_change_to_its_messages(
    stores: StoreFactory,
) -> None:
    """Every message sealed (the open page emptied by retracts), two redactions of sealed
    messages whose folds failed wait in `pending`. Retracting the last message brings its
    page back into the task document: first it folds the pending changes into the page;
    another process commits one more redaction (its fold fails too) before that fold
    clears the list, so the clear matches nothing. The page must not come back while a
    change to it is still pending (it would come back without that change, and the
    change, now above the mark, would be folded nowhere): the retract folds again first."""
    view = stores.sibling(page_policy=SMALL).scoped("acme")
    other = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await view.tasks.create()).id
    written = await grow(view.tasks, tid, 12)
    while (await raw_task(view, tid))["messages"]:
        removed = await view.tasks.retract_last(tid)
        assert removed is not None and removed.id == written.pop()
    assert (await raw_task(view, tid))["sealed"] == len(written) == 8
    with unfolded(view.tasks):
        await view.tasks.redact(tid, "h5", reason="first")
    assert {e["id"] for e in (await raw_task(view, tid))["pending"]} == {"h5"}

    async def another_redaction() -> None:
        with unfolded(other.tasks):
            await other.tasks.redact(tid, "h6", reason="second")

    def clear(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return "pending" in args[1].get("$unset", {})

    scope = view.tasks.port.scope
    with hooked(scope, "tasks", ("update_one",), another_redaction, when=clear) as clears:
        removed = await view.tasks.retract_last(tid, expected_id="h7")
    assert clears.fired == 1 and removed is not None and removed.id == "h7"
    messages = await view.tasks.messages(tid)
    assert ids(messages) == written[:-1] == await check_stored(view, tid)
    redacted = {m.id: m.to_dict().get("redaction", {}).get("reason") for m in messages}
    assert (redacted["h5"], redacted["h6"]) == ("first", "second")
    assert "h6 " not in str(messages[6].to_dict())  # its text is gone
    await grow(view.tasks, tid, 8, "later")  # sealed again: the redactions stay
    again = {m.id: m for m in await view.tasks.messages(tid)}
    assert again["h6"].to_dict()["redaction"]["reason"] == "second"
    assert not (await raw_task(view, tid)).get("pending")


async def test_a_fold_that_lost_a_page_to_an_older_fold_keeps_its_changes_pending(
    stores: StoreFactory,
) -> None:
    """Process 2 answers a sealed call and starts folding it (pending list [answer]);
    before its page write, process 1 adds text to the same message and starts its own fold
    (list [answer, text]), reading the page. Process 2's page write lands first (the page
    without the text), then process 1's compare-and-set fails. Process 1 must stop there
    and leave the list for a later fold: clearing it would lose the text for good."""
    first = stores.sibling(page_policy=SMALL).scoped("acme")
    second = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await first.tasks.create(config=CONFIG)).id
    await sealed_call(first.tasks, tid, first)
    second_at_its_write, first_read_the_page, second_wrote = (asyncio.Event() for _ in range(3))

    async def second_waits_for_the_first_to_read() -> None:
        second_at_its_write.set()
        await first_read_the_page.wait()

    async def second_has_written() -> None:
        second_wrote.set()

    async def first_waits_for_the_second_to_write() -> None:
        first_read_the_page.set()
        await second_wrote.wait()

    def clear(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return "pending" in args[1].get("$unset", {})

    async def second_answers() -> None:
        scope = second.tasks.port.scope
        with (
            hooked(scope, "pages", ("update_one",), second_waits_for_the_first_to_read),
            hooked(scope, "tasks", ("update_one",), second_has_written, when=clear),
        ):
            await second.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")

    async def first_adds_text() -> None:
        await second_at_its_write.wait()
        scope = first.tasks.port.scope
        with hooked(scope, "pages", ("update_one",), first_waits_for_the_second_to_write):
            await first.tasks.add_text_part(tid, "a0", "late text")

    await asyncio.gather(second_answers(), first_adds_text())
    assert second_wrote.is_set()
    message = await first.tasks.get_message(tid, "a0")
    assert message is not None and message.text() == "late text"
    assert answered_calls([message]) == {"c0"}
    assert (await raw_task(first, tid)).get("pending")  # both changes wait for a fold
    await first.tasks.add_human_message(tid, "next", message_id="next")  # folds them
    assert not (await raw_task(first, tid)).get("pending")
    message = await second.tasks.get_message(tid, "a0")
    assert message is not None and message.text() == "late text"
    assert answered_calls([message]) == {"c0"}
    assert "next" in await check_stored(first, tid)


async def test_a_late_fold_never_puts_back_what_a_redaction_removed(stores: StoreFactory) -> None:
    """Process 2 adds text to a sealed message and starts folding it; between its read of
    the page's bounds and its read of the page, process 1 redacts the message and folds
    both changes (the page now reflects a later version than process 2's list). Process 2
    must leave that page alone: applying its older entry again would put the redacted text
    back into the page."""
    first = stores.sibling(page_policy=SMALL).scoped("acme")
    second = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await first.tasks.create(config=CONFIG)).id
    await sealed_call(first.tasks, tid, first)

    def fold_page_read(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        projection = args[1] if len(args) > 1 else kwargs.get("projection") or {}
        return "size_bytes" in projection  # the fold's read of a page it may change

    async def first_redacts() -> None:
        await first.tasks.redact(tid, "a0", reason="gone")
        assert not (await raw_task(first, tid)).get("pending")  # folded into the page

    scope = second.tasks.port.scope
    with hooked(scope, "pages", ("find_one",), first_redacts, when=fold_page_read) as reads:
        await second.tasks.add_text_part(tid, "a0", "secret text")
    assert reads.fired == 1
    pages = await first.store.database["task_pages"].find({"tenant": "acme"}).to_list(None)
    assert "secret text" not in str(pages)
    for view in (first, second):
        message = await view.tasks.get_message(tid, "a0")
        assert message is not None and "secret text" not in str(message.to_dict())
        assert message.to_dict()["redaction"]["reason"] == "gone"
    await check_stored(first, tid)


async def test_a_fold_writes_an_entry_only_into_the_message_it_names(
    stores: StoreFactory,
) -> None:
    """A pending entry whose index holds another message (a state only a buggy or hostile
    writer leaves: indexes below the mark never move while entries wait) is not folded
    into the message at that index."""
    view = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await view.tasks.create()).id
    await grow(view.tasks, tid, 12)
    document = await raw_task(view, tid)
    assert document["sealed"] > 4
    before = [(m.id, m.to_dict()["content"]) for m in await view.tasks.messages(tid)]
    forged = {"id": "h2", "i": 3, "p": "content", "v": [{"type": "text", "text": "forged"}]}
    await view.store.database["tasks"].update_one(
        {"_id": document["_id"]},
        {"$set": {"pending": [forged], "pending_at": document["version"]}},
    )
    other = stores.sibling(page_policy=SMALL).scoped("acme")  # reads the state: folds
    await other.tasks.add_human_message(tid, "next", message_id="next")
    assert not (await raw_task(view, tid)).get("pending")
    pages = await view.store.database["task_pages"].find({"tenant": "acme"}).to_list(None)
    assert "forged" not in str(pages)
    after = [(m.id, m.to_dict()["content"]) for m in await view.tasks.messages(tid)]
    assert after[:-1] == before


async def test_a_retract_racing_an_append_never_removes_the_appended_message(
    stores: StoreFactory,
) -> None:
    """A retract reads the task (its last message h2 at the end of the open page); another
    process appends before the retract's update. The update truncates the array at h2's
    position, so it must not land on the longer array (it would take the new message
    too): the version guard makes it miss, and the retract finds h2 no longer last."""
    retractor = stores.sibling(page_policy=SMALL).scoped("acme")
    other = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await retractor.tasks.create()).id
    written = await grow(retractor.tasks, tid, 3)

    async def append() -> None:
        await other.tasks.add_human_message(tid, "meanwhile", message_id="x")
        written.append("x")

    with (
        hooked(retractor.tasks.port.scope, "tasks", ("update_one",), append) as writes,
        pytest.raises(InvalidTransition, match="not the last message"),
    ):
        await retractor.tasks.retract_last(tid, expected_id="h2")
    assert writes.fired == 1
    assert ids(await retractor.tasks.messages(tid)) == written == await check_stored(retractor, tid)


async def test_repair_never_removes_a_page_rewritten_after_it_was_read(
    stores: StoreFactory,
) -> None:
    """A create cut short before its insert left pages no task counts. While a repair
    removes them (it has read them as orphans), a create of the same id writes its pages
    over them and inserts its task. Those pages are the new task's: the repair's delete,
    guarded by the time a page was written, leaves them, and the task reads whole."""
    from datetime import timedelta

    from pymongo.errors import AutoReconnect

    from mindstore.model.messages import UserMessage
    from mindstore.model.parts import TextPart

    view = stores.sibling(page_policy=SMALL).scoped("acme")
    history = [UserMessage(id=f"m{i}", content=[TextPart(text=f"m{i}")]) for i in range(12)]

    def fresh() -> list[UserMessage]:
        return [message.model_copy(deep=True) for message in history]

    with (
        hooked(view.tasks.port.scope, "tasks", ("insert_one",), crash),
        pytest.raises(AutoReconnect),
    ):
        await view.tasks.create(task_id="gone", messages=fresh())
    pages = view.store.database["task_pages"]
    assert await pages.count_documents({"tenant": "acme"}) >= 2

    async def created_again() -> None:
        other = stores.sibling(page_policy=SMALL).scoped("acme")
        await other.tasks.create(task_id="gone", messages=fresh())

    with hooked(view.dialogs.nodes, "task_pages", ("delete_many",), created_again) as deletes:
        await view.dialogs.repair(grace=timedelta(0))
    assert deletes.fired == 1
    assert ids(await view.tasks.messages("gone")) == [m.id for m in history]
    assert await check_stored(view, "gone") == [m.id for m in history]
