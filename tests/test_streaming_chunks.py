"""Streamed deltas travel once: each write pushes what arrived since the last one as a chunk,
readers join the chunks, and a write retried after a lost reply never appends twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo.errors import AutoReconnect

import mindstore
from mindstore.backup import backup, restore, verify
from mindstore.errors import Conflict
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import TaskConfigPart, TextPart
from mindstore.model.storage_form import CHUNKS_KEY
from mindstore.model.stored_read import parse_stored_documents
from mindstore.repositories.streaming import MessageStream
from mindstore.repositories.tasks import RetryPolicy
from test_streaming import header_is_consistent, stored_documents

CONFIG = TaskConfigPart(model_name="m")
NEVER_MS = 3_600_000
PER_WRITE = 400
"""Bytes a streaming update sends besides its new text: the filter (key, tenant, version,
updated_at, the chunk guard), the chunk's path, size_bytes, version, updated_at and the
command envelope."""


async def new_turn(acme: Any, history: int = 0) -> tuple[str, str]:
    earlier = [UserMessage(content=[TextPart(text=f"earlier {i}")]) for i in range(history)]
    tid = (await acme.tasks.create(config=CONFIG, messages=earlier)).id
    await acme.tasks.add_human_message(tid, "write me an essay")
    return tid, (await acme.tasks.add_assistant_message(tid)).id


async def text_of(acme: Any, tid: str, mid: str) -> str:
    message = await acme.tasks.get_message(tid, mid)
    assert isinstance(message, AssistantMessage)
    return message.text()


def new_text(update: Any, at: str) -> str:
    """The text one streaming update carries: the part placed whole, or the chunk pushed."""
    placed = update.update["$set"].get(at)
    return placed["text"] if placed is not None else update.update["$push"][f"{at}.{CHUNKS_KEY}"]


# ---------------------------------------------------------------- bytes


@pytest.mark.parametrize("flush_bytes", [256, 1024])
async def test_a_streamed_turn_sends_its_text_once_whatever_its_length(acme, store, flush_bytes):
    beyond: list[int] = []
    for words in (300, 3_000):
        tid, mid = await new_turn(acme)
        header = await acme.tasks.header(tid)
        at = f"messages.{header.seq - 1 - header.sealed}.content.0"
        with store.backend.recorder.capture(payloads=True) as log:
            async with acme.tasks.stream(tid, mid, flush_bytes=flush_bytes, flush_ms=NEVER_MS) as s:
                for i in range(words):
                    await s.text(f"word{i} ")
        text = "".join(f"word{i} " for i in range(words))
        updates = log.by_name("update")
        assert log.names() == ["update"] * len(updates) == ["update"] * s.writes
        assert "".join(new_text(u, at) for u in updates) == text == await text_of(acme, tid, mid)
        assert log.bytes_sent <= 1.5 * len(text.encode()) + PER_WRITE * len(updates)
        beyond.append(max(u.bytes_sent - len(new_text(u, at).encode()) for u in updates))
        assert await header_is_consistent(acme, tid)
    # what a write sends beside its text does not grow with the answer
    assert max(beyond) <= PER_WRITE and beyond[1] - beyond[0] <= 8


async def test_the_earlier_form_sent_the_whole_text_with_every_write(acme, store):
    """The measure above fails the earlier form (the benchmark's 'before' figure)."""
    tid, mid = await new_turn(acme)
    with store.backend.recorder.capture(payloads=True) as log:
        stream = acme.tasks.stream(tid, mid, flush_bytes=256, flush_ms=NEVER_MS)
        stream.push_chunks = False
        async with stream as s:
            for i in range(3_000):
                await s.text(f"word{i} ")
    text = "".join(f"word{i} " for i in range(3_000))
    assert await text_of(acme, tid, mid) == text
    assert log.bytes_sent > 10 * len(text.encode())
    assert await header_is_consistent(acme, tid)


# ---------------------------------------------------------------- readers mid-stream


async def test_every_reader_sees_the_whole_text_mid_stream(acme, store, store_factory, tmp_path):
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, flush_bytes=8, flush_ms=NEVER_MS) as s:
        for word in ("Octopuses ", "have ", "three ", "hearts, ", "and ", "blue ", "blood."):
            await s.text(word)
        await s.flush()
        text = "Octopuses have three hearts, and blue blood."
        raw = (await stored_documents(acme, tid))[-1]["content"][0]
        assert len(raw[CHUNKS_KEY]) >= 3  # chunked in the store...
        # ...and whole for every reader
        assert await text_of(acme, tid, mid) == text
        assert (await acme.tasks.load(tid)).messages[-1].text() == text
        assert (await acme.tasks.tail(tid, 1))[0].text() == text
        assert [m.text() for m in await acme.tasks.messages(tid)][-1] == text
        assert (await acme.tasks.get_updates(tid))[-1].text() == text  # what `watch` polls
        window = await acme.tasks.context(tid)
        assert window.to_openai_chat()[-1]["content"] == text
        assert await header_is_consistent(acme, tid)
        await backup(store, tmp_path / "b", tenant=acme.tenant)
    report = await verify(tmp_path / "b")
    assert report is not None
    copy = await store_factory()  # the suite's backend; closed with the test
    await restore(copy, tmp_path / "b")
    message = await copy.scoped(acme.tenant).tasks.get_message(tid, mid)
    assert message is not None and message.text() == text


