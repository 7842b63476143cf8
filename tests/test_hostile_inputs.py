"""Hostile input against every public verb of tasks, dialogs and analytics.

Each example builds a small world (two tenants, two owners, a payload, a sub-task, a
fork), then calls one public method of an owner-scoped or a tenant-scoped view with
arguments that are each either valid or hostile: operator dicts, expression strings
(``$$m.scope``), marker-shaped strings, ids of other owners and tenants, NaN, infinities,
huge integers, lone surrogates, NUL, wrong types. The call must succeed or raise a
`MindstoreError`; when it raises, the raw database is byte-identical; when it succeeds,
nothing it returns holds another owner's or tenant's data.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from collections import Counter
from typing import Any

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from layout import forge_messages, stored_messages
from mindstore.errors import MindstoreError, NotFound, TaskTooLarge
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.payloads import MARKER_PREFIX

CONFIG = TaskConfigPart(
    model_name="m", tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)]
)
BOB_SECRET = "SECRET-OF-BOB"
BETA_SECRET = "SECRET-OF-BETA"
BOB = "bob-the-other-owner"
THRESHOLD = 64  # small, so the fixture's payloads are offloaded
OUTCOMES: Counter[str] = Counter()


class World:
    """Ids of the seeded world (the same in every example)."""

    alice_task = "alice-task"
    bob_task = "bob-task"
    beta_task = "alice-task"  # the same id in another tenant: identity is per tenant
    bob_payload = ""


async def seed(store: mindstore.Store) -> None:
    alice = store.scoped("acme", owner="alice").tasks
    await alice.create(task_id=World.alice_task, title="alice's", config=CONFIG)
    await alice.add_human_message(World.alice_task, "hello " + "a" * THRESHOLD, message_id="u1")
    await alice.add_message(
        World.alice_task,
        AssistantMessage(
            id="a1", model_id="m", content=[ToolCallPart(tool_call_id="c1", tool_name="delegate")]
        ),
    )
    await alice.add_task_entry(World.alice_task, [TextPart(text="sub")], CONFIG, "e1")
    bob = store.scoped("acme", owner=BOB).tasks
    await bob.create(task_id=World.bob_task, title=BOB_SECRET, config=CONFIG)
    await bob.add_human_message(World.bob_task, BOB_SECRET + "x" * THRESHOLD * 2, message_id="b1")
    beta = store.scoped("beta", owner="alice").tasks
    await beta.create(task_id=World.beta_task, title=BETA_SECRET)
    await beta.add_human_message(
        World.beta_task, BETA_SECRET + "y" * THRESHOLD * 2, message_id="u1"
    )
    payload = await store.database["payloads"].find_one(
        {"tenant": "acme", "task_id": World.bob_task}
    )
    World.bob_payload = payload["_id"]
    await store.scoped("acme", owner="alice").dialogs.fork(World.alice_task, last_n=2)


async def raw_dump(store: mindstore.Store) -> dict[str, list[bytes]]:
    out = {}
    for name in ("tasks", "dialog_nodes", "payloads", "agents"):
        docs = await store.database[name].find({}).to_list()
        out[name] = sorted(bson.encode(d) for d in docs)
    return out


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "$ne",
            "$$m.scope",
            "$$ROOT",
            "$seq",
            "a.b",
            "x\x00y",
            "\ud800",
            "",
            " ",
            "A" * 200,
            "bob-task",
            "alice-task",
            "acme/bob-task",
            "beta/alice-task",
            "../etc",
            "\x1b[31m",
            "mindstore:payload:",
            "e1",
            "c1",
            "u1",
            "b1",
            BOB,
        ]
    ),
    st.builds(lambda: MARKER_PREFIX + World.bob_payload),
    st.dictionaries(
        st.sampled_from(["$ne", "$gt", "$where", "a.b", "$literal"]),
        st.one_of(st.text(max_size=3), st.integers()),
        min_size=1,
        max_size=2,
    ),
    st.lists(st.one_of(st.text(max_size=3), st.integers()), max_size=3),
    st.binary(max_size=4),
    st.text(max_size=6),
    st.datetimes(),
)


def arg(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Valid two times in three, so calls with one hostile argument among valid ones (the
    ones that get past the first check) are common."""
    return st.one_of(valid, valid, HOSTILE)


