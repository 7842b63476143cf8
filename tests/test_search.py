"""Search across a tenant's conversations (docs/search.md): found right after the append,
scoped by tenant and owner, through sealed pages, by a second store, and gone with every
lifecycle path (redaction, delete, dialogs' deletes, erase, retention, shred); restored
backups are searchable; hostile queries are typed errors or literal text."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import mindstore
from conftest import StoreFactory
from mindstore import Store
from mindstore.backup import backup, erase, restore
from mindstore.backup.retention import erase_before
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_TASKS
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.errors import KeyShredded, ValidationError
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata

SMALL_PAGES = PagePolicy(page_messages=3)


async def _entries(store: Store, tenant: str = "acme") -> list[dict[str, Any]]:
    """The tenant's index entries as stored (statistics document left out)."""
    found = store.database[SEARCH_ENTRIES].find({"tenant": tenant})
    return [d async for d in found if not d["_id"].endswith("/")]


async def _ids(acme: mindstore.TenantStore, query: str, **options: Any) -> list[str]:
    page = await acme.search(query, limit=100, **options)
    return [hit.message_id for hit in page.hits]


async def test_a_message_is_found_by_the_first_search_after_its_append(acme: Any) -> None:
    task = await acme.tasks.create(owner="alice", title="Trip")
    await acme.tasks.add_human_message(task.id, "Find me a hotel in Lisbon", message_id="u-1")
    assert await _ids(acme, "lisbon hotel") == ["u-1"]
    await acme.tasks.add_human_message(task.id, "Lisbon in May, please", message_id="u-2")
    assert sorted(await _ids(acme, "lisbon")) == ["u-1", "u-2"]
    page = await acme.search("hotel")
    hit = page.hits[0]
    assert (hit.task_id, hit.index, hit.role, hit.owner) == (task.id, 0, "user", "alice")
    assert hit.snippet.marked() == "Find me a **hotel** in Lisbon" and hit.score > 0


async def test_every_message_of_a_paged_task_is_found_from_a_second_store(
    stores: StoreFactory,
) -> None:
    writer = stores.sibling(page_policy=SMALL_PAGES)
    reader = stores.sibling(page_policy=SMALL_PAGES)
    acme, other = writer.scoped("acme"), reader.scoped("acme")
    task = await acme.tasks.create(owner="alice")
    for n in range(10):
        await acme.tasks.add_human_message(task.id, f"note {n} marker{n}", message_id=f"m{n}")
        assert await _ids(other, f"marker{n}") == [f"m{n}"]  # the reader's next search
    assert (await writer.database["tasks"].find_one({"tenant": "acme"}))["pages"] > 0
    assert len(await _ids(other, "note")) == 10
    # a pure append re-reads only the new messages: the mark counts every message once
    mark = await writer.database[SEARCH_TASKS].find_one({"tenant": "acme"})
    assert (mark["s"], mark["d"]) == (10, 10)


async def test_tenants_and_owners_never_see_each_others_messages(store: Store) -> None:
    acme, globex = store.scoped("acme"), store.scoped("globex")
    for tenant, owner in ((acme, "alice"), (acme, "bob"), (globex, "alice")):
        task = await tenant.tasks.create(owner=owner)
        await tenant.tasks.add_human_message(task.id, f"secret plan of {owner}",
                                             message_id=f"{tenant.tenant}-{owner}")  # fmt: skip
    assert sorted(await _ids(acme, "plan")) == ["acme-alice", "acme-bob"]
    assert await _ids(globex, "plan") == ["globex-alice"]
    alice = store.scoped("acme", owner="alice")
    assert await _ids(alice, "plan") == ["acme-alice"]
    assert await _ids(acme, "plan", owner="bob") == ["acme-bob"]
    with pytest.raises(ValidationError, match="owner"):
        await alice.search("plan", owner="bob")


CONFIG = TaskConfigPart(model_name="m", tool_metadata=[
    ToolMetadata(name="research", is_task_entry=True)])  # fmt: skip


