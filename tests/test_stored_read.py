"""Reading stored messages in one pass gives exactly what the former separate walks gave.

The reference below is the former read path, kept verbatim: collect markers
(`find_markers`), take the derived lists out, unescape keys (`unescape_keys`), restore
strings and resolve markers (`read_value`), validate with the exact adapter. The new path
(`read_stored` + `StoredRead.resolve` + `parse_stored`) must return equal objects of the
same classes, raise the same typed error on damaged data, fetch the same payload ids, and
walk only the documents that need it.
"""

from __future__ import annotations

import datetime as _dt
import gc
from collections.abc import Iterator
from typing import Any
from unittest import mock

import bson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mindstore.errors import ValidationError
from mindstore.model import messages as messages_module
from mindstore.model import stored_read
from mindstore.model.collector import collector_paused
from mindstore.model.messages import (
    MESSAGE_LIST_ADAPTER,
    AnyMessage,
    UnknownMessage,
    message_to_dict,
    parse_messages,
)
from mindstore.model.plans import DERIVED_KEY, parse_stored, stored_doc
from mindstore.model.storage_form import escape_keys, unescape_keys
from mindstore.model.stored_read import StoredRead, plain, read_stored
from mindstore.payloads import ESCAPE_PREFIX, MARKER_PREFIX, find_markers, read_value


@pytest.fixture(autouse=True, scope="module")
def one_instant() -> Iterator[None]:
    """A document without `started_ts` reads as "now": every parse here sees the same
    instant, so two parses compared a moment apart agree (the clock ticks in ms)."""
    with mock.patch("mindstore.model.base.CLOCK", lambda: 1_700_000_000.25):
        yield


OURS = {"a" * 32: "the payload of this task", "b" * 32: b"\x00binary payload"}
"""Payloads the read may resolve; markers of other ids (another task's) must stay markers."""


def reference_read(documents: list[Any], payloads: dict[str, Any] | None) -> list[AnyMessage]:
    """The former read path (caller form with `payloads`, planning form with None)."""
    found: dict[str, Any] = {}
    if payloads is not None:
        markers: set[str] = set()
        find_markers(documents, markers)
        found = {key: payloads[key] for key in markers if key in payloads}
    derived = [doc.get(DERIVED_KEY) for doc in documents]
    plain = []
    for document in documents:
        if DERIVED_KEY in document:
            document = {key: value for key, value in document.items() if key != DERIVED_KEY}
        document = unescape_keys(document)
        plain.append(read_value(document, found) if payloads is not None else document)
    try:
        messages = MESSAGE_LIST_ADAPTER.validate_python(plain)
    except Exception as exc:
        raise ValidationError(f"invalid message list: {exc}") from exc
    for position, names in enumerate(derived):
        message = messages[position]
        if names and isinstance(message, UnknownMessage):
            messages[position] = UnknownMessage.from_stored(message.raw, list(names))
    return messages


def one_pass(
    documents: list[Any], payloads: dict[str, Any] | None
) -> tuple[list[AnyMessage], StoredRead]:
    read = read_stored(documents, strings=payloads is not None)
    if payloads is not None:
        read.resolve({key: payloads[key] for key in read.markers if key in payloads})
    return parse_stored(read), read


def same(left: list[AnyMessage], right: list[AnyMessage]) -> None:
    assert [type(m) for m in left] == [type(m) for m in right]
    assert left == right
    for a, b in zip(left, right, strict=True):
        if isinstance(a, UnknownMessage):
            assert a.stored_form() == b.stored_form()  # the store's fields too
        else:
            assert message_to_dict(a) == message_to_dict(b)


