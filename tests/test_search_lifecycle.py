"""The search index's side of the lifecycle (docs/search.md): what an erase leaves (nothing
of the words it erased, not even in an `_id`), a change to an indexed message after a
multi-message append, exact time filters on sub-millisecond times, and the cost of a
phrase of common words and of the first search after an append (round trips, bytes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore
from mindstore import Store
from mindstore.backup import erase
from mindstore.backup.retention import erase_before
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import TaskConfigPart, TextPart
from mindstore.search.entries import unpack_chunk

SECRET = ("zanzibarq", "quokkafy")
"""Words only the erased message holds."""


async def _ids(acme: mindstore.TenantStore, query: str, **options: Any) -> list[str]:
    page = await acme.search(query, limit=100, **options)
    return [hit.message_id for hit in page.hits]


async def _index_dump(store: Store) -> str:
    """Every document of the three search collections, `_id`s included, as text, with the
    entries' chunks opened (their texts are compressed: a word in them shows only so)."""
    held = [await store.database[name].find({}).to_list(None)
            for name in (SEARCH_POSTINGS, SEARCH_ENTRIES, SEARCH_TASKS)]  # fmt: skip
    texts = [unpack_chunk(chunk, bytes(chunk["z"])) for chunk in held[1]]
    return repr([held, texts]).casefold()


Erasure = Callable[[Store, mindstore.TenantStore, dict[str, str]], Awaitable[Any]]