async def test_the_query_language(acme: Any) -> None:
    task = await acme.tasks.create(owner="alice", config=CONFIG)
    add = acme.tasks.add_human_message
    await add(task.id, "The Lisbon hotel was lovely", message_id="a")
    await add(task.id, "A hotel near Lisbon airport", message_id="b")
    full_width = "\uff2c\uff29\uff33\uff22\uff2f\uff2e"  # LISBON
    await add(task.id, f"Café résumé in {full_width}", message_id="c")
    await add(task.id, "東京都の天気を教えて", message_id="d")
    turn = await acme.tasks.add_assistant_message(task.id, message_id="e")
    await acme.tasks.add_text_part(task.id, turn.id, "Checking the weather in Lisbon")
    await acme.tasks.add_tool_call_part(task.id, turn.id, ToolCallPart(
        tool_call_id="c1", tool_name="get_weather", args={"city": "Lisbon"}))  # fmt: skip
    assert sorted(await _ids(acme, "lisbon hotel", match="all")) == ["a", "b"]
    assert await _ids(acme, '"lisbon hotel"') == ["a"]
    assert await _ids(acme, '"lisbon hotel"', match="all") == ["a"]
    assert await _ids(acme, "lisbon hotel -airport", match="all") == ["a"]
    assert await _ids(acme, "CAFE RESUME lisbon", match="all") == ["c"]
    # match="any" (the default): any word qualifies, the messages holding more rank first
    anyway = await _ids(acme, "lisbon hotel")
    assert sorted(anyway[:2]) == ["a", "b"] and sorted(anyway[2:]) == ["c", "e"]
    assert sorted(await _ids(acme, "lisbon hotel -airport")) == ["a", "c", "e"]
    assert (await _ids(acme, "CAFE RESUME lisbon"))[0] == "c"
    assert await _ids(acme, "京都") == ["d"] and await _ids(acme, "東京") == ["d"]
    assert await _ids(acme, "tool:get_weather") == ["e"]
    assert await _ids(acme, "tool:GET_WEATHER lisbon") == ["e"]
    assert sorted(await _ids(acme, "lisbon role:user")) == ["a", "b", "c"]
    assert await _ids(acme, "lisbon", roles=["assistant"]) == ["e"]
    assert await _ids(acme, "lisbon", task_ids=["nope"]) == []


async def test_time_filters_and_cursor_pages(acme: Any) -> None:
    task = await acme.tasks.create(owner="alice")
    for n in range(7):
        await acme.tasks.add_human_message(task.id, f"page word {n}", message_id=f"p{n}")
    seen: list[str] = []
    page = await acme.search("word", limit=3)
    while True:
        seen += [hit.message_id for hit in page.hits]
        if page.next_cursor is None:
            break
        page = await acme.search("word", limit=3, cursor=page.next_cursor)
    assert sorted(seen) == [f"p{n}" for n in range(7)] and page.total == 7
    with pytest.raises(ValidationError, match="cursor"):
        await acme.search("other", limit=3, cursor=(await acme.search("word", limit=3)).next_cursor)
    future = datetime.now(UTC) + timedelta(hours=1)
    assert await _ids(acme, "word", since=future) == []
    assert len(await _ids(acme, "word", until=future)) == 7


@pytest.mark.parametrize("query", ["", "   ", "x" * 10_240, "a\x00b", "role:user", "-word",
                                   "role:nobody word", 42, None])  # fmt: skip
async def test_hostile_queries_are_typed_errors(acme: Any, query: Any) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "word")
    before = await _entries(acme.store)
    with pytest.raises(ValidationError, match="query"):
        await acme.search(query)
    assert await _entries(acme.store) == before


@pytest.mark.parametrize("query", ['{"$where": "sleep(1)"}', "$where", ".*", "(a|b)+", '"unclosed',
                                   "\\d{3} [a-z]", '{"$ne": null}'])  # fmt: skip
async def test_operators_and_regex_in_a_query_are_literal_text(acme: Any, query: str) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "where a b d unclosed ne null z", message_id="m")
    await acme.tasks.add_human_message(task.id, "nothing here", message_id="n")
    try:
        found = await _ids(acme, query)
    except ValidationError:
        return  # nothing to find in it: refused, never sent
    assert found in ([], ["m"])


async def test_bad_arguments_are_typed_errors_naming_them(acme: Any) -> None:
    for options, name in (({"limit": 0}, "limit"), ({"limit": 101}, "limit"),
                          ({"roles": ["wizard"]}, "roles"), ({"roles": "user"}, "roles"),
                          ({"since": "yesterday"}, "since"), ({"task_ids": ["a b"]}, "task_ids"),
                          ({"cursor": "garbage"}, "cursor")):  # fmt: skip
        with pytest.raises(ValidationError, match=name):
            await acme.search("word", **options)


