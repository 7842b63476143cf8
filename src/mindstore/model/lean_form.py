"""The lean stored form of messages and parts: what is left out, and how it reads back.

A message dumped with every field spends most of its bytes on fields that say nothing:
`world_state_id: null`, `depth: 0`, `status: "loading"`, empty lists, token counters at
zero. The stored form leaves out every field whose value is its declared default; reading
it back (pydantic fills defaults) gives the same model. Documents stored before, with the
defaults written out, read back the same way, so both forms live side by side.

Kept whatever their value:

* `role` and `type`: the discriminators (the union would not know the class without them);
* fields whose default comes from a factory that is not a constant (`id`, `started_ts`):
  a default recomputed at read time would be a different value;
* `finished_ts` and `content` of a message, and a tool call's `is_loading` and
  `is_approval_pending`: later writes patch them in place without reading the message
  (`messages.<i>.finished_ts`, `messages.<i>.content.<k>`, the call's flags), so the key
  must exist (a `$set` on `content.0` of a missing array would create an object) and its
  size must be known without reading it;
* a task entry's `trigger_call_id`, even null: its presence records that the entry's
  trigger was decided when it was written (entries stored before that decide it on read);
* `task_id` is decided by the caller (`planning.stored_doc`): left out when it equals the
  id of the task the message is stored in, and filled back from it on read.

A value equals its default only when it has the same type too (`0` is not `0.0`, `-0.0` is
not `0.0`, `False` is not `0`), so nothing the caller wrote changes on the way back.
Unknown parts and unknown-role messages keep their raw dict exactly as it came.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, TypeGuard

from pydantic import BaseModel

from mindstore.model.base import JSON, new_id, now_ts
from mindstore.model.messages import AnyMessage, MessageBase, UnknownMessage, message_to_dict
from mindstore.model.parts import TaskEntryPart, ToolCallPart, UnknownPart
from mindstore.model.storage_form import DERIVED_KEY, escape_keys

DISCRIMINATORS = frozenset({"role", "type"})
ALWAYS_STORED: dict[type[BaseModel], frozenset[str]] = {
    MessageBase: frozenset({"id", "task_id", "started_ts", "finished_ts", "content"}),
    ToolCallPart: frozenset({"is_loading", "is_approval_pending"}),
    TaskEntryPart: frozenset({"trigger_call_id"}),
}
"""Fields kept whatever their value, per class (and its subclasses); see the module doc."""
CONSTANT_FACTORY_RESULTS = (list, dict, tuple, BaseModel)
"""A `default_factory` returning one of these is a constant (a fresh empty container or a
model of defaults); any other factory makes its field always stored."""
FRESH_VALUE_FACTORIES: frozenset[Any] = frozenset({new_id, now_ts})
"""Factories never called to learn a default (each call is a new id or time, and would
consume one from a test's deterministic source): their fields are always stored."""


class _Absent:
    """The value of a path the stored form leaves out (see `lookup`)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()
_REQUIRED = object()

Spec = tuple[tuple[str, Any, bool], ...]
"""Per field of a class: (name, default or _REQUIRED, may be left out)."""
_SPECS: dict[type[BaseModel], Spec] = {}


def _normal(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _always(cls: type[BaseModel]) -> frozenset[str]:
    names: set[str] = set(DISCRIMINATORS)
    for base, fields in ALWAYS_STORED.items():
        if issubclass(cls, base):
            names.update(fields)
    return frozenset(names)


def _spec(cls: type[BaseModel]) -> Spec:
    """Which fields of `cls` may be left out, and their defaults (computed once per class)."""
    spec = _SPECS.get(cls)
    if spec is not None:
        return spec
    always = _always(cls)
    items: list[tuple[str, Any, bool]] = []
    for name, info in cls.model_fields.items():
        if info.is_required():
            items.append((name, _REQUIRED, False))
            continue
        if info.default_factory in FRESH_VALUE_FACTORIES:
            default, constant = _REQUIRED, False
        elif info.default_factory is not None:
            default = info.default_factory()  # type: ignore[call-arg]
            constant = isinstance(default, CONSTANT_FACTORY_RESULTS)
        else:
            default, constant = info.default, True
        items.append((name, _normal(default), constant and name not in always))
    spec = tuple(items)
    _SPECS[cls] = spec
    return spec


def same(value: Any, default: Any) -> bool:
    """`value` is `default`: equal, of the same type (enums by value), zeros of one sign."""
    if default is None:
        return value is None
    value = _normal(value)
    kind = type(value)
    if kind is not type(default):
        return False
    if kind is float:
        return bool(value == default) and math.copysign(1.0, value) == math.copysign(1.0, default)
    if kind is list or kind is tuple:
        return len(value) == len(default) and all(map(same, value, default))
    if kind is dict:
        return value.keys() == default.keys() and all(same(value[k], default[k]) for k in value)
    if isinstance(value, BaseModel):
        if (value.__pydantic_extra__ or default.__pydantic_extra__) and (
            value.__pydantic_extra__ != default.__pydantic_extra__
        ):
            return False
        return all(same(value.__dict__[name], _normal(default.__dict__[name]))
                   for name in type(value).model_fields)  # fmt: skip
    return bool(value == default)


def _is_plain(model: Any) -> TypeGuard[BaseModel]:
    """A model whose dump is pruned (unknown parts and messages are kept verbatim)."""
    return isinstance(model, BaseModel) and not isinstance(model, (UnknownPart, UnknownMessage))


def prune(document: JSON, model: BaseModel) -> JSON:
    """Remove from `document` (the full dump of `model`, changed in place) every field
    that equals its default, in nested models and lists of models too."""
    values = model.__dict__
    for name, default, optional in _spec(type(model)):
        if name not in document:
            continue
        value = values.get(name)
        if optional and default is not _REQUIRED and same(value, default):
            del document[name]
            continue
        dumped = document[name]
        if _is_plain(value):
            if type(dumped) is dict:
                prune(dumped, value)
        elif type(value) is list and type(dumped) is list and len(value) == len(dumped):
            for item, item_doc in zip(value, dumped, strict=True):
                if _is_plain(item) and type(item_doc) is dict:
                    prune(item_doc, item)
    return document


def lean_dump(model: BaseModel) -> JSON:
    """The lean stored form of a part or any other model (keys not escaped yet)."""
    document: JSON = model.model_dump(mode="python", by_alias=True)
    if _is_plain(model):
        prune(document, model)
    return document


def lean_value(value: Any) -> Any:
    """A patch value in its lean stored form: models (and lists of them) pruned."""
    if isinstance(value, BaseModel):
        return lean_dump(value)
    if isinstance(value, list):
        return [lean_value(item) for item in value]
    return value


def lookup(document: Any, path: str) -> Any:
    """The value at a dotted path (`content.2.finished_ts`) of a stored document, or
    `ABSENT` where the stored form has nothing."""
    current = document
    for step in path.split("."):
        if isinstance(current, dict):
            if step not in current:
                return ABSENT
            current = current[step]
        elif isinstance(current, list):
            if not step.isdigit() or int(step) >= len(current):
                return ABSENT
            current = current[int(step)]
        else:
            return ABSENT
    return current


# ----------------------------------------------------------------------------- messages


LEAN_DERIVED = ("task_id", "scope", "depth")
"""Store fields of an unknown-role message that the lean form leaves out at their default
(`finished_ts` stays: the next append patches it in place)."""


def _derivable(name: str, value: Any, task_id: str | None) -> bool:
    """A store field whose value the reader knows without it (see `stored_doc`)."""
    if name == "task_id":
        return task_id is not None and value == task_id
    return same(value, None if name == "scope" else 0)


def stored_doc(message: AnyMessage, task_id: str | None = None) -> JSON:
    """The document stored for a message: its lean form (no field at its default, see
    the module doc) with user keys escaped. `task_id` is the id of the task the
    message is stored in: the message's own `task_id` is left out when it equals it (the
    reader fills it back, `fill_task_ids`); None keeps it. An unknown-role message keeps
    its raw dict, plus the store's fields it lacks (and the list of those added)."""
    if isinstance(message, UnknownMessage):
        form, added = message.stored_form()
        for name in LEAN_DERIVED:
            if name in added and _derivable(name, form[name], task_id):
                del form[name]
                added.remove(name)
        document = escape_keys(form)
        if added:
            document[DERIVED_KEY] = added
        return document  # type: ignore[no-any-return]
    dumped = prune(message_to_dict(message), message)
    if task_id is not None and dumped.get("task_id") == task_id:
        del dumped["task_id"]
    return escape_keys(dumped)  # type: ignore[no-any-return]


def full_stored_doc(message: AnyMessage) -> JSON:
    """The stored form of documents written before the lean form: every field, nulls and
    defaults included, and `task_id` on every message. Reads accept it as they accept the
    lean form; it is kept for comparisons (benchmarks, backup checks, tests)."""
    if isinstance(message, UnknownMessage):
        form, added = message.stored_form()
        document = escape_keys(form)
        if added:
            document[DERIVED_KEY] = added
        return document  # type: ignore[no-any-return]
    return escape_keys(message_to_dict(message))  # type: ignore[no-any-return]


def fill_task_ids(messages: list[AnyMessage], task_id: str) -> None:
    """Give back the `task_id` the lean form left out: the id of the task read from (a
    message stored with another task id keeps it; an unknown-role message gets it as a
    store field, never inside the caller's raw dict)."""
    for message in messages:
        if isinstance(message, UnknownMessage):
            if "task_id" not in message.raw and not message.task_id:
                message.task_id = task_id
        elif not message.task_id:
            message.task_id = task_id
