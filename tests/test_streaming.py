"""Streaming a model's deltas into one message: coalescing, when writes happen, what each
write carries, concurrency, crashes, and refusals."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from layout import stored_messages
from mindstore.errors import InvalidTransition, NotFound, ValidationError
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.parts import ReasoningPart, TaskConfigPart, TextPart, ToolCallPart
from mindstore.model.plans import derive_header
from mindstore.model.storage_form import CHUNKS_KEY, bson_size
from mindstore.model.streaming import PartWrite, StreamState
from mindstore.repositories.tasks import RetryPolicy
from mindstore.store import Store

CONFIG = TaskConfigPart(model_name="m")
NEVER = {"flush_ms": 3_600_000, "flush_bytes": 10**9}
"""Nothing is written before the block is left."""
WRITE_OVERHEAD = 400
"""Bytes a streaming update sends besides the part's text: filter (key, tenant, version,
updated_at), size_bytes, version, updated_at and the command envelope."""


async def new_turn(acme, history: int = 0) -> tuple[str, str]:
    earlier = [
        UserMessage(content=[TextPart(text=f"earlier message {i} " + "w " * 30)])
        for i in range(history)
    ]
    tid = (await acme.tasks.create(config=CONFIG, messages=earlier)).id
    await acme.tasks.add_human_message(tid, "tell me something")
    assistant = await acme.tasks.add_assistant_message(tid)
    return tid, assistant.id


async def stored(acme, tid: str, message_id: str) -> AssistantMessage:
    message = await acme.tasks.get_message(tid, message_id)
    assert isinstance(message, AssistantMessage)
    return message


async def stored_documents(acme, tid: str) -> list[dict]:
    """The task's message documents as stored (visible sealed pages with the pending
    changes applied, then the open page: tests/layout.py)."""
    return await stored_messages(acme.store.backend.database, f"{acme.tenant}/{tid}")


async def header_is_consistent(acme, tid: str) -> bool:
    """`size_bytes` is the stored form's exact size (streamed chunks included), and the rest of
    the header is what folding the messages as read gives."""
    task = await acme.tasks.load(tid)
    header = await acme.tasks.header(tid)
    derived = derive_header(tid, task.messages)
    exact = header.size_bytes == sum(bson_size(d) for d in await stored_documents(acme, tid))
    return exact and header.seq == derived.seq and header.open_tool_calls == derived.open_tool_calls


def sets_of(log) -> list[dict]:
    return [c.update["$set"] for c in log.by_name("update")]


# ---------------------------------------------------------------- coalescing


async def test_deltas_coalesce_into_one_text_part(acme, store):
    tid, mid = await new_turn(acme)
    with store.backend.recorder.capture(payloads=True) as log:
        async with acme.tasks.stream(tid, mid, **NEVER) as s:
            for delta in ("Hel", "lo", " world"):
                await s.text(delta)
    message = await stored(acme, tid, mid)
    assert message.content == [TextPart(text="Hello world")]
    assert len(log.by_name("update")) == 1 == s.writes
    assert await header_is_consistent(acme, tid)


async def test_reasoning_then_text_make_two_parts_and_close_the_reasoning(acme):
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, flush_bytes=5, flush_ms=3_600_000) as s:
        await s.reasoning("The user wants ")
        await s.reasoning("a fact.", signature="sig-1")
        await s.text("Octopuses have ")
        await s.text("three hearts.")
        await s.reasoning("double-check")
        await s.text(" Really.")
    parts = (await stored(acme, tid, mid)).content
    assert [type(p) for p in parts] == [ReasoningPart, TextPart, ReasoningPart, TextPart]
    assert parts[0].reasoning == "The user wants a fact." and parts[0].signature == "sig-1"
    assert parts[1].text == "Octopuses have three hearts." and parts[3].text == " Really."
    assert (
        parts[0].finished_ts is not None and parts[2].finished_ts is not None
    )  # closed when text came
    assert parts[0].started_ts <= parts[0].finished_ts
    assert await header_is_consistent(acme, tid)


KINDS = st.lists(
    st.tuples(st.sampled_from(["text", "reasoning"]), st.text(max_size=12)), min_size=1, max_size=40
)


async def _stream_and_check(kinds, flush_bytes: int) -> None:
    store = await mindstore.connect("embedded")
    try:
        acme = store.scoped("prop")
        tid, mid = await new_turn(acme, history=3)
        with store.backend.recorder.capture(payloads=True) as log:
            async with acme.tasks.stream(
                tid, mid, flush_bytes=flush_bytes, flush_ms=3_600_000
            ) as s:
                for kind, delta in kinds:
                    await (s.text(delta) if kind == "text" else s.reasoning(delta))
        runs: list[tuple[str, str]] = []
        for kind, delta in kinds:
            if runs and runs[-1][0] == kind:
                runs[-1] = (kind, runs[-1][1] + delta)
            else:
                runs.append((kind, delta))
        parts = (await stored(acme, tid, mid)).content
        assert [
            (p.type, getattr(p, "text", None) or getattr(p, "reasoning", "")) for p in parts
        ] == [("text" if kind == "text" else "reasoning", text) for kind, text in runs]
        header = await acme.tasks.header(tid)
        index = header.seq - 1 - header.sealed  # its place in the task document's array
        for sets in sets_of(log):  # only this message's parts, and the header's own fields
            assert {k for k in sets if k.startswith("messages.")} <= {
                k for k in sets if k.startswith(f"messages.{index}.content.")
            }
            assert set(sets) - {k for k in sets if k.startswith("messages.")} == {
                "size_bytes",
                "updated_at",
                "version",
            }
        assert await header_is_consistent(acme, tid)
    finally:
        await store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(KINDS, st.integers(1, 64))
def test_stored_parts_equal_the_concatenated_deltas(kinds, flush_bytes):
    asyncio.run(_stream_and_check(kinds, flush_bytes))


# ---------------------------------------------------------------- when writes happen


async def test_nothing_is_written_before_the_thresholds_and_all_on_exit(acme):
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, **NEVER) as s:
        await s.text("partial ")
        await s.text("answer")
        assert (await stored(acme, tid, mid)).content == []
    assert (await stored(acme, tid, mid)).text() == "partial answer"


async def test_an_error_inside_the_block_still_flushes(acme):
    tid, mid = await new_turn(acme)
    with pytest.raises(RuntimeError, match="model connection dropped"):
        async with acme.tasks.stream(tid, mid, **NEVER) as s:
            await s.text("what arrived before ")
            await s.text("the failure")
            raise RuntimeError("model connection dropped")
    assert (await stored(acme, tid, mid)).text() == "what arrived before the failure"


async def test_the_byte_threshold_bounds_what_is_unwritten(acme):
    tid, mid = await new_turn(acme)
    sent = ""
    async with acme.tasks.stream(tid, mid, flush_bytes=16, flush_ms=3_600_000) as s:
        for i in range(40):
            delta = f"token{i} "
            await s.text(delta)
            sent += delta
            text = (await stored(acme, tid, mid)).text()
            assert sent.startswith(text) and len(sent.encode()) - len(text.encode()) < 16
    assert (await stored(acme, tid, mid)).text() == sent
    assert 1 < s.writes < 40  # coalesced, not one write per delta


async def test_a_timer_writes_pending_deltas_without_a_further_delta(acme):
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, flush_ms=20, flush_bytes=10**9) as s:
        await s.text("slow model")
        for _ in range(500):  # no further delta: the timer alone must write it
            if (await stored(acme, tid, mid)).text() == "slow model":
                break
            await asyncio.sleep(0.01)
        assert (await stored(acme, tid, mid)).text() == "slow model" and s.writes == 1
    assert s.writes == 1  # nothing left for the exit


async def test_a_crash_loses_at_most_the_unwritten_interval(acme):
    tid, mid = await new_turn(acme)
    sent: list[str] = []
    ready = asyncio.Event()

    async def agent() -> None:
        stream = acme.tasks.stream(tid, mid, flush_bytes=32, flush_ms=3_600_000)
        await stream.__aenter__()  # and never __aexit__: the process dies mid-stream
        for i in range(50):
            delta = f"w{i} "
            await stream.text(delta)
            sent.append(delta)
        ready.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(agent())
    await ready.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    whole, text = "".join(sent), (await stored(acme, tid, mid)).text()
    assert whole.startswith(text) and 0 < len(whole) - len(text) < 32
    assert await header_is_consistent(acme, tid)


async def test_a_delta_arriving_while_a_write_is_in_flight_is_not_lost(acme, monkeypatch):
    from mindstore.repositories import streaming

    tid, mid = await new_turn(acme)
    planned = streaming.plan_stream_write
    arrivals = ["b", "c"]

    def plan_then_receive(*args, **kwargs):
        result = planned(*args, **kwargs)
        if arrivals:  # the model sends more while the write is on its way
            stream.state.add("text", arrivals.pop(0))
        return result

    monkeypatch.setattr(streaming, "plan_stream_write", plan_then_receive)
    async with acme.tasks.stream(tid, mid, flush_bytes=1, flush_ms=3_600_000) as stream:
        await stream.text("a")
        assert (await stored(acme, tid, mid)).text() == "a"  # "b" came after the plan
    assert (await stored(acme, tid, mid)).text() == "abc"


# ---------------------------------------------------------------- what a write carries


async def test_each_write_carries_the_new_text_only(acme, store):
    for history in (0, 2_000):
        tid, mid = await new_turn(acme, history=history)
        header = await acme.tasks.header(tid)
        index = header.seq - 1 - header.sealed  # its place in the task document's array
        at = f"messages.{index}.content.0"
        with store.backend.recorder.capture(payloads=True) as log:
            async with acme.tasks.stream(tid, mid, flush_bytes=64, flush_ms=3_600_000) as s:
                for i in range(60):
                    await s.text(f"token {i} ")
        updates = log.by_name("update")
        assert len(updates) == s.writes >= 8
        text = (await stored(acme, tid, mid)).text()
        sent = ""
        for number, update in enumerate(updates):
            sets = update.update["$set"]
            # pinned to the state it was planned from: the array holds the message at `index`
            assert {"version", "updated_at"} <= update.filter.keys(), update.filter
            if number == 0:  # the part's first write places it whole
                new = sets[at]["text"]
                assert CHUNKS_KEY not in sets[at]
            else:  # later writes push what came since, guarded by the chunks stored so far
                assert update.update["$push"].keys() == {f"{at}.{CHUNKS_KEY}"}
                new = update.update["$push"][f"{at}.{CHUNKS_KEY}"]
                guard = {"$exists": False} if number == 1 else {"$size": number - 1}
                assert update.filter[f"{at}.{CHUNKS_KEY}"] == guard
                assert not any(k.startswith("messages.") for k in sets)
            sent += new
            assert update.bytes_sent <= len(new.encode()) + WRITE_OVERHEAD, (history, number)
        assert sent == text  # each delta travelled once
        # every write is one round trip: the header and the message come from the cache
        assert log.names() == ["update"] * len(updates)


async def test_a_part_another_verb_adds_meanwhile_is_not_overwritten(acme):
    tid, mid = await new_turn(acme)
    async with acme.tasks.stream(tid, mid, flush_bytes=1, flush_ms=3_600_000) as s:
        await s.reasoning("plan: search")
        await acme.tasks.add_tool_call_part(
            tid, mid, ToolCallPart(tool_call_id="c1", tool_name="search")
        )
        await s.text("Searching now.")
    parts = (await stored(acme, tid, mid)).content
    assert [p.type for p in parts] == ["reasoning", "toolCall", "text"]
    assert parts[2].text == "Searching now." and await header_is_consistent(acme, tid)


# ---------------------------------------------------------------- concurrency


async def _two_streams(first, second, tid: str, ids: tuple[str, str]) -> list[str]:
    async def write(acme, mid: str, tag: str) -> str:
        sent = ""
        async with acme.tasks.stream(tid, mid, flush_bytes=10, flush_ms=5) as s:
            for i in range(40):
                delta = f"{tag}{i} "
                await s.text(delta)
                sent += delta
                await asyncio.sleep(0)
        return sent

    return list(await asyncio.gather(write(first, ids[0], "a"), write(second, ids[1], "b")))


async def test_two_streams_into_two_messages_of_one_task(acme):
    tid, first = await new_turn(acme)
    second = (await acme.tasks.add_assistant_message(tid)).id
    sent = await _two_streams(acme, acme, tid, (first, second))
    assert [(await stored(acme, tid, m)).text() for m in (first, second)] == sent
    assert await header_is_consistent(acme, tid)


async def test_two_processes_streaming_into_one_task(store):
    patient = RetryPolicy(attempts=400, base_delay=0.0002, max_delay=0.01)
    one = Store(store.backend, retry=patient).scoped("acme")
    two = Store(store.backend, retry=patient).scoped("acme")  # its own header cache and locks
    tid, first = await new_turn(one)
    second = (await one.tasks.add_assistant_message(tid)).id
    sent = await _two_streams(one, two, tid, (first, second))
    assert [(await stored(one, tid, m)).text() for m in (first, second)] == sent
    assert await header_is_consistent(one, tid)


async def test_a_stream_can_open_the_assistant_message(acme):
    tid, _ = await new_turn(acme)
    async with acme.tasks.stream(tid) as s:
        await s.text("a new turn")
    assert (
        s.message_id is not None and (await stored(acme, tid, s.message_id)).text() == "a new turn"
    )
    assert s.message is not None and s.message.text() == "a new turn"


async def test_streaming_into_a_finished_message_reopens_it(acme):
    tid, mid = await new_turn(acme)
    await acme.tasks.finish_assistant_message(tid, mid)
    async with acme.tasks.stream(tid, mid) as s:
        await s.text("one more thing")
    message = await stored(acme, tid, mid)
    assert message.status == "loading" and message.text() == "one more thing"


# ---------------------------------------------------------------- refusals


async def test_refusals_are_typed_and_write_nothing(acme, store):
    tid, mid = await new_turn(acme)
    user = (await acme.tasks.messages(tid))[-2].id
    before = await store.backend.database["tasks"].find_one({})
    with pytest.raises(InvalidTransition, match="user"):
        async with acme.tasks.stream(tid, user) as s:
            await s.text("x")
    with pytest.raises(NotFound):
        async with acme.tasks.stream(tid, "no-such-message"):
            pass
    with pytest.raises(NotFound):
        async with acme.tasks.stream("no-such-task", mid):
            pass
    for kwargs, named in (({"flush_ms": -1}, "flush_ms"), ({"flush_bytes": 0}, "flush_bytes"),
                          ({"flush_ms": True}, "flush_ms")):  # fmt: skip
        with pytest.raises(ValidationError, match=named):
            acme.tasks.stream(tid, mid, **kwargs)
    with pytest.raises(ValidationError, match="task id"):
        acme.tasks.stream({"$ne": 1}, mid)
    with pytest.raises(ValidationError, match="message id"):
        acme.tasks.stream(tid, "$bad")
    async with acme.tasks.stream(tid, mid, **NEVER) as s:
        with pytest.raises(ValidationError, match="delta"):
            await s.text(b"bytes")
        with pytest.raises(ValidationError, match="delta"):
            await s.text("\ud800")
        with pytest.raises(InvalidTransition, match="signature"):
            await s.signature("sig")
    with pytest.raises(ValidationError, match="async with"):
        await s.text("after the block")
    assert await store.backend.database["tasks"].find_one({}) == before


def test_state_coalesces_and_counts_pending_bytes():
    state = StreamState()
    state.add("text", "é")
    state.add("text", "a")
    assert len(state.parts) == 1 and state.pending_bytes == 3 and state.places_parts
    state.committed(state.snapshot(), {0: PartWrite(4, "placed")})
    assert state.parts[0].index == 4 and state.parts[0].stored == "éa" and not state.needs_write
    state.add("text", "b")
    state.committed(state.snapshot(), {0: PartWrite(4, "pushed", "b")})
    assert state.parts[0].base == "éa" and state.parts[0].chunks == ["b"] and not state.needs_write
    state.add("reasoning", "", now=10.0)
    state.add("text", "b", now=11.0)
    assert [p.kind for p in state.parts] == ["text", "reasoning", "text"]
    assert state.parts[1].finished_ts == 11.0 and state.parts[1].started_ts == 10.0