async def test_a_redacted_message_is_never_found_again(stores: StoreFactory) -> None:
    store = stores.sibling(page_policy=SMALL_PAGES)
    acme = store.scoped("acme")
    task = await acme.tasks.create(config=CONFIG)
    for n in range(5):
        await acme.tasks.add_human_message(task.id, f"order A-77{n} shipped", message_id=f"m{n}")
    turn = await acme.tasks.add_assistant_message(task.id, message_id="call")
    await acme.tasks.add_tool_call_part(task.id, turn.id, ToolCallPart(
        tool_call_id="c1", tool_name="lookup_order", args={"order": "A-771"}))  # fmt: skip
    assert len(await _ids(acme, "shipped")) == 5 and await _ids(acme, "tool:lookup_order")
    await acme.tasks.redact(task.id, "m1", reason="asked")  # in a sealed page
    await acme.tasks.redact(task.id, "m4")  # in the open page
    await acme.tasks.redact(task.id, "call")  # its tool name stays on the tombstone
    stored = [e["m"] for e in await _entries(store)]
    assert "m1" not in stored and "m4" not in stored  # gone before any search
    assert sorted(await _ids(acme, "shipped")) == ["m0", "m2", "m3"]
    assert await _ids(acme, "a 771") == [] and await _ids(acme, "tool:lookup_order") == []
    assert (await acme.search_index.verify()).ok


async def test_deletes_erase_and_retention_remove_what_the_index_holds(
    store: Store,
) -> None:
    acme = store.scoped("acme")
    made = []
    for owner in ("alice", "alice", "bob", "carol"):
        task = await acme.tasks.create(owner=owner)
        await acme.tasks.add_human_message(task.id, f"kept words of {owner}")
        made.append(task.id)
    child = await acme.dialogs.fork(made[0], last_n=1)
    assert len(await _ids(acme, "kept")) == 5
    await acme.tasks.delete(made[1])
    await acme.dialogs.delete(made[0], cascade=True)
    assert {e["task"] for e in await _entries(store)} == {made[2], made[3]}
    assert child.id not in {e["task"] for e in await _entries(store)}
    await erase(store, "acme", owner="bob")
    assert {e["task"] for e in await _entries(store)} == {made[3]}
    await erase_before(store, "acme", before=datetime.now(UTC) + timedelta(days=1))
    assert await _entries(store) == []
    assert await store.database[SEARCH_TASKS].count_documents({"tenant": "acme"}) == 0
    assert await _ids(acme, "kept") == []
    assert (await acme.search_index.verify()).ok


async def test_a_restored_backup_is_searchable(
    acme: Any, store_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # written a day ago: older than any watermark of the store it is restored into
    from mindstore import clock

    yesterday = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    with monkeypatch.context() as patched:
        patched.setattr(clock, "_now", lambda: yesterday)
        task = await acme.tasks.create(owner="alice")
        await acme.tasks.add_human_message(task.id, "restored lighthouse", message_id="m")
    assert await _ids(acme, "lighthouse") == ["m"]
    await backup(acme.store, tmp_path / "b", tenant="acme")
    elsewhere = await store_factory()
    other = elsewhere.scoped("acme")
    await other.tasks.add_human_message((await other.tasks.create()).id, "fresh")
    assert await _ids(other, "fresh")  # its index is up to date before the restore
    await restore(elsewhere, tmp_path / "b")
    assert await _ids(other, "lighthouse") == ["m"]


async def test_rebuild_and_verify(acme: Any) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "the runners were running", message_id="m")
    assert await _ids(acme, "run") == []
    assert await acme.search_index.rebuild(stemming="english") == 1
    assert await _ids(acme, "run") == ["m"] and await _ids(acme, "runner") == ["m"]
    await acme.store.database[SEARCH_ENTRIES].delete_one({"tenant": "acme", "task": task.id})
    report = await acme.search_index.verify()
    assert not report.ok and report.missing == [f"acme/{task.id}/0"]
    await acme.search_index.rebuild(stemming=None)
    assert (await acme.search_index.verify()).ok and await _ids(acme, "run") == []


# ------------------------------------------------------------------ under a keyring
def _keyring() -> Keyring:
    return Keyring(LocalMasterKey(os.urandom(32)))