async def test_watch_sees_the_text_so_far_at_every_write(acme):
    tid, mid = await new_turn(acme)
    seen: list[str] = []
    arrived = asyncio.Event()

    async def follow() -> None:
        async for event in acme.tasks.watch(tid):
            if event.message.id == mid:
                seen.append(event.message.text())
                arrived.set()
                if seen[-1] == "one two three":
                    return

    async def until_seen(text: str) -> None:
        while not seen or seen[-1] != text:
            arrived.clear()
            await arrived.wait()

    watcher = asyncio.create_task(follow())
    so_far = ""
    async with acme.tasks.stream(tid, mid, flush_bytes=1, flush_ms=NEVER_MS) as s:
        for word in ("one", " two", " three"):
            await s.text(word)  # one write each
            so_far += word
            await asyncio.wait_for(until_seen(so_far), 30)  # a bound against a hang only
    await asyncio.wait_for(watcher, 30)
    assert [t for t in seen if t] == ["one", "one two", "one two three"]


async def test_a_part_verb_after_the_stream_returns_the_whole_text(acme):
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, flush_bytes=1, flush_ms=NEVER_MS) as s:
        for word in ("a", "b", "c"):
            await s.text(word)
    finished = await acme.tasks.finish_assistant_message(tid, mid, tokens_in=3, tokens_out=4)
    assert finished.text() == "abc" == await text_of(acme, tid, mid)
    assert await header_is_consistent(acme, tid)


# ---------------------------------------------------------------- exactly once


class LostReply:
    """The task collection, but the first update that pushes a chunk loses its reply:
    applied (`lands`) or not, the caller gets `AutoReconnect`."""

    def __init__(self, inner: Any, lands: bool) -> None:
        self.inner, self.lands, self.fired = inner, lands, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def update_one(self, query: Any, update: Any, *args: Any, **kwargs: Any) -> Any:
        if self.fired or "$push" not in update:
            return await self.inner.update_one(query, update, *args, **kwargs)
        self.fired += 1
        if self.lands:
            await self.inner.update_one(query, update, *args, **kwargs)
        raise AutoReconnect("connection closed before the reply")


