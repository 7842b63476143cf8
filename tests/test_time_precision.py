"""Timestamps to the millisecond, and reports computed in that precision.

The store stamps epoch seconds rounded to the millisecond (`mindstore.model.base.now_ts`);
a caller's timestamp keeps its value and type; integer-second documents (the Mind Map's
form, and everything stored before) read and report as they always did. Reports round
durations to the millisecond once, in the fold, so the binary noise of subtracting two
millisecond timestamps never shows.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analytics_reference as ref
from layout import stored_messages
from mindstore.analytics.stats import distribution, exact_sum
from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.errors import ValidationError
from mindstore.formats import message_layer
from mindstore.ids import task_key
from mindstore.model.base import later_ts, now_ts, to_ms
from mindstore.model.messages import AssistantMessage, message_to_dict
from mindstore.model.parts import TaskConfigPart, TextPart
from mindstore.model.task import Task
from test_analytics_reports import check_all_reports

DAY = 86_400
MIDNIGHT = 1_732_233_600  # 2024-11-22T00:00:00Z
CONFIG = TaskConfigPart(model_name="m-fast")
SUB = TaskConfigPart(model_name="m-sub")

# Three model turns of 0.3 s, 1.4 s and 2.2 s: with whole seconds they were 0, 1 and 2.
TURNS = ((1_732_262_401.123, 0.3), (1_732_262_410.456, 1.4), (1_732_262_420.789, 2.2))


class Clock:
    """The swapped `mindstore.model.base.CLOCK`: time moves only when a test says so."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextmanager
def world(clock: Clock, ids: Iterator[int] | None = None) -> Iterator[Clock]:
    """The model's clock (and optionally its id source) under the test's control."""
    with mock.patch("mindstore.model.base.CLOCK", clock):
        if ids is None:
            yield clock
        else:
            with mock.patch("mindstore.model.base.ID_SOURCE", lambda: f"g{next(ids)}"):
                yield clock


async def raw_messages(store: Any, tenant: str, task_id: str) -> list[dict[str, Any]]:
    """Every stored message of a task as BSON gave it back: its sealed pages, then the open
    page (tiny-page runs seal; these tests write nothing to a sealed message)."""
    return await stored_messages(store.database, task_key(tenant, task_id))  # tests/layout.py


async def reference_tasks(store: Any, tenant: str) -> list[ref.StoredTask]:
    """The tenant's tasks for the reference, each with all its raw messages."""
    documents = await store.database["tasks"].find({"tenant": tenant}).to_list(None)
    for document in documents:
        task_id = document["_id"].split("/", 1)[1]
        document["messages"] = await raw_messages(store, tenant, task_id)
    return ref.stored_tasks(documents, tenant)


# ---------------------------------------------------------------- the one function
def test_now_is_epoch_seconds_rounded_to_the_millisecond() -> None:
    for raw, expected in ((1_732_262_401.1234567, 1_732_262_401.123),
                          (1_732_262_401.9996, 1_732_262_402.0),
                          (1_732_262_401, 1_732_262_401.0)):  # fmt: skip
        with world(Clock(raw)):
            stamped = now_ts()
        assert stamped == expected and type(stamped) is float
    assert to_ms(0.30000001907348633) == 0.3 and type(to_ms(3)) is float


def test_later_ts_orders_one_verbs_messages_and_keeps_an_int_second() -> None:
    assert later_ts(1_732_262_401, 3) == 1_732_262_401
    assert type(later_ts(1_732_262_401, 3)) is int
    assert later_ts(1_732_262_401.5, 1) == 1_732_262_401.501
    # sub-millisecond digits of a caller: still strictly after, on the millisecond grid
    steps = [1_732_262_401.0004, *(later_ts(1_732_262_401.0004, k) for k in (1, 2, 3))]
    assert steps == sorted(set(steps)) and steps[1:] == [
        1_732_262_401.001,
        1_732_262_401.002,
        1_732_262_401.003,
    ]


# ---------------------------------------------------------------- sub-second latency
async def three_turns(acme: Any, clock: Clock) -> str:
    """The 0.3 / 1.4 / 2.2 s conversation, every timestamp stamped by the store."""
    clock.now = TURNS[0][0] - 5
    task = await acme.tasks.create(owner="ann", config=CONFIG)
    for start, seconds in TURNS:
        clock.now = start - 1.5
        await acme.tasks.add_human_message(task.id, "next?")
        clock.now = start
        reply = await acme.tasks.add_assistant_message(task.id)
        clock.now = to_ms(start + seconds)
        await acme.tasks.finish_assistant_message(task.id, reply.id, tokens_in=10)
    return str(task.id)


