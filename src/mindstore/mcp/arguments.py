"""The tools' arguments (pure): one pydantic model per tool, its JSON Schema what
`tools/list` shows, and its checks what `tools/call` applies before any read.

Every argument is bounded in the schema and checked again here, since a client need not
honour a schema: ids in the store's alphabets (`mindstore.ids`), strings and lists of a
bounded size, integers in a range (a float, a string of digits or a boolean is not an
integer here), times as ISO 8601 (one without an offset is UTC), no argument the tool does
not name. A refused argument is a `ValidationError` whose message starts with its name.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict
from pydantic import ValidationError as ModelError

from mindstore.errors import ValidationError
from mindstore.ids import MAX_ID_LENGTH, check_key, check_name
from mindstore.memory.rules import MAX_DEPTH, MAX_LABEL_CHARS
from mindstore.search.query import MAX_QUERY_CHARS

MAX_PAGE: Final = 100
"""The most hits, conversations or messages one call returns."""
MAX_LAST: Final = 100_000
"""The most messages `last` may ask for (they are still read a page at a time)."""
MAX_INDEX: Final = 10**9
"""The largest message index an argument may name."""
MAX_CURSOR_CHARS: Final = 4096
MAX_ROLES: Final = 16

TaskId = Annotated[
    str,
    Field(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[A-Za-z0-9_\-.:]+$",
        description="A conversation (task) id: 1-128 characters of [A-Za-z0-9_-.:].",
    ),
    AfterValidator(lambda value: check_key(value, "task id")),
]  # fmt: skip
Owner = Annotated[
    str,
    Field(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[^$\x00-\x1f\x7f]",
        description="An owner: 1-128 printable characters, not starting with '$'.",
    ),
    AfterValidator(lambda value: check_name(value, "owner")),
]  # fmt: skip
Cursor = Annotated[
    str,
    Field(
        min_length=1, max_length=MAX_CURSOR_CHARS, pattern=r"^[A-Za-z0-9_\-=.:]+$",
        description="The next_cursor of the previous page.",
    ),
]  # fmt: skip
Role = Literal[
    "system", "user", "assistant", "tool", "informational", "compression", "taskconfig",
    "taskentry", "taskexit",
]  # fmt: skip
Count = Annotated[int, Strict(), Field(ge=1, le=MAX_PAGE)]
Index = Annotated[int, Strict(), Field(ge=0, le=MAX_INDEX)]


def _utc(value: datetime) -> datetime:
    """The time in UTC (one without an offset is UTC); one that UTC cannot hold (year 1 at
    +14:00) is refused here rather than overflowing in a query."""
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise ValueError("out of the range of UTC times") from None


Time = Annotated[
    datetime,
    Field(description="ISO 8601; without an offset, UTC."),
    AfterValidator(_utc),
]


class Arguments(BaseModel):
    """What every tool's arguments share: no argument the tool does not name."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SearchArguments(Arguments):
    query: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS,
        description='What to find: words, "a phrase", -word, role:user, tool:<name>.',
    )  # fmt: skip
    mode: Literal["hybrid", "lexical", "semantic"] | None = Field(
        None, description="How to rank: by words, by meaning, or both (the store's default)."
    )
    match: Literal["any", "all"] | None = Field(
        None, description="Whether a hit needs any or all of the query's words."
    )
    owner: Owner | None = Field(None, description="Only this owner's messages.")
    roles: list[Role] | None = Field(
        None, min_length=1, max_length=MAX_ROLES, description="Only messages of these roles."
    )
    since: Time | None = Field(None, description="Only messages from this time on.")
    until: Time | None = Field(None, description="Only messages before this time.")
    limit: Count = Field(20, description=f"Hits per page, 1 to {MAX_PAGE}.")
    cursor: Cursor | None = None


class ReadArguments(Arguments):
    task_id: TaskId
    last: Annotated[int, Strict(), Field(ge=1, le=MAX_LAST)] | None = Field(
        None, description="The last N messages (instead of start and stop)."
    )
    start: Index | None = Field(None, description="Index of the first message (0-based).")
    stop: Index | None = Field(None, description="Index after the last message (default: end).")
    limit: Count = Field(20, description=f"Messages per page, 1 to {MAX_PAGE}.")
    cursor: Cursor | None = None


class ListArguments(Arguments):
    owner: Owner | None = Field(None, description="Only this owner's conversations.")
    since: Time | None = Field(None, description="Only conversations updated from this time on.")
    until: Time | None = Field(None, description="Only conversations updated before this time.")
    oldest_first: Annotated[bool, Strict()] = Field(
        False, description="Oldest first (default: most recently updated first)."
    )
    limit: Count = Field(20, description=f"Conversations per page, 1 to {MAX_PAGE}.")
    cursor: Cursor | None = None


Label = Annotated[
    str,
    Field(min_length=1, max_length=MAX_LABEL_CHARS, pattern=r"^[^.\x00]+$",
          description="A namespace label: no '.', no NUL."),
]  # fmt: skip


class MemoryArguments(Arguments):
    namespace: list[Label] = Field(
        min_length=1, max_length=MAX_DEPTH,
        description='A LangGraph-store namespace (or its prefix), e.g. ["memories", "alice"].',
    )  # fmt: skip
    query: str | None = Field(
        None, min_length=1, max_length=MAX_QUERY_CHARS,
        description="Words to look for in the memories' values (default: newest first).",
    )  # fmt: skip
    limit: Count = Field(10, description=f"Memories per page, 1 to {MAX_PAGE}.")
    offset: Index = Field(0, description="How many of the ranked memories to skip.")


@cache
def _schema(model: type[Arguments]) -> str:
    found = model.model_json_schema()
    found.pop("title", None)
    return json.dumps(found)


def schema(model: type[Arguments]) -> dict[str, Any]:
    """The JSON Schema `tools/list` shows for a tool's arguments (a fresh copy each time,
    made once per model)."""
    found: dict[str, Any] = json.loads(_schema(model))
    return found


class ArgumentError(ValidationError):
    """A refused tool argument: `argument` names it, and the message starts with it."""

    def __init__(self, argument: str, reason: str) -> None:
        super().__init__(f"{argument}: {reason}")
        self.argument = argument


A = TypeVar("A", bound=Arguments)


def parse(model: type[A], arguments: object) -> A:
    """The arguments, checked: an `ArgumentError` names the first refused one."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ArgumentError("arguments", "expected an object")
    try:
        return model.model_validate(arguments)
    except ModelError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        location = [str(part) for part in first["loc"]]
        reason = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            reason = "not an argument of this tool"
        elif len(location) > 1:
            reason = f"item {'.'.join(location[1:])}: {reason}"
        raise ArgumentError(location[0] if location else "arguments", reason) from None
