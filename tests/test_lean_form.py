"""The lean stored form of messages (pure): what is left out, and that it reads back exactly.

Messages of every role with parts of every type, built from the models' own annotations,
each field left at its default, set to its default explicitly, or drawn: the lean stored
form, through BSON, parses back to the same message (same types, same zeros), and so does
the form written before it (every field, the task id on every message).
"""

from __future__ import annotations

import types
import typing
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from mindstore.model.base import JSON
from mindstore.model.lean_form import ABSENT, ALWAYS_STORED, lookup, same
from mindstore.model.messages import (
    MESSAGE_CLASSES,
    AssistantMessage,
    MessageBase,
    ToolMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    parse_message,
)
from mindstore.model.parts import (
    KNOWN_PART_TYPES,
    CompressionConfig,
    TaskConfigPart,
    TaskEntryPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)
from mindstore.model.plans import full_stored_doc, parse_stored, stored_doc
from mindstore.model.task import Task

TASK = "T-lean"
OTHER_TASK = "T-other"

keys = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=6)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
ints = st.one_of(st.sampled_from([0, 1, -1]), st.integers(-(2**63), 2**63 - 1))
floats = st.one_of(
    st.sampled_from([0.0, -0.0, 1.5]), st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), ints, floats, texts),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(keys, inner, max_size=2)),
    max_leaves=5,
)
json_objects = st.dictionaries(keys, json_values, max_size=3)
unknown_parts = json_objects.map(
    lambda raw: UnknownPart.model_validate({**raw, "type": "x-future"})
)


def for_annotation(annotation: Any) -> st.SearchStrategy[Any]:
    """Values a field of this annotation accepts (models drawn field by field)."""
    origin = get_origin(annotation)
    if annotation is Any:
        return json_values
    if origin is typing.Annotated:
        return for_annotation(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return st.one_of(*[for_annotation(arg) for arg in get_args(annotation)])
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin is list:
        return st.lists(for_annotation(get_args(annotation)[0]), max_size=2)
    if origin is tuple:
        return st.tuples(*[for_annotation(arg) for arg in get_args(annotation)])
    if origin is dict:
        return json_objects
    if annotation is UnknownPart:
        return unknown_parts
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return models(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return st.sampled_from(list(annotation))
    simple: dict[Any, st.SearchStrategy[Any]] = {
        type(None): st.none(), str: texts, int: ints, float: floats, bool: st.booleans(),
        bytes: st.binary(max_size=4),
    }  # fmt: skip
    return simple[annotation]


@st.composite
def models(draw: Any, cls: type[BaseModel]) -> BaseModel:
    """An instance of `cls`: each optional field omitted, set to its default, or drawn."""
    values: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        if name in ("role", "type"):
            continue
        if info.is_required():
            values[name] = draw(for_annotation(info.annotation))
            continue
        choice = draw(st.sampled_from(["omit", "default", "drawn"]))
        if choice == "default" and info.default_factory is None:
            values[name] = info.default
        elif choice != "omit":
            values[name] = draw(for_annotation(info.annotation))
    if draw(st.integers(0, 4)) == 0:
        values["x_extra"] = draw(json_values)  # a field a newer writer added
    return cls(**values)


@st.composite
def messages(draw: Any) -> Any:
    cls = draw(st.sampled_from(sorted(MESSAGE_CLASSES.values(), key=lambda c: c.__name__)))
    message = draw(models(cls))
    message.task_id = draw(st.sampled_from([TASK, OTHER_TASK]))
    return message


def through_bson(document: JSON) -> JSON:
    return bson.decode(bson.encode(document))


def exact(message: Any) -> bytes:
    """Every field, with its BSON type: equal bytes mean the same values of the same types."""
    return bson.encode(full_stored_doc(message))


settings_ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(messages())
def test_any_message_reads_back_exactly_from_its_lean_form(message):
    document = stored_doc(message, TASK)
    assert ("task_id" in document) == (message.task_id != TASK)
    parsed = parse_stored([through_bson(document)], task_id=TASK)[0]
    assert parsed == message and exact(parsed) == exact(message)
    # the lean form never holds a field at its default, except those kept on purpose
    assert len(bson.encode(document)) <= len(bson.encode(full_stored_doc(message)))
    assert stored_doc(parsed, TASK) == document


@settings_
@given(messages())
def test_documents_written_before_the_lean_form_read_back_the_same(message):
    old = through_bson(full_stored_doc(message))
    assert old["task_id"] == message.task_id
    parsed = parse_stored([old], task_id=TASK)[0]
    assert parsed == message and exact(parsed) == exact(message)
    assert stored_doc(parsed, TASK) == stored_doc(message, TASK)  # rewritten lean


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), max_size=3))
def test_a_read_without_the_task_id_keeps_what_was_stored(batch):
    documents = [through_bson(stored_doc(m, None)) for m in batch]  # task id kept
    assert parse_stored(documents) == batch


raw_messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["plugin", "critic"]), "id": st.text("abc", min_size=1, max_size=4)},
    optional={"scope": st.one_of(st.none(), texts), "depth": ints, "task_id": texts,
              "finished_ts": st.one_of(st.none(), st.integers(0, 2**31)), "blob": json_values},
)  # fmt: skip