def three_turns_in_memory(clock: Clock) -> Task:
    clock.now = TURNS[0][0] - 5
    task = Task(id="T")
    task.add_task_config(CONFIG)
    for start, seconds in TURNS:
        clock.now = start - 1.5
        task.add_human_message("next?")
        clock.now = start
        reply = task.add_assistant_message()
        clock.now = to_ms(start + seconds)
        task.finish_assistant_message(reply.id, tokens_in=10)
    return task


async def test_sub_second_latencies_are_reported_exactly(store: Any) -> None:
    acme = store.scoped("acme")
    with world(Clock(0)) as clock:
        task_id = await three_turns(acme, clock)
    replies = [m for m in await raw_messages(store, "acme", task_id) if m["role"] == "assistant"]
    stamps = [(m["started_ts"], m["finished_ts"]) for m in replies]
    assert stamps == [(start, to_ms(start + seconds)) for start, seconds in TURNS]
    assert all(type(ts) is float for pair in stamps for ts in pair)
    # what the server subtracts is not 0.3, 1.4, 2.2: the rounding below is really needed
    assert [finished - started for started, finished in stamps] != [0.3, 1.4, 2.2]

    for group_by, period in (((), None), (("model",), None), (("model", "owner"), "day")):
        [row] = await acme.analytics.latency(group_by=group_by, period=period)
        assert (row.count, row.min, row.p50, row.p90, row.p99, row.max, row.mean) == (
            3, 0.3, 1.4, 2.2, 2.2, 2.2, 1.3)  # fmt: skip
        assert row.period == ("2024-11-22" if period else None)

    report = await acme.analytics.sessions()
    first, last = TURNS[0][0] - 5, to_ms(TURNS[-1][0] + TURNS[-1][1])
    assert report.duration.p50 == to_ms(last - first) == 26.866
    # whole seconds reported these turns as 0, 1 and 2 s
    assert [int(f) - int(s) for s, f in stamps] == [0, 1, 2]


async def test_in_memory_task_stamps_what_the_store_stamps(store: Any) -> None:
    acme = store.scoped("acme")
    with world(Clock(0), itertools.count()) as clock:
        task_id = await three_turns(acme, clock)
    with world(Clock(0), itertools.count()) as clock:
        memory = three_turns_in_memory(clock)
    stored_messages = await acme.tasks.messages(task_id)
    assert [(m.started_ts, m.finished_ts) for m in stored_messages] == [
        (m.started_ts, m.finished_ts) for m in memory.messages]  # fmt: skip
    assert [m.role for m in memory.messages] == [m.role for m in stored_messages]


async def test_parts_checkpoints_and_format_fallbacks_are_stamped_to_the_millisecond(
    store: Any,
) -> None:
    acme = store.scoped("acme")
    with world(Clock(1_732_262_401.2345678)) as clock:
        task = await acme.tasks.create(config=CONFIG)
        reply = await acme.tasks.add_assistant_message(task.id)
        await acme.tasks.add_reasoning_part(task.id, reply.id, "thinking")
        clock.now = 1_732_262_401.9876543
        message = await acme.tasks.add_text_part(task.id, reply.id, "done")
        message = await acme.tasks.add_reasoning_part(task.id, reply.id, "again")
        checkpoint = CompressionCheckpoint()
        unstamped = AssistantMessage(id="x")
        unstamped.started_ts = None  # type: ignore[assignment]  # a caller's model, unchecked
        [rendered] = message_layer.to_message_layer([unstamped])
    reasoning = [p for p in message.content if p.type == "reasoning"]
    assert (reasoning[0].started_ts, reasoning[0].finished_ts) == (
        1_732_262_401.235, 1_732_262_401.988)  # fmt: skip
    assert reasoning[1].started_ts == 1_732_262_401.988
    assert checkpoint.timestamp == 1_732_262_401.988
    assert rendered["timestamp"] == 1_732_262_401.988