TASK = arg(st.sampled_from([World.alice_task, World.bob_task]))
MESSAGE = arg(st.sampled_from(["u1", "a1", "e1", "fresh-id"]))
TEXT = arg(st.text(max_size=8))
COUNT = arg(st.integers(0, 5))
TIME = arg(st.floats(0, 2e9))

TASK_CALLS: dict[str, st.SearchStrategy[tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "create": st.tuples(
        st.just(()),
        st.fixed_dictionaries(
            {},
            optional={
                "owner": arg(st.just("alice")),
                "title": TEXT,
                "task_id": arg(st.just("new-task")),
                "metadata": arg(st.just({"k": 1})),
                "content": TEXT,
                "state": arg(st.just("running")),
            },
        ),
    ),
    "get": st.tuples(st.tuples(TASK), st.just({})),
    "list": st.tuples(
        st.just(()),
        st.fixed_dictionaries(
            {},
            optional={
                "owner": arg(st.just("alice")),
                "state": arg(st.just("running")),
                "limit": COUNT,
                "cursor": TEXT,
                "updated_after": arg(st.just(dt.datetime(2000, 1, 1))),
            },
        ),
    ),
    "messages": st.tuples(st.tuples(TASK, COUNT, arg(st.none() | st.integers(1, 3))), st.just({})),
    "tail": st.tuples(st.tuples(TASK, arg(st.integers(1, 4))), st.just({})),
    "ends": st.tuples(st.tuples(TASK, COUNT, arg(st.integers(1, 3))), st.just({})),
    "get_message": st.tuples(st.tuples(TASK, MESSAGE), st.just({})),
    "get_updates": st.tuples(st.tuples(TASK, MESSAGE), st.just({})),
    "level_messages": st.tuples(st.tuples(TASK, arg(st.sampled_from([None, "e1"]))), st.just({})),
    "current_task_messages": st.tuples(st.tuples(TASK), st.just({})),
    "task_boundaries": st.tuples(st.tuples(TASK, arg(st.just("e1"))), st.just({})),
    "sub_task_spans": st.tuples(st.tuples(TASK), st.just({})),
    "current_task_config": st.tuples(st.tuples(TASK), st.just({})),
    "context": st.tuples(
        st.tuples(TASK),
        st.fixed_dictionaries({}, optional={"max_tokens": arg(st.integers(10, 500))}),
    ),
    "add_human_message": st.tuples(
        st.tuples(TASK, TEXT),
        st.fixed_dictionaries(
            {},
            optional={"message_id": MESSAGE, "timestamp": TIME, "is_ui_hidden": arg(st.booleans())},
        ),
    ),
    "add_system_message": st.tuples(
        st.tuples(TASK, TEXT), st.fixed_dictionaries({}, optional={"message_id": MESSAGE})
    ),
    "add_assistant_message": st.tuples(
        st.tuples(TASK),
        st.fixed_dictionaries({}, optional={"message_id": MESSAGE, "timestamp": TIME}),
    ),
    "add_tool_result_message": st.tuples(
        st.tuples(TASK, arg(st.just("c1")), TEXT, arg(st.just({"r": 1}))),
        st.fixed_dictionaries({}, optional={"message_id": MESSAGE, "metadata": arg(st.just({}))}),
    ),
    "answer_tool_call": st.tuples(
        st.tuples(TASK, arg(st.just("c1")), arg(st.just("ok"))),
        st.fixed_dictionaries({}, optional={"message_id": MESSAGE, "is_error": arg(st.booleans())}),
    ),
    "add_informational_message": st.tuples(
        st.tuples(TASK, TEXT, TEXT),
        st.fixed_dictionaries(
            {},
            optional={
                "is_visible_ai": arg(st.booleans()),
                "additional_data": arg(st.just({"x": 1})),
            },
        ),
    ),
    "add_compression_message": st.tuples(
        st.tuples(
            TASK,
            COUNT,
            COUNT,
            TEXT,
            arg(st.just(["s"])),
            arg(st.just(["u1"])),
            arg(st.just(["a1"])),
        ),
        st.just({}),
    ),
    "add_task_entry": st.tuples(
        st.tuples(TASK, arg(st.just([TextPart(text="t")])), arg(st.just(CONFIG)), MESSAGE),
        st.just({}),
    ),
    "add_task_exit": st.tuples(
        st.tuples(TASK, arg(st.just([TextPart(text="done")])), TEXT, TIME, MESSAGE), st.just({})
    ),
    "add_text_part": st.tuples(st.tuples(TASK, MESSAGE, TEXT), st.just({})),
    "add_reasoning_part": st.tuples(st.tuples(TASK, MESSAGE, TEXT), st.just({})),
    "add_tool_call_part": st.tuples(
        st.tuples(TASK, MESSAGE, arg(st.just(ToolCallPart(tool_call_id="c9", tool_name="t")))),
        st.just({}),
    ),
    "finish_assistant_message": st.tuples(
        st.tuples(TASK, MESSAGE),
        st.fixed_dictionaries(
            {},
            optional={
                "tokens_in": COUNT,
                "tokens_out": COUNT,
                "cost": arg(st.floats(0, 1)),
                "finished_ts": TIME,
                "status": arg(st.just("completed")),
            },
        ),
    ),
    "add_message": st.tuples(
        st.tuples(TASK, arg(st.builds(lambda: UserMessage(id="m9", content=[TextPart(text="x")])))),
        st.just({}),
    ),
    "set_state": st.tuples(
        st.tuples(TASK, arg(st.sampled_from(["finished", "paused", "running"]))), st.just({})
    ),
    "set_title": st.tuples(st.tuples(TASK, TEXT), st.just({})),
    "delete": st.tuples(st.tuples(TASK), st.just({})),
    "retract_last": st.tuples(
        st.tuples(TASK), st.fixed_dictionaries({}, optional={"expected_id": MESSAGE})
    ),
}
DIALOG = arg(st.sampled_from([World.alice_task, World.bob_task]))
DIALOG_CALLS = {
    "node": st.tuples(st.tuples(DIALOG), st.just({})),
    "children": st.tuples(st.tuples(DIALOG), st.just({})),
    "root": st.tuples(st.tuples(DIALOG), st.just({})),
    "subtree_ids": st.tuples(st.tuples(DIALOG), st.just({})),
    "tree_json": st.tuples(st.tuples(DIALOG), st.just({})),
    "tree_overview": st.tuples(st.tuples(DIALOG), st.just({})),
    "export_dialog": st.tuples(st.tuples(DIALOG), st.just({})),
    "fork": st.tuples(
        st.tuples(DIALOG),
        st.fixed_dictionaries(
            {},
            optional={
                "last_n": COUNT,
                "first_k": COUNT,
                "owner": arg(st.just("alice")),
                "at": MESSAGE,
            },
        ),
    ),
    "put_text": st.tuples(st.tuples(DIALOG, TEXT), st.just({})),
    "create": st.tuples(
        st.tuples(arg(st.just("alice")), TEXT),
        st.fixed_dictionaries({}, optional={"dialog_id": arg(st.just("d-new")), "title": TEXT}),
    ),
    "import_dialog": st.tuples(
        st.tuples(
            arg(
                st.fixed_dictionaries(
                    {
                        "dialog_id": arg(st.just("imported")),
                        "owner": arg(st.just("alice")),
                        "messages": arg(st.just([{"role": "user", "content": "hi"}])),
                        "tree_node": arg(
                            st.fixed_dictionaries(
                                {
                                    "parent_id": arg(st.just(World.alice_task)),
                                    "split_point": COUNT,
                                    "last_n": COUNT,
                                }
                            )
                        ),
                    }
                )
            )
        ),
        st.just({}),
    ),
}
ANALYTICS_FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "owner": arg(st.just("alice")),
        "state": arg(st.just("running")),
        "model": arg(st.just("m")),
        "since": arg(st.floats(0, 2e9)),
        "until": arg(st.floats(0, 2e9)),
    },
)
ANALYTICS_CALLS = {
    name: st.tuples(st.just(()), ANALYTICS_FILTERS)
    for name in ("usage", "tools", "sessions", "latency", "subtasks", "activity", "top_owners")
}