# ----------------------------------------------------------------- strategies: stored data
KEY_CHARS = "ab$.§%2"
keys = st.one_of(
    st.sampled_from(["$ref", "$schema", "a.b", "§x", "§24ref", "§zz%", "%41", "plain", "§derived"]),
    st.text(KEY_CHARS, min_size=1, max_size=5),
)
strings = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        ["mindstore:", "mindstore:escaped:", "§ 5 of the contract", "mindstore:other:x"]
    ),
    st.builds(lambda s: ESCAPE_PREFIX + s, st.text(max_size=6)),
    st.builds(lambda s: ESCAPE_PREFIX + ESCAPE_PREFIX + s, st.text(max_size=4)),
    st.builds(lambda k: MARKER_PREFIX + k, st.sampled_from([*OURS, "c" * 32, "not-hex"])),
)
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), strings,
    st.binary(max_size=4), st.just(_dt.datetime(2024, 1, 2, 3, 4, 5)), st.just(bson.Int64(7)),
)  # fmt: skip
json_values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=10,
)
stored_json = st.one_of(json_values, json_values.map(escape_keys))
parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": strings}),
    st.fixed_dictionaries(
        {"type": st.just("toolCall"), "tool_call_id": st.just("c1"), "tool_name": strings,
         "args": st.dictionaries(keys, stored_json, max_size=3)},
        optional={"is_loading": st.booleans(), "§24extra": stored_json},
    ),
    st.fixed_dictionaries(
        {"type": st.just("toolResult"), "tool_call_id": st.just("c1"), "tool_name": st.just("t"),
         "result": stored_json},
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["widget", "unknown"]), "payload": stored_json}),
    st.fixed_dictionaries({"type": st.just("text")}),  # damaged: no text
)  # fmt: skip
documents = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["m1", "m2", "m3"]),
        "role": st.sampled_from(["user", "assistant", "tool", "system", "critic", "unknown"]),
        "content": st.lists(parts, max_size=3),
    },
    optional={
        "started_ts": st.one_of(st.integers(0, 2**31), st.floats(0, 2e9)),
        "metadata": st.one_of(st.none(), st.dictionaries(keys, stored_json, max_size=3)),
        "scope": st.one_of(st.none(), strings),
        "§24future": stored_json,
        "status": strings,
        DERIVED_KEY: st.one_of(st.just(["scope", "depth"]), st.just(["task_id"]), st.just([])),
        "name": st.integers(),  # damaged: a name must be a string
    },
)
batches = st.lists(documents, max_size=6)


def outcome(function: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", function(*args)
    except ValidationError as exc:
        return "error", str(exc)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches)
def test_one_pass_reads_what_the_separate_walks_read(batch):
    for payloads in (OURS, None):  # the caller's form, then the planning form
        expected = outcome(reference_read, batch, payloads)
        got = outcome(lambda b, p: one_pass(b, p)[0], batch, payloads)
        assert got[0] == expected[0], (got, expected)
        if got[0] == "ok":
            same(got[1], expected[1])
        else:
            assert got[1] == expected[1]  # the same typed error, the same message


@settings(max_examples=60, deadline=None)
@given(batches)
@example([  # a double whose rendered bytes hold the UTF-8 of the escape (found by CI)
    {"id": "m1", "role": "user", "content": []},
    {"id": "m1", "role": "user", "content": [{
        "type": "toolResult", "tool_call_id": "c1", "tool_name": "t",
        "result": {"$ref": 2.052065619660405e-24, "$schema": _dt.datetime(2024, 1, 2, 3, 4, 5)},
    }]},
])  # fmt: skip
def test_only_documents_holding_a_stored_form_are_walked_and_markers_are_all_found(batch):
    read = read_stored(batch, strings=True)
    needing = [i for i, doc in enumerate(batch) if _holds_stored_form(doc)]
    # the scan looks for the escape's bytes in a rendering of each document, so a number
    # whose bytes happen to hold them is walked too (`plain` says which); never one missed
    walked = [i for i, doc in enumerate(batch) if not plain(doc)]
    assert set(needing) <= set(walked) and read.walked <= len(walked)
    for position, document in enumerate(batch):
        if position not in walked:
            assert read.documents[position] is document  # neither walked nor copied
        elif position not in needing:
            assert read.documents[position] == document  # walked for nothing: unchanged
    markers: set[str] = set()
    find_markers([{k: v for k, v in doc.items() if k != DERIVED_KEY} for doc in batch], markers)
    assert set(read.markers) == markers  # the payload ids to fetch, and only them