async def _redact(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    await acme.tasks.redact(made["task"], "secret")


async def _redact_sealed(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    for n in range(4):  # the secret message ends in a sealed page (3-message pages)
        await acme.tasks.add_human_message(made["task"], f"later words {n}")
    await acme.search("later")
    await acme.tasks.redact(made["task"], "secret")


async def _retract(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    assert (await acme.tasks.retract_last(made["task"])).id == "secret"


async def _delete(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    await acme.tasks.delete(made["task"])


async def _dialog_delete(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    fork = await acme.dialogs.fork(made["task"], last_n=1)  # a copy of the secret message
    assert len(await _ids(acme, SECRET[0])) == 2, fork.id
    await acme.dialogs.delete(made["task"], cascade=True)


async def _erase_task(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    await erase(store, "acme", task_id=made["task"])


async def _erase_owner(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    await erase(store, "acme", owner="bob")


async def _erase_tenant(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    await erase(store, "acme")


async def _retention(store: Store, acme: mindstore.TenantStore, made: dict[str, str]) -> None:
    await erase_before(store, "acme", owner="bob", before=datetime.now(UTC) + timedelta(days=1))


@pytest.mark.parametrize(
    "erasure",
    [_redact, _redact_sealed, _retract, _delete, _dialog_delete, _erase_task, _erase_owner,
     _erase_tenant, _retention],
    ids=lambda f: f.__name__.strip("_"),
)  # fmt: skip
async def test_an_erase_leaves_no_trace_of_its_words(stores: Any, erasure: Erasure) -> None:
    store = stores.sibling(page_policy=PagePolicy(page_messages=3))
    acme = store.scoped("acme")
    kept = await acme.tasks.create(owner="alice")
    await acme.tasks.add_human_message(kept.id, "common words stay", message_id="kept")
    task = await acme.tasks.create(owner="bob")
    await acme.tasks.add_human_message(task.id, "common words here", message_id="first")
    await acme.tasks.add_human_message(task.id, " ".join(SECRET) + " common", message_id="secret")
    assert await _ids(acme, " ".join(SECRET)) == ["secret"]
    assert SECRET[0] in await _index_dump(store)
    chunks = await store.database[SEARCH_ENTRIES].find({}).to_list(None)
    assert [m for c in chunks for _, m, t in unpack_chunk(c, bytes(c["z"])) if SECRET[1] in t]
    await erasure(store, acme, {"task": task.id})
    for moment in ("before any search", "after a search"):
        dump = await _index_dump(store)
        assert not [w for w in SECRET if w in dump], moment
        assert await _ids(acme, SECRET[0]) == []
    if erasure is not _erase_tenant:
        assert "kept" in await _ids(acme, "common words")
    assert (await acme.search_index.verify()).ok


async def test_a_change_to_an_indexed_message_after_a_multi_message_append_is_found(
    acme: Any,
) -> None:
    from mindstore.model.messages import UserMessage as HumanMessage

    task = await acme.tasks.create(config=TaskConfigPart(model_name="m"))
    turn = await acme.tasks.add_assistant_message(task.id, message_id="turn")
    await acme.tasks.add_text_part(task.id, turn.id, "first thoughts")
    assert await _ids(acme, "thoughts") == ["turn"]
    await acme.tasks.add_text_part(task.id, turn.id, "then a marmalade idea")  # a part added
    two = [HumanMessage(content=[TextPart(text=text)]) for text in ("one", "two")]
    await acme.tasks.add_messages(task.id, two)
    assert await _ids(acme, "marmalade") == ["turn"]
    assert len(await _ids(acme, "one")) == 1
    assert (await acme.search_index.verify()).ok


async def test_time_filters_are_exact_below_the_millisecond(acme: Any) -> None:
    """Caller-given times 20.3, 20.5 and 30.4 ms past a second: `since` admits a message at
    its own time, `until` drops it, to the microsecond."""
    from mindstore.model.messages import UserMessage as HumanMessage

    base = 1_700_000_000.0
    offsets = {"a": 0.0203, "b": 0.0205, "c": 0.0304}
    task = await acme.tasks.create()
    await acme.tasks.add_messages(task.id, [
        HumanMessage(id=name, started_ts=base + at, content=[TextPart(text="tick")])
        for name, at in offsets.items()])  # fmt: skip

    def at(offset: float) -> datetime:
        return datetime.fromtimestamp(base, UTC) + timedelta(microseconds=round(offset * 1e6))

    for name, offset in offsets.items():
        since = sorted(n for n, o in offsets.items() if o >= offset)
        until = sorted(n for n, o in offsets.items() if o < offset)
        assert sorted(await _ids(acme, "tick", since=at(offset))) == since, name
        assert sorted(await _ids(acme, "tick", until=at(offset))) == until, name
    assert sorted(await _ids(acme, "tick", since=at(0.0204), until=at(0.0305))) == ["b", "c"]
    assert await _ids(acme, "tick", since=at(0.0203), until=at(0.0203)) == []
    hits = (await acme.search("tick", limit=10)).hits
    assert {hit.message_id: hit.time for hit in hits} == {n: at(o) for n, o in offsets.items()}


COMMON = "a the of and to in is it that was"


async def _cost(acme: mindstore.TenantStore, query: str) -> tuple[int, int, int]:
    """(round trips, bytes received, total) of one search."""
    with acme.store.backend.recorder.capture() as log:
        page = await acme.search(query, limit=10)
    return log.round_trips, log.bytes_received, page.total


async def test_a_phrase_of_common_words_reads_no_text_per_candidate(stores: Any) -> None:
    from mindstore.model.messages import UserMessage as HumanMessage

    store = stores.sibling()
    acme = store.scoped("acme")
    words = COMMON.split()
    for t in range(6):
        task = await acme.tasks.create()
        texts = [f"{' '.join(words[(t + n) % 10 :] + words[:3])} {n}" for n in range(40)]
        await acme.tasks.add_messages(
            task.id, [HumanMessage(content=[TextPart(text=text)]) for text in texts]
        )
    await acme.search("zzz")  # indexed
    trips, received, total = await _cost(acme, '"a the"')
    assert total == sum(1 for t in range(6) for n in range(40)
                        if "a the" in " ".join(words[(t + n) % 10:] + words[:3]))  # fmt: skip
    plain_trips, plain_received, _ = await _cost(acme, "a the")
    # the postings, the tables of the tasks holding the phrase, the page's ten texts: as
    # many round trips as a search of the words, and no more bytes
    assert trips == plain_trips == 3 and received <= plain_received * 1.05


async def test_the_first_search_after_an_append_costs_nine_round_trips(stores: Any) -> None:
    store = stores.sibling()
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    for n in range(30):
        await acme.tasks.add_human_message(task.id, f"words of message {n}")
    await acme.search("words")
    await acme.tasks.add_human_message(task.id, "one more word")
    trips, _received, total = await _cost(acme, "word")
    assert total == 1 and trips == 9


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=30),
       st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4))  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_a_phrase_on_positions_agrees_with_the_phrase_on_the_words(
    words: list[str], phrase: list[str]
) -> None:
    """The positions a posting packs find a phrase exactly where the message's words hold it."""
    from mindstore.search.index import Packed, pack_group, unpack
    from mindstore.search.service import _phrase_at
    from mindstore.search.snippet import phrase_at

    found = {}
    for term in set(words):
        places = [at for at, word in enumerate(words) if word == term]
        (group,) = pack_group(1, term, [Packed(0, tuple(places))], None)
        (found[term],) = unpack(group)
    expected = phrase_at(words, tuple(phrase))
    assert (all(t in found for t in phrase) and _phrase_at(found, tuple(phrase))) == expected


async def test_under_a_keyring_positions_are_sealed_and_phrases_still_work(
    store_factory: Any,
) -> None:
    """Positions in clear would show the order of the tokens in a message: under a keyring
    each group's positions are sealed apart; a phrase opens them."""
    import os

    from mindstore.crypto import Keyring, LocalMasterKey

    store = await store_factory(keyring=Keyring(LocalMasterKey(os.urandom(32))))
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "the lisbon hotel booking", message_id="m")
    await acme.tasks.add_human_message(task.id, "hotel near lisbon", message_id="n")
    assert await _ids(acme, '"lisbon hotel"') == ["m"]
    assert sorted(await _ids(acme, "lisbon hotel")) == ["m", "n"]
    groups = [g async for d in store.database[SEARCH_POSTINGS].find({"tenant": "acme"})
              for g in d.get("e") or []]  # fmt: skip
    # the packed postings keep each term's count but no position (those are in `x`)
    from mindstore.search.index import unpack

    assert groups and all(isinstance(g["x"], bytes) for g in groups)
    unsealed = [p for g in groups for p in unpack(g)]
    assert {p.index for p in unsealed} == {0, 1}
    assert all(p.positions == () and p.count == 1 for p in unsealed)