async def test_under_a_keyring_the_index_holds_no_word_and_a_shred_ends_search(
    store_factory: Any,
) -> None:
    store = await store_factory(keyring=_keyring(), page_policy=SMALL_PAGES)
    acme = store.scoped("acme")
    task = await acme.tasks.create(owner="alice", config=CONFIG)
    for n in range(4):
        await acme.tasks.add_human_message(task.id, f"Lisbon zebracorn {n}", message_id=f"m{n}")
    turn = await acme.tasks.add_assistant_message(task.id, message_id="t")
    await acme.tasks.add_tool_call_part(task.id, turn.id, ToolCallPart(
        tool_call_id="c1", tool_name="lookup_zebracorn", args={}))  # fmt: skip
    page = await acme.search("zebracorn lisbon", limit=10, match="all")
    assert len(page.hits) == 4 and "**zebracorn**" in page.hits[0].snippet.marked().casefold()
    # any word: the tool call's `lookup_zebracorn` too, below the messages holding both
    assert [h.message_id for h in (await acme.search("zebracorn lisbon")).hits][4:] == ["t"]
    assert await _ids(acme, "tool:lookup_zebracorn") == ["t"]
    raw = repr(
        [
            await store.database[name].find({}).to_list(None)
            for name in ("search_entries", "search_postings", "search_tasks")
        ]
    )
    assert "zebracorn" not in raw.casefold() and "lisbon" not in raw.casefold()
    # another tenant's tokens for the same word differ
    globex = store.scoped("globex")
    await globex.tasks.add_human_message((await globex.tasks.create()).id, "zebracorn")
    assert len(await _ids(globex, "zebracorn")) == 1
    postings = store.database["search_postings"]
    tokens = {tenant: {d["_id"].split("/")[1] async for d in postings.find({"tenant": tenant})
                       if not d["_id"].endswith("/")}
              for tenant in ("acme", "globex")}  # fmt: skip
    assert not tokens["acme"] & tokens["globex"]
    await store.keyring.shred("acme")
    with pytest.raises(KeyShredded):
        await acme.search("zebracorn")
    assert await _entries(store) == []
    assert len(await _ids(globex, "zebracorn")) == 1


async def test_a_rotated_key_rebuilds_the_blind_index(store_factory: Any) -> None:
    store = await store_factory(keyring=_keyring())
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "before rotation", message_id="m")
    assert await _ids(acme, "rotation") == ["m"]
    await store.keyring.rotate("acme")
    assert await _ids(acme, "rotation") == ["m"]
    await acme.tasks.add_human_message(task.id, "after rotation", message_id="n")
    assert sorted(await _ids(acme, "rotation")) == ["m", "n"]


async def test_text_of_a_task_entry_and_exit_is_found(acme: Any) -> None:
    config = CONFIG
    task = await acme.tasks.create(config=config)
    turn = await acme.tasks.add_assistant_message(task.id)
    call = ToolCallPart(tool_call_id="c-1", tool_name="research")
    await acme.tasks.add_tool_call_part(task.id, turn.id, call)
    await acme.tasks.add_task_entry(task.id, [TextPart(text="compare two hotels")], config)
    await acme.tasks.add_task_exit(task.id, [TextPart(text="Casa do Rio wins")])
    assert len(await _ids(acme, "compare hotels")) == 1
    # the exit's text answers the call that opened the sub-task: a tool result
    assert {hit.role for hit in (await acme.search("casa rio")).hits} == {"tool"}
    assert await _ids(acme, "casa tool:research")


async def test_the_integrations_conversations_are_searchable(acme: Any) -> None:
    from langchain_core.messages import HumanMessage

    from mindstore.integrations.langchain import MindstoreChatMessageHistory
    from mindstore.integrations.openai_agents import MindstoreSession

    await MindstoreChatMessageHistory("chat", acme).aadd_messages([HumanMessage("quokka facts")])
    session = MindstoreSession("s-1", acme.store.scoped("acme", owner="ann"))
    await session.add_items([{"role": "user", "content": "quokka photos"}])
    page = await acme.search("quokka")
    assert {hit.snippet.text for hit in page.hits} == {"quokka facts", "quokka photos"}
    ann = acme.store.scoped("acme", owner="ann")
    assert [hit.snippet.text for hit in (await ann.search("quokka")).hits] == ["quokka photos"]