async def test_sub_task_spans_and_redactions_are_to_the_millisecond(store: Any) -> None:
    acme = store.scoped("acme")
    with world(Clock(1_732_262_401.123)) as clock:
        task = await acme.tasks.create(config=CONFIG)
        said = await acme.tasks.add_human_message(task.id, "secret")
        await acme.tasks.add_task_entry(task.id, [TextPart(text="dig")], SUB, "e1")
        clock.now = 1_732_262_402.523
        await acme.tasks.add_task_exit(task.id, [TextPart(text="found")])
        clock.now = 1_732_262_403.4567
        redacted = await acme.tasks.redact(task.id, said.id, reason="test")
    [span] = await acme.tasks.sub_task_spans(task.id)
    assert span.finished_ts - span.started_ts != 1.4  # binary noise in the raw difference
    assert span.duration == 1.4
    [row] = await acme.analytics.subtasks()
    assert row.duration.p50 == 1.4
    assert redacted.model_dump()["redaction"]["at"] == 1_732_262_403.457


# ---------------------------------------------------------------- caller timestamps
@pytest.mark.parametrize("given_ts", [1_732_262_400, 1_732_262_400.5, 1_732_262_400.1234567])
async def test_a_callers_timestamp_keeps_its_value_and_type(store: Any, given_ts: float) -> None:
    acme = store.scoped("acme")
    later = given_ts + 7  # the same type as given
    results = []
    for home in ("store", "memory"):
        with world(Clock(1_732_262_450.25)):
            if home == "store":
                await acme.tasks.create(task_id="T", config=CONFIG)
                user = await acme.tasks.add_human_message("T", "hi", timestamp=given_ts)
                user_id = user.id
                reply = await acme.tasks.add_assistant_message("T", "a1", timestamp=given_ts)
                done = await acme.tasks.finish_assistant_message("T", "a1", finished_ts=later)
                entry = await acme.tasks.add_task_entry(
                    "T", [TextPart(text="sub")], SUB, "e1", timestamp=given_ts
                )
                exit_message, _ = await acme.tasks.add_task_exit(
                    "T", [TextPart(text="ok")], timestamp=later
                )
                read = await acme.tasks.messages("T")
            else:
                memory = Task(id="T")
                memory.add_task_config(CONFIG)
                user = memory.add_human_message("hi", timestamp=given_ts)
                reply = memory.add_assistant_message("a1", timestamp=given_ts)
                done = memory.finish_assistant_message("a1", finished_ts=later)
                entry = memory.add_task_entry([TextPart(text="sub")], SUB, "e1",
                                              timestamp=given_ts)  # fmt: skip
                exit_message, _ = memory.add_task_exit([TextPart(text="ok")], timestamp=later)
                read = memory.messages
        got = [user.started_ts, reply.started_ts, entry.started_ts, done.finished_ts,
               exit_message.started_ts]  # fmt: skip
        assert got == [given_ts, given_ts, given_ts, later, later]
        assert {type(value) for value in got} == {type(given_ts)}
        results.append([(m.id if m.id in ("a1", "e1") else m.role, m.started_ts,
                         type(m.started_ts), m.finished_ts) for m in read])  # fmt: skip
    assert results[0] == results[1]  # the in-memory Task keeps what the store keeps

    raw = await raw_messages(store, "acme", "T")
    by_id = {m["id"]: m for m in raw}
    for key in (user_id, "a1", "e1"):
        assert by_id[key]["started_ts"] == given_ts
        assert type(by_id[key]["started_ts"]) is type(given_ts)
    assert by_id["a1"]["finished_ts"] == later and type(by_id["a1"]["finished_ts"]) is type(later)
    # the entry's config and hidden context follow it 1 and 2 ms later; an int second stays
    after_entry = [m["started_ts"] for m in raw[raw.index(by_id["e1"]) + 1 :][:2]]
    if isinstance(given_ts, int):
        assert after_entry == [given_ts, given_ts] and type(after_entry[0]) is int
    else:
        assert after_entry == [to_ms(given_ts + 0.001), to_ms(given_ts + 0.002)]
        assert given_ts < after_entry[0] < after_entry[1]


async def test_a_bad_caller_timestamp_is_refused_and_nothing_is_written(store: Any) -> None:
    acme = store.scoped("acme")
    task = await acme.tasks.create(config=CONFIG)
    before = await raw_messages(store, "acme", task.id)
    for bad in (-1, float("nan"), "1732262400", True):
        with pytest.raises(ValidationError, match="timestamp"):
            await acme.tasks.add_human_message(task.id, "hi", timestamp=bad)
    assert await raw_messages(store, "acme", task.id) == before