@pytest.mark.parametrize("lands", [True, False])
async def test_a_write_retried_after_a_lost_reply_appends_once(acme, lands):
    tid, mid = await new_turn(acme)
    original = acme.tasks.port.scope.tasks
    acme.tasks.port.scope.tasks = LostReply(original, lands)
    try:
        async with acme.tasks.stream(tid, mid, flush_bytes=4, flush_ms=NEVER_MS) as s:
            await s.text("one ")
            with pytest.raises(AutoReconnect):
                await s.text("two ")  # its write's reply is lost
            assert acme.tasks.port.scope.tasks.fired == 1
            await s.text("three ")  # the next write settles the lost one first
            await s.text("four")
    finally:
        acme.tasks.port.scope.tasks = original
    assert await text_of(acme, tid, mid) == "one two three four"
    raw = (await stored_documents(acme, tid))[-1]["content"][0]
    assert raw["text"] + "".join(raw[CHUNKS_KEY]) == "one two three four"
    assert await header_is_consistent(acme, tid)


async def test_the_chunk_guard_refuses_a_second_push_of_a_landed_chunk(stores, monkeypatch):
    """Even a writer that does not settle (as if its read were wrong) cannot append twice:
    the filter asks for the chunks it knows, and the store holds one more."""
    store = await stores.fresh(retry=RetryPolicy(attempts=3, base_delay=0, max_delay=0))
    acme = store.scoped("acme")
    tid, mid = await new_turn(acme)

    async def forget(self: MessageStream, *_args: Any) -> None:
        self._unsure = None

    monkeypatch.setattr(MessageStream, "_settle", forget)
    original = acme.tasks.port.scope.tasks
    acme.tasks.port.scope.tasks = LostReply(original, lands=True)
    try:
        async with acme.tasks.stream(tid, mid, flush_bytes=4, flush_ms=NEVER_MS) as s:
            await s.text("one ")
            with pytest.raises(AutoReconnect):
                await s.text("two ")
            with pytest.raises(Conflict):
                await s.flush()  # "two " again, with the guard of one chunk fewer
            s.state.parts[0].pending.clear()  # leave the block without writing
    finally:
        acme.tasks.port.scope.tasks = original
    assert await text_of(acme, tid, mid) == "one two "
    assert await header_is_consistent(acme, tid)


# ---------------------------------------------------------------- forms


SAFE = st.text(max_size=8).filter(lambda t: not t.startswith("mindstore:"))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["text", "reasoning"]), SAFE, st.lists(SAFE, max_size=12), st.booleans())
def test_a_chunked_part_reads_as_its_joined_text(kind, base, chunks, strings):
    part: dict[str, Any] = {"type": kind, kind: base, CHUNKS_KEY: chunks}
    document = {"id": "m1", "role": "assistant", "started_ts": 1.0, "finished_ts": None,
                "content": [part]}  # fmt: skip
    (message,) = parse_stored_documents([document], strings=strings)
    assert getattr(message.content[0], kind) == base + "".join(chunks)
    assert CHUNKS_KEY not in str(message.model_dump())


def test_a_chunk_key_on_another_part_is_left_as_a_key():
    document = {"id": "m1", "role": "assistant", "started_ts": 1.0, "finished_ts": None,
                "content": [{"type": "image", "image": "x", CHUNKS_KEY: ["a"]}]}  # fmt: skip
    (message,) = parse_stored_documents([document], strings=True)
    assert message.content[0].image == "x" and message.content[0].model_extra == {"more": ["a"]}


TRICKY = st.sampled_from(["mindstore:", "mindstore:escaped:x", "mindstore:payload:y", "§more",
                          "§", "a", "é", " ", "\x00", "$x", "a.b", "🙂"])  # fmt: skip


async def _round_trip(deltas: list[str], flush_bytes: int, threshold: int) -> None:
    store = await mindstore.connect("embedded", offload_threshold=threshold)
    try:
        acme = store.scoped("prop")
        tid, mid = await new_turn(acme, history=2)
        async with acme.tasks.stream(tid, mid, flush_bytes=flush_bytes, flush_ms=NEVER_MS) as s:
            for delta in deltas:
                await s.text(delta)
        assert await text_of(acme, tid, mid) == "".join(deltas)
        assert await header_is_consistent(acme, tid)
    finally:
        await store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(TRICKY, st.text(max_size=6)), min_size=1, max_size=30),
       st.integers(1, 24), st.sampled_from([48, 256 * 1024]))  # fmt: skip
