"""The record shape checks and the re-keying of restore, as pure functions.

Two directions: everything mindstore itself writes passes (histories built by random
public verbs, forks, payloads), and hostile values in any id, header or reference field
are refused with a `ShapeError` that names the field.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import mindstore
from layout import flat_tasks
from mindstore.backup.rekey import moved_payload_id, rekey_node, rekey_payload, rekey_task
from mindstore.backup.shape import ShapeError, check_node, check_payload, check_task
from mindstore.documents import task_document
from mindstore.ids import is_name, task_key
from mindstore.model.messages import UnknownMessage, parse_message
from mindstore.model.task import Task
from mindstore.payloads import MARKER_PREFIX, find_markers
from test_backup_support import payload_hex, values
from test_repository_property import OPS, apply, frozen_world

UTC = dt.UTC
WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

# ----------------------------------------------------------------------------- builders


def task_record(tenant: str = "acme", task_id: str = "t1", *, keyed: bool = True,
                blobs: tuple[str, ...] = (), extra: list[dict] | None = None) -> dict:  # fmt: skip
    """A task document as mindstore writes it: messages folded by the planner."""
    messages = [
        UnknownMessage.model_validate({"role": "plugin", "id": f"m{i}", "blob": blob})
        for i, blob in enumerate(blobs)
    ]
    messages += [parse_message(m) for m in extra or []]
    task = Task(id=task_id, messages=messages)
    document = task_document(task, tenant, owner="alice", title="t", created_at=WHEN)
    if keyed:
        document["_id"] = task_key(tenant, task_id)
    return document


def node_record(tenant: str = "acme", dialog_id: str = "t1", parent: str | None = None) -> dict:
    return {"_id": task_key(tenant, dialog_id), "tenant": tenant, "owner": "alice",
            "parent_id": parent, "root_id": parent or dialog_id,
            "ancestors": [parent] if parent else [], "depth": 1 if parent else 0,
            "created_at": WHEN}  # fmt: skip


def payload_record(tenant: str = "acme", task_id: str = "t1", seed: str = "p") -> dict:
    return {
        "_id": payload_hex(seed),
        "tenant": tenant,
        "task_id": task_id,
        "message_id": "m0",
        "path": "blob",
        "sha256": "0" * 64,
        "size": 3,
        "data": b"abc",
        "created_at": WHEN,
    }


def _refused(check, record, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        check(record)


# ----------------------------------------------------------------------------- accepted


def test_records_as_mindstore_writes_them_pass():
    facts = check_task(task_record(blobs=(MARKER_PREFIX + payload_hex("p"), "plain")))
    assert (facts.identity, facts.task_id, facts.messages) == ("acme/t1", "t1", 2)
    assert facts.payload_ids == {payload_hex("p")}
    legacy = check_task(task_record(keyed=False))
    assert legacy.identity == "acme/t1"  # the bare form is the same task
    assert check_node(node_record(parent="t0")).parent_id == "t0"
    assert check_payload(payload_record()).task_identity == "acme/t1"


async def _history(ops) -> list[dict]:
    store = await mindstore.connect("embedded")
    try:
        repo = store.scoped("prop").tasks
        await repo.create(task_id="T", owner="o")
        counter = itertools.count()
        for step, op in enumerate(ops):
            with frozen_world(counter):
                await apply(op, step, repo, True, "T")
        return await flat_tasks(store.database)  # sealed pages included
    finally:
        await store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_every_history_the_public_verbs_build_passes(ops):
    # sub-tasks, tool calls and answers, part verbs, usage patches, unknown roles, configs:
    # the stored header is exactly what the planner folds from the stored messages
    for document in asyncio.run(_history(ops)):
        check_task(document)


# ----------------------------------------------------------------------------- ids

not_a_string = st.one_of(
    st.none(), st.integers(), st.floats(allow_nan=True), st.binary(max_size=4),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.sampled_from(["$gt", "$ne", "$regex", "$where", "$in"]),
                    st.one_of(st.text(max_size=3), st.lists(st.text(max_size=2), max_size=2)),
                    min_size=1, max_size=2),
)  # fmt: skip
bad_keys = st.one_of(
    not_a_string,
    st.text(max_size=140).filter(
        lambda s: not (0 < len(s) <= 128
                       and all(c.isascii() and (c.isalnum() or c in "_-.:") for c in s))
        and "/" not in s),
    st.sampled_from(["", "$gt", "a b", "x" * 129, "é", "a\x00b", "$$m.scope"]),
)  # fmt: skip
bad_names = st.one_of(
    not_a_string,
    st.text(max_size=140).filter(lambda s: not is_name(s)),
    st.sampled_from(["", "$$m.scope", "$x", "a\x00", "\x1b[31m", "x" * 129, "\ud800"]),
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    value=bad_keys,
    where=st.sampled_from(
        ["task", "node", "node parent", "node ancestor", "node root", "payload task", "tenant"]
    ),
)
def test_a_key_outside_the_alphabet_is_refused_wherever_it_is(value, where):
    task, node, payload = task_record(), node_record(parent="t0"), payload_record()
    target, check = {
        "task": (lambda: task.update(_id=value), lambda: check_task(task)),
        "node": (lambda: node.update(_id=value), lambda: check_node(node)),
        "node parent": (
            lambda: node.update(parent_id=value, ancestors=[value]),
            lambda: check_node(node),
        ),
        "node ancestor": (lambda: node.update(ancestors=[value]), lambda: check_node(node)),
        "node root": (lambda: node.update(root_id=value), lambda: check_node(node)),
        "payload task": (lambda: payload.update(task_id=value), lambda: check_payload(payload)),
        "tenant": (lambda: task.update(tenant=value), lambda: check_task(task)),
    }[where]
    assume(not (where == "node parent" and value is None))  # a root: valid
    target()
    with pytest.raises(ShapeError):
        check()


@settings(max_examples=150, deadline=None)
@given(value=bad_names, where=st.sampled_from(["message", "owner", "node owner", "tool call"]))
def test_a_name_outside_the_alphabet_is_refused(value, where):
    if where == "message":
        record = task_record(blobs=("a",))
        record["messages"][0]["id"] = value
        check = check_task
    elif where == "owner":
        assume(value is not None)  # no owner: valid
        record, check = task_record(), check_task
        record["owner"] = value
    elif where == "node owner":
        assume(value is not None)
        record, check = node_record(), check_node
        record["owner"] = value
    else:
        record = task_record(
            extra=[
                {
                    "role": "assistant",
                    "id": "a1",
                    "content": [
                        {
                            "type": "toolCall",
                            "tool_call_id": "c1",
                            "tool_name": "search",
                            "args": {},
                        }
                    ],
                }
            ]
        )
        check_task(record)
        record["messages"][0]["content"][0]["tool_call_id"] = value
        check = check_task
    with pytest.raises(ShapeError):
        check(record)


@settings(max_examples=100, deadline=None)
@given(
    value=st.one_of(
        not_a_string,
        st.text(max_size=70).filter(
            lambda s: not (16 <= len(s) <= 64 and all(c in "0123456789abcdef" for c in s))
        ),
    )
)
def test_payload_ids_are_hex_digests(value):
    _refused(check_payload, {**payload_record(), "_id": value}, "payload _id|BSON")
    if isinstance(value, str):  # a marker naming it
        _refused(check_task, task_record(blobs=(MARKER_PREFIX + value,)), "payload id")


def test_another_tenants_key_is_refused():
    _refused(check_task, {**task_record(), "_id": "beta/t1"}, "names tenant 'beta'")
    _refused(check_node, {**node_record(), "_id": "beta/t1"}, "names tenant 'beta'")
    _refused(
        check_node,
        {**node_record(parent="t0"), "parent_id": "beta/t0", "ancestors": ["beta/t0"]},
        "names tenant 'beta'",
    )
    _refused(check_payload, {**payload_record(), "task_id": "beta/t1"}, "names tenant 'beta'")


@pytest.mark.parametrize("key", ["$where", "$set", "$", "$id"])
@pytest.mark.parametrize(
    "check,build",
    [(check_task, task_record), (check_node, node_record), (check_payload, payload_record)],
)
def test_dollar_top_level_keys_are_refused(check, build, key):
    _refused(check, {**build(), key: 1}, "top-level key")


# ----------------------------------------------------------------------------- header


def _forged(field: str, value) -> dict:
    record = task_record(
        blobs=("a", "b"),
        extra=[
            {
                "role": "assistant",
                "id": "a1",
                "content": [
                    {"type": "toolCall", "tool_call_id": "c1", "tool_name": "search", "args": {}}
                ],
                "tokens_in": 5,
                "cost": 0.25,
            }
        ],
    )
    if field.startswith("messages."):
        _, index, key = field.split(".")
        record["messages"][int(index)][key] = value
    else:
        record[field] = value
    return record


@pytest.mark.parametrize("field,value,match", [
    ("seq", 9999, "seq is 9999"),
    ("seq", 2, "seq is 2"),
    ("seq", "3", "seq"),
    ("seq", -1, "seq"),
    ("size_bytes", 1, "size_bytes"),
    ("usage", {"tokens_in": 10**9, "tokens_out": 0, "cache_reads": 0, "cache_writes": 0,
               "cost": 0.25}, "usage"),
    ("usage", {"tokens_in": 5, "tokens_out": 0, "cache_reads": 0, "cache_writes": 0,
               "cost": float("nan")}, "usage"),
    ("open_tool_calls", [], "open_tool_calls"),
    ("scope_stack", [{"entry_id": "m0", "index": 0}], "scope_stack"),
    ("usage", {"in": 5, "cost": 0.25, "out": 10**9}, "usage"),  # the short keys stored now
    ("scope_stack", [{"entry_id": "m0", "index": 0, "fallback": True}], "scope_stack"),
    ("last_model_name", "gpt-forged", "last_model_name"),
    ("messages.0.scope", "$$m.scope", "scope/depth"),
    ("messages.1.depth", 3, "scope/depth"),
    ("messages.1.id", {"$ne": ""}, "message 1 id"),
    ("state", "bogus", "state"),
    ("created_at", "yesterday", "created_at"),
    ("version", -1, "version"),
    ("title", {"$gt": ""}, "title"),
    ("metadata", "str", "metadata"),
    ("messages", "not a list", "messages must be a list"),
])  # fmt: skip
def test_a_header_that_disagrees_with_the_messages_is_refused(field, value, match):
    check_task(_forged("title", "fine"))  # the unforged record passes
    _refused(check_task, _forged(field, value), match)


def test_a_tail_field_of_an_earlier_version_is_ignored():
    """The tail is derived from the last message now: a stored `tail` (written by an earlier
    version, or forged) decides nothing, so it is neither checked nor trusted."""
    for tail in (
        None,
        {"index": 0, "id": "m0", "role": "plugin", "started_ts": 0, "finished": True},
    ):
        check_task(_forged("tail", tail))


def test_messages_that_do_not_parse_are_refused():
    record = task_record()
    record["messages"] = [{"role": "assistant", "id": "a1", "content": "not a list"}]
    record["seq"] = 1
    _refused(check_task, record, "valid history")


def test_a_node_must_describe_one_place_in_a_tree():
    _refused(check_node, {**node_record(), "depth": 5}, "one place in a tree")
    _refused(check_node, {**node_record(parent="t0"), "root_id": "t9"}, "one place in a tree")
    _refused(
        check_node,
        {**node_record(parent="t0"), "ancestors": ["t1"], "parent_id": "t1", "root_id": "t1"},
        "one place in a tree",
    )  # its own ancestor


# ----------------------------------------------------------------------------- re-keying


def test_a_legacy_record_gets_the_per_tenant_key_and_nothing_else_changes():
    legacy = task_record(keyed=False, blobs=(MARKER_PREFIX + payload_hex("p"),))
    before = copy.deepcopy(legacy)
    keyed = rekey_task(legacy)
    assert legacy == before  # the input is left alone
    assert keyed["_id"] == "acme/t1" and list(keyed) == list(legacy)
    assert {k: v for k, v in keyed.items() if k != "_id"} == {
        k: v for k, v in legacy.items() if k != "_id"
    }
    check_task(keyed)
    node = {**node_record(parent="t0"), "_id": "t1"}
    assert rekey_node(node) == node_record(parent="t0")
    payload = payload_record()
    assert rekey_payload(payload) == payload  # same tenant: the id is kept


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blobs=st.lists(st.one_of(st.text(max_size=5), st.integers(0, 9).map(lambda n: f"P{n}")),
                      max_size=5),
       keyed=st.booleans(), target=st.sampled_from(["acme", "beta", "g-2"]))  # fmt: skip
def test_moving_a_tenant_keeps_every_reference_intact(blobs, keyed, target):
    # task "t1" of acme refers to payloads P0..P9 by marker; all move to `target` together
    texts = tuple(MARKER_PREFIX + payload_hex(b) if b.startswith("P") else b for b in blobs)
    task = task_record(keyed=keyed, blobs=texts)
    payloads = [
        payload_record(seed=b) for b in dict.fromkeys(b for b in blobs if b.startswith("P"))
    ]
    node = {**node_record(parent="t0"), "_id": task["_id"]}

    moved_task = rekey_task(task, target)
    moved_node = rekey_node(node, target)
    moved_payloads = [rekey_payload(p, target) for p in payloads]

    facts = check_task(moved_task)  # the re-keyed task is a valid task of the new tenant
    assert facts.identity == task_key(target, "t1") == moved_node["_id"]
    assert check_node(moved_node).tenant == target
    assert facts.payload_ids == {p["_id"] for p in moved_payloads}
    assert all(check_payload(p).task_identity == facts.identity for p in moved_payloads)
    if target == "acme":
        assert [p["_id"] for p in moved_payloads] == [p["_id"] for p in payloads]
    else:
        assert {p["_id"] for p in moved_payloads}.isdisjoint({p["_id"] for p in payloads})
    # texts that are not markers are untouched; re-keying is deterministic
    kept = [
        m["blob"] for m in moved_task["messages"] if not str(m["blob"]).startswith(MARKER_PREFIX)
    ]
    assert kept == [b for b in texts if not b.startswith(MARKER_PREFIX)]
    assert rekey_task(task, target) == moved_task


def test_moved_payload_ids_are_deterministic_hex_of_the_documented_form():
    import hashlib

    assert (
        moved_payload_id("beta", "ab" * 16)
        == hashlib.sha256(("beta\x00" + "ab" * 16).encode()).hexdigest()[:32]
    )
    assert moved_payload_id("beta", "ab" * 16) != moved_payload_id("gamma", "ab" * 16)


def test_keyed_references_move_with_the_tenant_bare_ones_stay():
    node = {
        **node_record(parent="t0"),
        "parent_id": "acme/t0",
        "ancestors": ["acme/t0"],
        "root_id": "acme/t0",
    }
    moved = rekey_node(node, "beta")
    assert (moved["parent_id"], moved["ancestors"], moved["root_id"]) == (
        "beta/t0",
        ["beta/t0"],
        "beta/t0",
    )
    bare = rekey_node(node_record(parent="t0"), "beta")
    assert (bare["parent_id"], bare["ancestors"], bare["root_id"]) == ("t0", ["t0"], "t0")
    assert rekey_payload({**payload_record(), "task_id": "acme/t1"}, "beta")["task_id"] == "beta/t1"


def test_markers_in_nested_values_are_found_and_rewritten():
    marker = MARKER_PREFIX + payload_hex("deep")
    record = task_record(extra=[{"role": "plugin", "id": "n1", "deep": {"a": [1, {"b": marker}]}}])
    moved = rekey_task(record, "beta")
    found: set[str] = set()
    find_markers(moved["messages"], found)
    assert found == {moved_payload_id("beta", payload_hex("deep"))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=values(10))
def test_any_bson_value_in_a_message_passes_and_survives_re_keying(blob):
    record = task_record(blobs=(blob,))
    check_task(record)
    assert rekey_task(record)["messages"] == record["messages"]