# ---------------------------------------------------------------- integer-second documents
async def test_integer_second_documents_read_and_report_as_before(store: Any) -> None:
    """Written raw as the store wrote them before milliseconds: whole seconds everywhere."""
    acme = store.scoped("acme")
    with world(Clock(0)) as clock:
        task_id = await three_turns(acme, clock)
    key = task_key("acme", task_id)

    def in_seconds(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**m, "started_ts": int(m["started_ts"]),
                 **({"finished_ts": int(m["finished_ts"])}
                    if m.get("finished_ts") is not None else {})} for m in messages]  # fmt: skip

    async for page in store.database["task_pages"].find({"task": key}):
        await store.database["task_pages"].update_one(
            {"_id": page["_id"]}, {"$set": {"messages": in_seconds(page["messages"])}}
        )
    document = await store.database["tasks"].find_one({"_id": key})
    await store.database["tasks"].update_one(
        {"_id": key},
        {"$set": {"messages": in_seconds(document["messages"])}, "$inc": {"version": 1}},
    )
    old = await raw_messages(store, "acme", task_id)
    assert all(type(m["started_ts"]) is int for m in old)

    read = await acme.tasks.messages(task_id)
    assert [(m.started_ts, m.finished_ts) for m in read] == [
        (m["started_ts"], m.get("finished_ts")) for m in old]  # fmt: skip
    assert all(type(m.started_ts) is int for m in read)
    assert await raw_messages(store, "acme", task_id) == old  # reading wrote nothing

    [row] = await acme.analytics.latency(group_by=())
    assert (row.count, row.min, row.p50, row.p90, row.p99, row.max, row.mean) == (
        3, 0, 1, 2, 2, 2, 1)  # fmt: skip
    report = await acme.analytics.sessions()
    assert report.duration.p50 == old[-1]["finished_ts"] - old[0]["started_ts"]
    days = await acme.analytics.activity(period="day")
    assert [(r.period, r.messages) for r in days if r.messages] == [("2024-11-22", len(old))]

    # the task goes on: a new turn is stamped in milliseconds, beside the old seconds
    with world(Clock(1_732_262_430.5)) as clock:
        reply = await acme.tasks.add_assistant_message(task_id)
        clock.now = 1_732_262_430.75
        await acme.tasks.finish_assistant_message(task_id, reply.id)
    [row] = await acme.analytics.latency(group_by=())
    assert (row.count, row.min, row.max) == (4, 0, 2) and row.p50 == 0.25


def test_an_integer_second_checkpoint_reads_as_stored() -> None:
    for stored_ts in (1_732_262_400, 1_732_262_400.125):
        read = CompressionCheckpoint.from_parts({"checkpoint": {"timestamp": stored_ts}}, None)
        assert read is not None
        assert read.timestamp == stored_ts and type(read.timestamp) is type(stored_ts)
    read = CompressionCheckpoint.from_parts({"checkpoint": {}}, None)
    assert read is not None and read.timestamp == 0


# ---------------------------------------------------------------- day buckets
async def test_float_timestamps_fall_into_their_utc_day(store: Any) -> None:
    acme = store.scoped("acme")
    task = await acme.tasks.create(owner="ann")
    for ts in (MIDNIGHT - 0.001, MIDNIGHT, MIDNIGHT + DAY - 0.001, MIDNIGHT + DAY):
        await acme.tasks.add_human_message(task.id, "hi", timestamp=ts)
    rows = await acme.analytics.activity(period="day")
    assert [(r.period, r.messages) for r in rows if r.messages] == [
        ("2024-11-21", 1), ("2024-11-22", 2), ("2024-11-23", 1)]  # fmt: skip