def test_streamed_text_round_trips_whatever_the_deltas(deltas, flush_bytes, threshold):
    """Escaped prefixes, key-like text, payload-sized chunks (a threshold of 48 bytes):
    what cannot be pushed as it is is folded, and the text reads back exactly."""
    asyncio.run(_round_trip(deltas, flush_bytes, threshold))


# ---------------------------------------------------------------- pages


async def test_streaming_into_a_message_that_gets_sealed(stores):
    store = await stores.fresh(page_policy=PagePolicy(page_messages=2))
    acme = store.scoped("acme")
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, flush_bytes=1, flush_ms=NEVER_MS) as s:
        for word in ("alpha ", "beta ", "gamma "):
            await s.text(word)
        for i in range(8):  # the message moves into a sealed page, chunks and all
            await acme.tasks.add_human_message(tid, f"later {i}")
        header = await acme.tasks.header(tid)
        assert header.sealed > header.seq - 9  # the streamed message is sealed
        assert await text_of(acme, tid, mid) == "alpha beta gamma "
        with store.backend.recorder.capture(payloads=True) as log:
            for word in ("delta ", "epsilon"):  # a sealed message's text is set whole
                await s.text(word)
        updates = [u.update for u in log.by_name("update")]
        changes = [u["$push"]["pending"]["$each"] for u in updates if "$push" in u]
        assert [[(c["p"], c.get("v")) for c in each] for each in changes] == [
            [("content.0.text", "alpha beta gamma delta "), (f"content.0.{CHUNKS_KEY}", None)],
            [("content.0.text", "alpha beta gamma delta epsilon")],
        ]  # pending changes of the sealed message: the whole text, the chunks removed
    assert await text_of(acme, tid, mid) == "alpha beta gamma delta epsilon"
    assert (await acme.tasks.load(tid)).messages[2].text() == "alpha beta gamma delta epsilon"
    assert await header_is_consistent(acme, tid)


@pytest.mark.parametrize("part_index", [None, 1])
async def test_redacting_a_streamed_message_keeps_size_bytes_exact(
    acme, store, tmp_path, part_index
):
    """Redaction rewrites the content from its decoded (joined) form: the chunks' framing
    leaves the stored size with them, and a backup of the task verifies."""
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, flush_bytes=2, flush_ms=NEVER_MS) as s:
        for word in ("think", "ing ", "hard"):
            await s.reasoning(word)
        for word in ("Hello", " big", " world"):
            await s.text(word)
    await acme.tasks.add_human_message(tid, "next")
    raw = (await stored_documents(acme, tid))[-2]["content"]
    assert CHUNKS_KEY in raw[0] and CHUNKS_KEY in raw[1]
    await acme.tasks.redact(tid, mid, reason="pii", part_index=part_index)
    assert await header_is_consistent(acme, tid)
    await backup(store, tmp_path / "b", tenant=acme.tenant)
    await verify(tmp_path / "b")


async def test_an_answer_that_begins_like_a_store_marker_is_still_pushed(acme, store):
    """Its first text is stored escaped (a prefix readers remove before joining), so later
    writes still push chunks; a chunk that begins so is folded instead."""
    tid, mid = await new_turn(acme)
    deltas = ["mindstore:payload:x", " then", " more", "mindstore:escaped:y", " end"]
    with store.backend.recorder.capture(payloads=True) as log:
        async with acme.tasks.stream(tid, mid, flush_bytes=1, flush_ms=NEVER_MS) as s:
            for delta in deltas:
                await s.text(delta)
    pushed = [u.update["$push"] for u in log.by_name("update") if "$push" in u.update]
    assert [list(p.values()) for p in pushed] == [[" then"], [" more"], [" end"]]
    text = "".join(deltas)
    assert await text_of(acme, tid, mid) == text
    finished = await acme.tasks.finish_assistant_message(tid, mid)
    assert finished.text() == text and (await acme.tasks.load(tid)).messages[-1].text() == text
    assert await header_is_consistent(acme, tid)