@settings_
@given(raw_messages, st.sampled_from([0, 1]))
def test_unknown_role_messages_keep_their_raw_dict_and_the_store_fields(raw, depth):
    task = Task(id=TASK)
    if depth:
        task.add_task_entry([TextPart(text="sub")], TaskConfigPart(model_name="m"))
    message = parse_message(dict(raw))
    task.add_message(message)
    document = stored_doc(message, TASK)
    parsed = parse_stored([through_bson(document)], task_id=TASK)[0]
    old = parse_stored([through_bson(full_stored_doc(message))], task_id=TASK)[0]
    assert isinstance(parsed, UnknownMessage) and parsed.to_dict() == raw == old.to_dict()
    for name in ("task_id", "scope", "depth", "finished_ts"):
        assert getattr(parsed, name) == getattr(old, name), name
        if name not in raw:  # (a key of the caller's own wins over the store's field)
            assert getattr(parsed, name) == getattr(message, name), name


# ----------------------------------------------------------------------------- what is left out


def test_a_plain_turn_stores_only_what_it_says():
    call = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x"})
    message = AssistantMessage(id="a1", task_id=TASK, started_ts=5,
                               content=[TextPart(text="hi"), call], status="completed",
                               tokens_in=10, usage=Usage(input_tokens=10))  # fmt: skip
    assert stored_doc(message, TASK) == {
        "id": "a1", "started_ts": 5, "finished_ts": None, "role": "assistant",
        "status": "completed",
        "content": [{"type": "text", "text": "hi"},
                    {"type": "toolCall", "tool_call_id": "c1", "tool_name": "search",
                     "args": {"q": "x"},
                     "is_loading": True, "is_approval_pending": True}],
        "usage": {"input_tokens": 10}, "tokens_in": 10,
    }  # fmt: skip
    result = ToolMessage(id="t1", task_id=OTHER_TASK, started_ts=6, finished_ts=7,
                         content=[ToolResultPart(tool_call_id="c1", tool_name="search",
                                                 result={})])  # fmt: skip
    assert stored_doc(result, TASK) == {
        "id": "t1", "task_id": OTHER_TASK, "started_ts": 6, "finished_ts": 7, "role": "tool",
        "content": [{"type": "toolResult", "tool_call_id": "c1", "tool_name": "search"}],
    }  # fmt: skip


def test_values_equal_to_a_default_but_of_another_type_or_sign_are_kept():
    assert not same(-0.0, 0.0) and not same(0, 0.0) and not same(False, 0) and not same(0, False)
    assert same(
        CompressionConfig(), TaskConfigPart.model_fields["compression_config"].default_factory()
    )
    assert not same(CompressionConfig(token_limit=5), CompressionConfig())
    message = AssistantMessage(cost=-0.0, cache_reads=None, is_ui_hidden=0)
    document = stored_doc(message, TASK)
    assert document["cost"] == 0.0 and str(document["cost"]) == "-0.0"
    assert document["cache_reads"] is None  # None is not the default 0 here
    assert document["is_ui_hidden"] == 0  # an extra field is the caller's: kept as given


def test_fields_that_later_writes_patch_in_place_are_always_stored():
    user = UserMessage(task_id=TASK)
    document = stored_doc(user, TASK)
    assert document["content"] == [] and document["finished_ts"] is None
    assert {"id", "started_ts", "role"} <= set(document)
    entry = TaskEntryPart(initial_task_config=TaskConfigPart(model_name="m"), trigger_call_id=None)
    assert ALWAYS_STORED[MessageBase] >= {"content", "finished_ts"}
    dumped = stored_doc(UserMessage(content=[entry]), TASK)["content"][0]  # type: ignore[list-item]
    assert dumped == {"type": "taskentry",
                      "initial_task_config": {"type": "taskconfig", "model_name": "m"},
                      "trigger_call_id": None}  # fmt: skip


def test_every_default_factory_is_a_constant_or_always_stored():
    """A field whose default is computed (an id, a time) must never be left out: the reader
    would compute another one. Guard for fields added later."""
    classes = [*MESSAGE_CLASSES.values(), *KNOWN_PART_TYPES.values()]
    seen: set[type] = set()
    while classes:
        cls = classes.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for name, info in cls.model_fields.items():
            for arg in typing.get_args(info.annotation) or (info.annotation,):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    classes.append(arg)
            if info.default_factory is None or name in ALWAYS_STORED.get(MessageBase, ()):
                continue
            first, second = info.default_factory(), info.default_factory()  # type: ignore[call-arg]
            assert first == second and isinstance(first, (list, dict, BaseModel)), (cls, name)


def test_lookup_follows_paths_and_reports_what_the_lean_form_left_out():
    document = {"content": [{"type": "text", "text": "a"}], "status": "completed"}
    assert lookup(document, "content.0.text") == "a" and lookup(document, "status") == "completed"
    assert lookup(document, "content.1") is ABSENT and lookup(document, "content.0.x") is ABSENT
    assert lookup(document, "content.zero") is ABSENT and lookup(document, "status.deep") is ABSENT


@pytest.mark.parametrize("task_id", [TASK, None])
def test_an_unknown_part_is_stored_verbatim(task_id):
    part = UnknownPart.model_validate({"type": "x-future", "flag": False, "none": None, "list": []})
    document = stored_doc(UserMessage(content=[part]), task_id)
    assert document["content"] == [{"type": "x-future", "flag": False, "none": None, "list": []}]
