"""The last untyped errors of the hostile-input run, one by one and over generated values.

`analytics.usage/latency/tools(group_by=...)`, `analytics.top_owners(by=...)` and
`dialogs.put_text` / `put_prompt` / `put_image` with a hostile role, name, metadata or
prompt used to end in a bare `TypeError` or pydantic's own `ValidationError`. Each must be
a `mindstore.errors.ValidationError` that names the argument, with the stored data
unchanged (tests/test_hostile_inputs.py has the same bar for every other verb).
"""

from __future__ import annotations

from typing import Any

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.errors import ValidationError

REGISTRY = {"greet": "hello {name}", "plain": "just text"}
REPORTS_WITH_GROUPS = ("usage", "latency", "tools")


async def _dump(store: mindstore.Store) -> dict[str, list[bytes]]:
    out = {}
    for name in ("tasks", "dialog_nodes", "payloads", "task_pages"):
        documents = await store.database[name].find({}).to_list()
        out[name] = sorted(bson.encode(d) for d in documents)
    return out


async def _dialog(store: mindstore.Store) -> str:
    acme = store.scoped("acme")
    record = await acme.dialogs.create("agent", "you are terse")
    await acme.dialogs.put_text(record.id, "first question")
    return record.id


async def _refused(store: mindstore.Store, call: Any, argument: str) -> None:
    before = await _dump(store)
    with pytest.raises(ValidationError) as caught:
        await call
    assert argument in str(caught.value), f"{caught.value!r} does not name {argument!r}"
    assert await _dump(store) == before


@pytest.mark.parametrize("report", REPORTS_WITH_GROUPS)
@pytest.mark.parametrize("group_by", [123, 1.5, None, b"model", {"model": 1}, [{"$gt": ""}],
                                      ["model", 7], [["model"]]])  # fmt: skip
async def test_group_by_of_the_wrong_type_is_a_typed_error(store, report, group_by):
    await _dialog(store)
    analytics = store.scoped("acme").analytics
    await _refused(store, getattr(analytics, report)(group_by=group_by), "group_by")


async def test_group_by_still_takes_a_name_or_a_list_of_names(store):
    await _dialog(store)
    analytics = store.scoped("acme").analytics
    assert await analytics.usage(group_by="model") == await analytics.usage(group_by=["model"])
    assert await analytics.latency(group_by=("model", "owner")) is not None
    assert await analytics.tools(group_by=iter(["model"])) is not None


@pytest.mark.parametrize("by", [{"$gt": ""}, ["cost"], 3, None, b"cost"])
async def test_top_owners_by_a_non_string_is_a_typed_error(store, by):
    await _dialog(store)
    await _refused(store, store.scoped("acme").analytics.top_owners(by=by), "by")


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"role": {"$ne": "user"}}, "role"),
        ({"role": ["user"]}, "role"),
        ({"role": "tool"}, "role"),
        ({"name": 123}, "name"),
        ({"name": {"$gt": ""}}, "name"),
        ({"name": "\ud800"}, "name"),
        ({"metadata": {1: "x"}}, "metadata"),
        ({"metadata": {"k": {2: "nested"}}}, "metadata"),
        ({"metadata": ["k"]}, "metadata"),
        ({"metadata": "k"}, "metadata"),
    ],
)
@pytest.mark.parametrize("verb", ["put_text", "put_prompt", "put_image"])
async def test_put_verbs_refuse_a_hostile_role_name_or_metadata(store, verb, options, argument):
    dialog = await _dialog(store)
    dialogs = store.scoped("acme").dialogs
    if verb == "put_text":
        call = dialogs.put_text(dialog, "hello", **options)
    elif verb == "put_prompt":
        call = dialogs.put_prompt(dialog, "greet", {"name": "x"}, registry=REGISTRY, **options)
    else:
        call = dialogs.put_image(dialog, b"\x89PNG", **options)
    await _refused(store, call, argument)


@pytest.mark.parametrize(
    ("args", "options", "argument"),
    [
        (({"$gt": ""},), {}, "prompt"),
        ((["greet"],), {}, "prompt"),
        ((None,), {}, "prompt"),
        (("greet", {1: "x"}), {}, "prompt_args"),
        (("greet", ["x"]), {}, "prompt_args"),
        (("greet", {"name": "x"}), {"registry": ["greet"]}, "registry"),
        (("bad",), {"registry": {"bad": 42}}, "registry"),
        (("bad",), {"registry": {"bad": "{0!z}"}}, "bad"),
    ],
)
async def test_put_prompt_refuses_a_hostile_prompt(store, args, options, argument):
    dialog = await _dialog(store)
    dialogs = store.scoped("acme").dialogs
    await _refused(
        store, dialogs.put_prompt(dialog, *args, **{"registry": REGISTRY, **options}), argument
    )


async def test_put_text_with_valid_arguments_still_writes(store):
    dialog = await _dialog(store)
    dialogs = store.scoped("acme").dialogs
    message = await dialogs.put_text(dialog, "hi", name="alice", metadata={"k": 1}, role="system")
    assert message.role == "system" and message.name == "alice"
    assert message.metadata == {"k": 1, "dialog_id": dialog}
    prompted = await dialogs.put_prompt(dialog, "greet", {"name": "bo"}, registry=REGISTRY)
    assert prompted.text() == "hello bo"
    assert await dialogs.top_prompt(dialog) == "greet"


HOSTILE = st.one_of(
    st.integers(), st.floats(allow_nan=True), st.binary(max_size=3), st.none(),
    st.dictionaries(st.sampled_from(["$gt", "$ne", "a.b", "model"]), st.integers(), min_size=1,
                    max_size=2),
    st.lists(st.one_of(st.integers(), st.dictionaries(st.text(max_size=2), st.integers())),
             min_size=1, max_size=2),
    st.text(max_size=4).filter(lambda t: t not in ("user", "system", "assistant")),
)  # fmt: skip


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    target=st.sampled_from(["group_by", "by", "role", "name", "metadata", "prompt"]),
    value=HOSTILE,
)
async def test_generated_hostile_values_are_typed_errors_or_valid_calls(store, target, value):
    """Any value: the call succeeds (a string that happens to be valid) or raises a
    `MindstoreError`, and a refused call writes nothing. The examples share one store."""
    acme = store.scoped("acme")
    dialog = (await acme.tasks.list(limit=1)).items or None
    dialog_id = dialog[0].id if dialog else await _dialog(store)
    calls = {
        "group_by": lambda: acme.analytics.usage(group_by=value),
        "by": lambda: acme.analytics.top_owners(by=value),
        "role": lambda: acme.dialogs.put_text(dialog_id, "x", role=value),
        "name": lambda: acme.dialogs.put_text(dialog_id, "x", name=value),
        "metadata": lambda: acme.dialogs.put_text(dialog_id, "x", metadata=value),
        "prompt": lambda: acme.dialogs.put_prompt(dialog_id, value, registry=REGISTRY),
    }
    before = await _dump(store)
    try:
        await calls[target]()
    except mindstore.MindstoreError:
        assert await _dump(store) == before