async def test_every_adapters_conversations_are_searchable(acme: Any) -> None:
    """LangGraph's threads, pydantic-ai, ADK, LlamaIndex and Agent Framework conversations
    are tasks, so one search finds a word said through each of them."""
    from agent_framework import Message
    from google.adk.events import Event
    from google.genai import types
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint
    from llama_index.core.llms import ChatMessage
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from mindstore.integrations.adk import MindstoreSessionService
    from mindstore.integrations.agent_framework import MindstoreHistoryProvider
    from mindstore.integrations.langgraph import MindstoreSaver
    from mindstore.integrations.llamaindex import MindstoreChatStore
    from mindstore.integrations.pydantic_ai import save_messages

    said = {name: f"wombat {name}" for name in ("langgraph", "pydantic", "adk", "llama", "af")}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [HumanMessage(said["langgraph"], id="h1")]}
    checkpoint["channel_versions"] = {"messages": 1}
    thread = {"configurable": {"thread_id": "th", "checkpoint_ns": ""}}
    await MindstoreSaver(acme).aput(thread, checkpoint, {"source": "input", "step": 0},
                                    {"messages": 1})  # fmt: skip
    await save_messages(acme, "org/team/chat-1",
                        [ModelRequest(parts=[UserPromptPart(said["pydantic"])])])  # fmt: skip
    service = MindstoreSessionService(acme)
    session = await service.create_session(app_name="app", user_id="ann", session_id="s1")
    content = types.Content(role="user", parts=[types.Part(text=said["adk"])])
    await service.append_event(session, Event(id="e1", invocation_id="i1", author="user",
                                              content=content))  # fmt: skip
    await MindstoreChatStore(acme).add_message(
        "llama", ChatMessage(role="user", content=said["llama"]))  # fmt: skip
    await MindstoreHistoryProvider(acme).save_messages(
        "af", [Message(role="user", contents=[said["af"]])])  # fmt: skip
    page = await acme.search("wombat")
    assert sorted(hit.snippet.text for hit in page.hits) == sorted(said.values())


async def _searched(acme: mindstore.TenantStore, query: str) -> tuple[list[str], list[str]]:
    """The hits' ids of a search and the commands it sent (collection: name)."""
    with acme.store.backend.recorder.capture() as log:
        ids = await _ids(acme, query)
    sent = [f"{c.collection}: {c.name}" for c in log for _ in range(c.round_trips)]
    return ids, sent


async def test_a_search_that_finds_nothing_new_costs_three_round_trips(
    stores: StoreFactory,
) -> None:
    writer, reader = stores.sibling(), stores.sibling()
    acme, other = writer.scoped("acme"), reader.scoped("acme")
    first = await acme.tasks.create(owner="alice")
    await acme.tasks.add_human_message(first.id, "hotel in Lisbon", message_id="a-1")
    second = await acme.tasks.create(owner="bob")
    await acme.tasks.add_human_message(second.id, "hotel in Porto", message_id="b-1")
    assert sorted(await _ids(acme, "hotel")) == ["a-1", "b-1"]  # indexes both
    await _ids(other, "hotel")  # the reader's first search reads the tenant's state
    for view in (acme, other):
        # the postings ride on the change check; then the tables of the tasks they name
        # (length, role, time of their messages), then the snippets' texts
        found, sent = await _searched(view, "hotel")
        assert sorted(found) == ["a-1", "b-1"]
        assert sent == ["tasks: aggregate", "search_entries: find", "search_entries: find"]
    # a change is still seen by the next search, from the other store too
    await acme.tasks.add_human_message(second.id, "Porto hotel booked", message_id="b-2")
    found, sent = await _searched(other, "hotel")
    # the catch-up: read, claim, entries, postings, terms and release; the postings ride
    # on the second change check
    assert sorted(found) == ["a-1", "b-1", "b-2"] and sent == [
        "tasks: aggregate", "tasks: find", "search_tasks: update", "search_entries: insert",
        "search_postings: update", "search_tasks: update", "tasks: aggregate",
        "search_entries: find", "search_entries: find"]  # fmt: skip
    # the carrier is now `second` (the last task indexed): a change to another task
    await acme.tasks.add_human_message(first.id, "Lisbon hotel booked", message_id="a-2")
    assert sorted((await _searched(other, "hotel"))[0]) == ["a-1", "a-2", "b-1", "b-2"]
    assert (await _searched(other, "hotel"))[1] == [
        "tasks: aggregate", "search_entries: find", "search_entries: find"]  # fmt: skip
    # the task whose row carries the lookup is deleted: the postings are read apart
    await acme.tasks.delete(second.id)
    for view in (other, acme):
        found, sent = await _searched(view, "hotel")
        assert sorted(found) == ["a-1", "a-2"] and len(sent) <= 5
    # a rebuild from one store (a new epoch) is seen by the other's cached state
    await writer.scoped("acme").search_index.rebuild()
    assert sorted(await _ids(other, "lisbon")) == ["a-1", "a-2"]
    assert (await _searched(acme, "lisbon"))[1] == [
        "tasks: aggregate", "search_entries: find", "search_entries: find"]  # fmt: skip