# ---------------------------------------------------------------- the mean
def test_the_mean_does_not_depend_on_the_order_of_the_values() -> None:
    # sixteen millisecond latencies whose mean, 1.6724375, sits on a 6-decimal tie: a float
    # sum in histogram order lands one bit below it (1.6724374999999998), the exact sum on it
    values = [2.881, 2.518, 2.429, 2.368, 1.612, 2.65, 0.697, 0.69, 2.057, 0.929, 0.05, 0.817,
              2.21, 2.245, 0.95, 1.656]  # fmt: skip
    counts = {v: values.count(v) for v in values}
    shuffled = list(values)
    random.Random(3).shuffle(shuffled)
    assert exact_sum(counts.items()) == math.fsum(values) == math.fsum(shuffled)
    in_order = sum(v * c for v, c in sorted(counts.items())) / len(values)
    assert round(in_order, 6) != round(math.fsum(values) / len(values), 6)
    assert distribution(counts).mean == round(math.fsum(values) / len(values), 6)


# ---------------------------------------------------------------- random millisecond times
turn = st.tuples(
    st.integers(0, 600_000),  # ms from the previous turn's end to the user message
    st.integers(0, 5_000),  # ms the user's message stands before the model starts
    st.integers(0, 4_000),  # ms the model takes
    st.sampled_from(["m-fast", "m-slow"]),
)
NEAR_MIDNIGHT = st.integers(-5_000, 5_000).map(lambda ms: MIDNIGHT * 1000 + ms)
session = st.tuples(
    st.one_of(st.integers(1_600_000_000_000, 1_900_000_000_000), NEAR_MIDNIGHT),  # epoch ms
    st.lists(turn, min_size=1, max_size=5),
    st.none() | st.integers(0, 4),  # a sub-task around this turn
    st.sampled_from(["ann", "bob"]),
)


async def play(target: Any, clock: Clock, start_ms: int, turns: list[Any], sub: int | None,
               is_store: bool, task_id: str) -> list[float]:  # fmt: skip
    """One session driven by the clock; returns the latencies it made (seconds)."""
    call = (lambda name, *a, **k: getattr(target, name)(task_id, *a, **k)) if is_store else (
        lambda name, *a, **k: getattr(target, name)(*a, **k))  # fmt: skip

    async def run(name: str, *args: Any, **kwargs: Any) -> Any:
        result = call(name, *args, **kwargs)
        return (await result) if is_store else result

    now = start_ms
    latencies = []
    for position, (gap, wait, took, model) in enumerate(turns):
        now += gap
        clock.now = now / 1000
        if position == sub:
            await run("add_task_entry", [TextPart(text="dig")], TaskConfigPart(model_name=model))
            now += 10
            clock.now = now / 1000
        await run("add_human_message", "go")
        now += wait
        clock.now = now / 1000
        reply = await run("add_assistant_message")
        now += took
        clock.now = now / 1000
        await run("finish_assistant_message", reply.id, tokens_in=took)
        latencies.append(took / 1000)
        if position == sub:
            now += 3
            clock.now = now / 1000
            await run("add_task_exit", [TextPart(text="found")])
    return latencies


TENANTS = itertools.count()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(sessions=st.lists(session, min_size=1, max_size=3), seed=st.integers(0, 1_000))
async def test_reports_on_random_millisecond_times_match_the_reference(
    store: Any, sessions: list[Any], seed: int
) -> None:
    tenant = f"t{next(TENANTS)}"  # one tenant per example: the store outlives the examples
    acme = store.scoped(tenant)
    made: list[float] = []
    for number, (start_ms, turns, sub, owner) in enumerate(sessions):
        task_id = f"s{number}"
        with world(Clock(start_ms / 1000), itertools.count()) as clock:
            await acme.tasks.create(task_id=task_id, owner=owner, config=CONFIG)
            made += await play(acme.tasks, clock, start_ms, turns, sub, True, task_id)
        with world(Clock(start_ms / 1000), itertools.count()) as clock:
            memory = Task(id=task_id)
            memory.add_task_config(CONFIG)
            await play(memory, clock, start_ms, turns, sub, False, task_id)
        assert [message_to_dict(m) for m in await acme.tasks.messages(task_id)] == [
            message_to_dict(m) for m in memory.messages]  # fmt: skip

    [row] = await acme.analytics.latency(group_by=())
    assert (row.count, row.min, row.max) == (len(made), min(made), max(made))
    tasks = await reference_tasks(store, tenant)
    rng = random.Random(seed)
    await check_all_reports(acme, tasks, ref.Filters(), rng)
    times = sorted(m.started_ts for t in tasks for m in t.messages)
    await check_all_reports(acme, tasks, ref.Filters(since=rng.choice(times)), rng)