CALLS = st.one_of(
    *[st.tuples(st.just("tasks"), st.just(name), args) for name, args in TASK_CALLS.items()],
    *[st.tuples(st.just("dialogs"), st.just(name), args) for name, args in DIALOG_CALLS.items()],
    *[
        st.tuples(st.just("analytics"), st.just(name), args)
        for name, args in ANALYTICS_CALLS.items()
    ],
)


def forbidden_for(owner_scoped: bool) -> list[str]:
    return [BETA_SECRET, BOB_SECRET, BOB] if owner_scoped else [BETA_SECRET]


async def attempt(
    owner_scoped: bool, area: str, verb: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    store = await mindstore.connect("embedded", offload_threshold=THRESHOLD)
    try:
        await seed(store)
        view = store.scoped("acme", owner="alice") if owner_scoped else store.scoped("acme")
        before = await raw_dump(store)
        try:
            result = await getattr(getattr(view, area), verb)(*args, **kwargs)
        except MindstoreError as exc:
            assert await raw_dump(store) == before, f"{area}.{verb} raised {exc!r} after writing"
            message = str(exc)
            assert message and "\n" not in message.strip(), f"not one line: {message!r}"
            return type(exc).__name__
        shown, given = repr(result), repr((args, kwargs))
        for secret in forbidden_for(owner_scoped):
            if secret in given:  # the caller's own value (a title "bob-the-other-owner")
                continue
            assert secret not in shown, f"{area}.{verb}{args}{kwargs} leaked {secret!r}"
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            assert math.isfinite(result)
        return "ok"
    finally:
        await store.close()


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(owner_scoped=st.booleans(), call=CALLS)
def test_hostile_arguments_get_typed_errors_and_write_nothing(owner_scoped, call):
    area, verb, (args, kwargs) = call
    outcome = asyncio.run(attempt(owner_scoped, area, verb, args, kwargs))
    OUTCOMES[outcome] += 1


def test_zz_report_outcomes() -> None:
    """Prints what the hostile run did (pytest -s shows it); fails if it never refused."""
    print(f"\nhostile calls by outcome: {dict(OUTCOMES)}")
    if OUTCOMES:
        assert OUTCOMES["ValidationError"] > 0


# -- the attacks of the hardening review, one by one ------------------------------------


@pytest.fixture
async def store():
    """A store that offloads small values, so the seeded world has payloads to steal."""
    opened = await mindstore.connect("embedded", offload_threshold=THRESHOLD)
    try:
        yield opened
    finally:
        await opened.close()


async def test_operator_dicts_and_other_owners_ids_never_reach_a_task(store):
    await seed(store)
    alice = store.scoped("acme", owner="alice")
    for hostile in ({"$ne": "x"}, {"$gt": ""}, "acme/bob-task"):
        with pytest.raises(MindstoreError):
            await alice.tasks.level_messages(hostile, None)
    with pytest.raises(MindstoreError):  # bob's task is not in alice's view
        await alice.tasks.level_messages(World.bob_task, None)
    for read in (
        alice.dialogs.node,
        alice.dialogs.children,
        alice.dialogs.root,
        alice.dialogs.subtree_ids,
        alice.dialogs.tree_json,
    ):
        with pytest.raises(MindstoreError):
            await read(World.bob_task)


async def test_a_marker_shaped_text_is_text_and_payloads_stay_with_their_task(store):
    await seed(store)
    alice = store.scoped("acme", owner="alice").tasks
    forged = MARKER_PREFIX + World.bob_payload
    await alice.add_human_message(World.alice_task, forged, message_id="forged")
    stored = await alice.get_message(World.alice_task, "forged")
    assert stored.content[0].text == forged  # read back as the caller wrote it, never resolved
    key = "acme/" + World.alice_task
    raw = await stored_messages(store.database, key)
    assert raw[-1]["content"][0]["text"] != forged  # stored escaped
    # even a raw marker planted in alice's document cannot fetch bob's payload
    await forge_messages(store.database, key, {"forged": {"content.0.text": forged}})
    assert (await stored_messages(store.database, key))[-1]["content"][0]["text"] == forged
    again = await alice.get_message(World.alice_task, "forged")
    assert BOB_SECRET not in repr(again)


async def test_ids_are_literals_inside_pipelines(store):
    acme = store.scoped("acme").tasks
    task = await acme.create(config=CONFIG)
    await acme.add_human_message(task.id, "at the root", message_id="root-1")
    await acme.add_task_entry(task.id, [TextPart(text="a")], CONFIG, entry_id="e1")
    await acme.add_human_message(task.id, "inside", message_id="inside-1")
    # an expression-shaped id is refused at every entry point ...
    with pytest.raises(MindstoreError):
        await acme.add_human_message(task.id, "x", message_id="$$ROOT")
    # ... and one that got in anyway (a forged document) is compared as a literal
    key = "acme/" + task.id
    forged = "$$m.scope"
    changes: dict[str, dict[str, str]] = {"e1": {"id": forged}}
    for message in await stored_messages(store.database, key):
        if message.get("scope") == "e1":
            changes.setdefault(message["id"], {})["scope"] = forged
    await forge_messages(store.database, key, changes, **{"scope_stack.0.entry_id": forged})
    store.headers.forget(("acme", task.id))
    level = [m.id for m in await acme.current_task_messages(task.id)]
    assert "root-1" not in level and "inside-1" in level and forged in level


async def test_the_same_task_id_lives_in_two_tenants(store):
    one, two = store.scoped("acme").tasks, store.scoped("beta").tasks
    await one.create(task_id="x", title="acme's")
    await two.create(task_id="x", title="beta's")  # no Conflict: nothing of acme is revealed
    assert (await one.get("x")).title == "acme's" and (await two.get("x")).title == "beta's"


async def test_documents_written_before_per_tenant_keys_are_read_and_adopted(store):
    acme = store.scoped("acme").tasks
    record = await acme.create(task_id="old", config=CONFIG)
    await acme.add_human_message("old", "from before")
    document = await store.database["tasks"].find_one({"_id": "acme/old"})
    await store.database["tasks"].delete_one({"_id": "acme/old"})
    document["_id"] = "old"  # the legacy form: the bare task id
    await store.database["tasks"].insert_one(document)
    store.headers.forget(("acme", "old"))
    assert [m.role for m in await acme.messages("old")][-1] == "user"
    await acme.add_human_message("old", "after")
    assert await store.database["tasks"].count_documents({"_id": "old"}) == 0
    assert (await acme.get("old")).seq == record.seq + 2
    with pytest.raises(MindstoreError):  # still taken in its tenant
        await acme.create(task_id="old")


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.create(title="x" * 20_000_000),
        lambda t: t.create(metadata={"k": "v" * 20_000_000}),
        lambda t: t.create(owner="o" * 20_000_000),
        lambda t: t.create(metadata={1: 2}),
        lambda t: t.create(title=123),
        lambda t: t.create(metadata="str"),
        lambda t: t.list(updated_after="yesterday"),
        lambda t: t.list(state="bogus"),
    ],
)
async def test_bad_create_and_list_arguments_write_nothing(store, call):
    acme = store.scoped("acme").tasks
    before = await raw_dump(store)
    with pytest.raises(MindstoreError):
        await call(acme)
    assert await raw_dump(store) == before