def _holds_stored_form(value: Any) -> bool:
    if isinstance(value, str):
        return "§" in value or "mindstore:" in value
    if isinstance(value, dict):
        return any(_holds_stored_form(k) or _holds_stored_form(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_stored_form(item) for item in value)
    return False


def test_a_clean_batch_is_not_walked_and_a_dirty_one_only_where_needed():
    clean = [
        {"id": f"m{i}", "role": "user", "content": [{"type": "text", "text": "hi"}]}
        for i in range(150)
    ]
    read = read_stored(clean, strings=True)
    assert read.walked == 0 and all(a is b for a, b in zip(read.documents, clean, strict=True))
    dirty = list(clean)
    dirty[70] = {**clean[70], "metadata": escape_keys({"$ref": "x"})}
    dirty[149] = {
        **clean[149],
        "content": [{"type": "text", "text": ESCAPE_PREFIX + "mindstore:x"}],
    }
    read = read_stored(dirty, strings=True)
    assert read.walked == 2
    messages = parse_stored(read)
    assert messages[70].metadata == {"$ref": "x"}
    assert messages[149].content[0].text == "mindstore:x"
    assert messages[0] is not None and read.documents[0] is clean[0]


def test_copy_walks_every_document_so_a_rewrite_never_touches_the_stored_ones():
    stored = [{"id": "m1", "role": "user", "content": [{"type": "text", "text": "hi"}]}]
    snapshot = bson.encode({"m": stored})

    def rewrite(document: dict[str, Any]) -> dict[str, Any]:
        document["content"][0]["text"] = "changed"
        return document

    assert parse_stored(stored, rewrite)[0].content[0].text == "changed"
    assert bson.encode({"m": stored}) == snapshot


def test_markers_resolve_only_to_the_payloads_given_and_a_repeated_key_keeps_the_last_value():
    ours, theirs = "a" * 32, "c" * 32
    document = {"id": "m1", "role": "critic", "x": [MARKER_PREFIX + ours, MARKER_PREFIX + theirs],
                "§%78": MARKER_PREFIX + ours, "x2": MARKER_PREFIX + ours}  # fmt: skip
    # "§%78" unescapes to 'x', the key that comes first: the later value wins, as before
    messages, read = one_pass([document], OURS)
    assert set(read.markers) == {ours, theirs}
    assert messages[0].raw == {"id": "m1", "role": "critic", "x": OURS[ours], "x2": OURS[ours]}
    same(messages, reference_read([document], OURS))
    document["§%78"] = "plain"
    messages, _ = one_pass([document], OURS)
    assert messages[0].raw["x"] == "plain"


def test_values_marshal_cannot_render_are_checked_too():
    when, big = _dt.datetime(2024, 1, 1), bson.Int64(2**40)
    clean = {"id": "m1", "role": "critic", "when": when, "n": big}
    dirty = {**clean, "§%24k": ESCAPE_PREFIX + "mindstore:y"}
    messages, read = one_pass([clean, dirty], {})
    assert read.walked == 1 and read.documents[0] is clean
    assert messages[1].raw == {
        "id": "m1",
        "role": "critic",
        "when": when,
        "n": big,
        "$k": "mindstore:y",
    }
    assert not stored_read.plain([{"x": lambda: 0}])  # nothing renders it: walk, to be safe


@pytest.mark.parametrize(
    "damaged",
    [
        [{"id": "m1", "role": "user", "content": "not a list"}],
        [{"id": "m1", "role": "assistant", "content": [{"type": "toolCall"}]}],
        [{"id": "m1", "role": "user", "started_ts": "yesterday"}],
        ["not an object"],
        [{"id": "m1", "role": "user", "content": [{"type": "text", "text": 5}], "§24x": 1}],
    ],
)
def test_damaged_stored_data_raises_the_typed_error_and_leaves_the_collector_as_it_was(damaged):
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            with pytest.raises(ValidationError, match="invalid message list"):
                parse_stored(read_stored(damaged, strings=True))
            assert gc.isenabled() is enabled
        finally:
            gc.enable()


def test_the_collector_pause_restores_the_previous_state():
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller's choice stays
    finally:
        gc.enable()


# ----------------------------------------------------------------- the keyed validator
@settings(max_examples=60, deadline=None)
@given(batches)
def test_the_keyed_validator_builds_what_the_exact_adapter_builds_or_refuses(batch):
    plain = [unescape_keys({k: v for k, v in doc.items() if k != DERIVED_KEY}) for doc in batch]
    try:
        exact = MESSAGE_LIST_ADAPTER.validate_python(plain)
    except Exception:
        exact = None
    try:
        keyed = messages_module._keyed_list_validator().validate_python(plain)
    except Exception:
        keyed = None
    if keyed is not None:  # whatever the keyed one accepts, it builds exactly as the exact one
        assert exact is not None
        same(keyed, exact)
    roles = {doc["role"] for doc in batch}
    types = {part.get("type") for doc in batch for part in doc["content"]}
    if exact is not None and roles <= {"user", "assistant", "tool", "system", "unknown"} and \
            types <= {"text", "toolCall", "toolResult", "unknown"}:  # fmt: skip
        assert keyed is not None  # every known role and part type takes the keyed path


def test_parse_messages_falls_back_for_unknown_roles_and_parts():
    data = [{"id": "m1", "role": "critic", "x": 1},
            {"id": "m2", "role": "user", "content": [{"type": "hologram", "z": 2}]}]  # fmt: skip
    messages = parse_messages(data)
    assert type(messages[0]) is UnknownMessage and messages[0].raw == data[0]
    assert messages[1].content[0].raw == {"type": "hologram", "z": 2}


def test_parse_messages_given_model_instances_returns_what_the_exact_adapter_returns():
    from mindstore.model.messages import UserMessage
    from mindstore.model.parts import TextPart, UnknownPart

    user = UserMessage(
        id="a", content=[TextPart(text="x"), UnknownPart.model_validate({"type": "text", "q": 1})]
    )
    unknown = UnknownMessage.model_validate({"role": "user", "id": "x"})  # raw role of a known one
    data = [user, unknown, {"role": "user", "id": "b"}]
    got, exact = parse_messages(data), MESSAGE_LIST_ADAPTER.validate_python(data)
    same(got, exact)
    assert got[0] is user and got[1] is unknown


# ----------------------------------------------------------------- through the store
async def test_messages_reads_each_stored_document_in_one_pass(acme, monkeypatch):
    from mindstore.model.messages import AssistantMessage, UserMessage
    from mindstore.model.parts import TextPart, ToolCallPart
    from mindstore.repositories import port

    task = await acme.tasks.create()
    plain = [UserMessage(id=f"u{i}", content=[TextPart(text=f"hello {i}")]) for i in range(20)]
    escaped = AssistantMessage(id="a1", status="completed", content=[
        ToolCallPart(tool_call_id="c1", tool_name="t", args={"$schema": "s", "q": "mindstore:q"},
                     is_loading=False, is_approval_pending=False)])  # fmt: skip
    await acme.tasks.add_messages(task.id, [*plain, escaped])
    reads: list[StoredRead] = []
    validations: list[int] = []
    original_read, original_parse = port.read_stored, stored_read.parse_messages

    def counting_read(documents: list[Any], **kwargs: Any) -> StoredRead:
        reads.append(original_read(documents, **kwargs))
        return reads[-1]

    def counting_parse(data: list[Any]) -> list[AnyMessage]:
        validations.append(len(data))
        return original_parse(data)

    monkeypatch.setattr(port, "read_stored", counting_read)
    monkeypatch.setattr(stored_read, "parse_messages", counting_parse)
    got = await acme.tasks.messages(task.id)
    assert [m.id for m in got] == [*(m.id for m in plain), "a1"]
    assert got[-1].content[0].args == {"$schema": "s", "q": "mindstore:q"}
    assert [r.walked for r in reads] == [1]  # only the message with a stored form is walked
    assert validations == [21]  # one validation for the whole range


async def test_damaged_stored_messages_raise_the_typed_error_through_the_store(acme, store):
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "hi")
    await store.database["tasks"].update_one(
        {"tenant": "acme"},
        {"$set": {"messages.0.content": [{"type": "text", "text": {"$bad": 1}}]}},
    )
    with pytest.raises(ValidationError):
        await acme.tasks.messages(task.id)
    assert gc.isenabled()


def test_stored_doc_round_trips_through_the_one_pass_read():
    from mindstore.model.messages import ToolMessage
    from mindstore.model.parts import ToolResultPart

    message = ToolMessage(id="t1", content=[ToolResultPart(tool_call_id="c", tool_name="t",
                          result={"$id": 1, "a.b": ["§x"]})])  # fmt: skip
    assert parse_stored([stored_doc(message)]) == [message]