async def test_a_value_above_the_payload_limit_is_refused(store):
    acme = store.scoped("acme").tasks
    task = await acme.create(config=CONFIG)
    before = await raw_dump(store)
    with pytest.raises(TaskTooLarge):
        await acme.add_human_message(task.id, "z" * (16 * 1024 * 1024))
    assert await raw_dump(store) == before


async def test_nan_cost_is_refused_and_never_reaches_analytics(store):
    acme = store.scoped("acme").tasks
    task = await acme.create(config=CONFIG)
    reply = await acme.add_assistant_message(task.id)
    for bad in (
        {"cost": math.nan},
        {"cost": -1.0},
        {"tokens_in": math.nan},
        {"tokens_in": 2**70},
        {"finished_ts": math.inf},
    ):
        with pytest.raises(MindstoreError):
            await acme.finish_assistant_message(task.id, reply.id, **bad)
    usage = await store.scoped("acme").analytics.usage()
    assert all(math.isfinite(row.cost) for row in usage)


async def test_a_large_write_to_another_owners_task_leaves_no_payload(store):
    """An owner-scoped view writing a value large enough to be offloaded into another
    owner's task: NotFound, and the payload it stored before its guarded update (which
    the owner filter refused) is gone again (a hypothesis example found it left behind)."""
    await seed(store)
    before = await raw_dump(store)
    alice = store.scoped("acme", owner="alice")
    with pytest.raises(NotFound):
        await alice.tasks.add_human_message("bob-task", "A" * 200)
    assert await raw_dump(store) == before
