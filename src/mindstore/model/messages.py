"""Messages: role-discriminated, with a catch-all that never drops data.

Every message carries the Mind Map metadata (id, task_id, timestamps, world state, error)
plus what the other formats put on a message (usage with cost, name, logprobs, metadata).
Three fields belong to the store and are written once at append time: `scope` (the id of
the task entry whose sub-task the message belongs to, None at the root), `depth` (nesting
depth) and `origin` (where a forked copy came from). Because they are materialized,
boundaries and the current level are filters rather than scans.
"""

from __future__ import annotations

import copy
import functools
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    TypeAdapter,
)
from pydantic_core import SchemaValidator

from mindstore.errors import ValidationError
from mindstore.model.base import JSON, Model, Verbatim, new_id, now_ts
from mindstore.model.parts import (
    CompressionPart,
    ImagePart,
    Part,
    TaskConfigPart,
    TaskEntryPart,
    TaskExitPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    _part_tag,
)


class MessageRole(str, Enum):
    system = "system"
    user = "user"
    assistant = "assistant"
    tool = "tool"
    informational = "informational"
    compression = "compression"
    taskconfig = "taskconfig"
    taskentry = "taskentry"
    taskexit = "taskexit"


class UsageCost(Model):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(Model):
    """Token usage of one model call (the message-layer and agent-graph formats)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost: UsageCost = Field(default_factory=UsageCost)


class Origin(Model):
    """Where a message copied by a fork came from, so analytics count it once."""

    task_id: str
    index: int


class MessageBase(Model):
    id: str = Field(default_factory=new_id)
    task_id: str = ""
    started_ts: int | float = Field(default_factory=now_ts)
    finished_ts: int | float | None = None
    world_state_id: str | None = None
    world_state_hash: str | None = None
    error_message: str | None = None
    content: list[Part] = Field(default_factory=list)
    name: str | None = None
    usage: Usage | None = None
    logprobs: list[Any] | None = None
    metadata: JSON | None = None
    scope: str | None = None
    depth: int = 0
    origin: Origin | None = None

    def parts_of(self, kind: type) -> list[Any]:
        return [part for part in self.content if isinstance(part, kind)]

    def text(self) -> str:
        """Best-effort plain text of the message, for token estimates and summaries."""
        return "".join(part.text for part in self.content if isinstance(part, TextPart))


class SystemMessage(MessageBase):
    role: Literal["system"] = "system"


class UserMessage(MessageBase):
    role: Literal["user"] = "user"
    is_ui_hidden: bool | None = False


class AssistantMessage(MessageBase):
    role: Literal["assistant"] = "assistant"
    # The Mind Map lists loading/completed/error/interrupted; other values are kept, not refused.
    status: str = "loading"
    cost: float | None = 0.0
    cache_writes: int | None = 0
    cache_reads: int | None = 0
    tokens_in: int | None = 0
    tokens_out: int | None = 0
    model_id: str | None = None

    def tool_calls(self) -> list[ToolCallPart]:
        return self.parts_of(ToolCallPart)


class ToolMessage(MessageBase):
    role: Literal["tool"] = "tool"

    def tool_results(self) -> list[ToolResultPart]:
        return self.parts_of(ToolResultPart)


class InformationalMessage(MessageBase):
    role: Literal["informational"] = "informational"


class CompressionMessage(MessageBase):
    role: Literal["compression"] = "compression"

    def compression_parts(self) -> list[CompressionPart]:
        return self.parts_of(CompressionPart)


class TaskConfigMessage(MessageBase):
    role: Literal["taskconfig"] = "taskconfig"

    def config(self) -> TaskConfigPart | None:
        parts = self.parts_of(TaskConfigPart)
        return parts[0] if parts else None


class TaskEntryMessage(MessageBase):
    role: Literal["taskentry"] = "taskentry"

    def entry(self) -> TaskEntryPart | None:
        parts = self.parts_of(TaskEntryPart)
        return parts[0] if parts else None


class TaskExitMessage(MessageBase):
    role: Literal["taskexit"] = "taskexit"

    def handoff(self) -> list[TextPart | ImagePart]:
        parts = self.parts_of(TaskExitPart)
        return list(parts[0].handoff_description) if parts else []


DERIVED_FIELDS = ("id", "task_id", "scope", "depth", "finished_ts")
"""What the store adds to an unknown-role message it keeps (levels and pipelines need them)."""


class UnknownMessage(Verbatim):
    """A message whose role this version does not know; stored and returned verbatim.

    The Mind Map silently dropped such messages. Here they are kept as the raw dict, expose
    the fields the store needs (id, timestamps, scope), and serialise back unchanged: the
    store's own fields (`scope`, `depth`, `task_id`, `finished_ts` when the caller did not
    set them) live beside `raw`, never in it, so reading a task never changes what the
    caller wrote (`derived` holds them; `stored_form` writes them next to the raw keys).
    """

    what: ClassVar[str] = "a message"
    _derived: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_stored(cls, document: JSON, derived: list[str]) -> UnknownMessage:
        """The caller's message from a stored one: the listed store fields move out of raw."""
        raw = dict(document)
        message = cls(raw={})
        for name in derived:
            if name in raw:
                message._derived[name] = raw.pop(name)
        message.raw = raw
        return message

    def stored_form(self) -> tuple[JSON, list[str]]:
        """(the raw dict plus the store's fields, the names of those added)."""
        added = {name: value for name, value in self._derived.items() if name not in self.raw}
        return {**copy.deepcopy(self.raw), **added}, sorted(added)

    def _get(self, name: str) -> Any:
        return self._derived[name] if name in self._derived else self.raw.get(name)

    @property
    def id(self) -> str:
        value = self.raw.get("id")
        return value if isinstance(value, str) else ""

    @property
    def role(self) -> str | None:
        return self._raw_text("role")

    @property
    def started_ts(self) -> int | float:
        value = self.raw.get("started_ts")
        return value if isinstance(value, (int, float)) else 0

    @property
    def finished_ts(self) -> int | float | None:
        value = self._get("finished_ts")
        return value if isinstance(value, (int, float)) else None

    @finished_ts.setter
    def finished_ts(self, value: int | float | None) -> None:
        self._derived["finished_ts"] = value

    @property
    def scope(self) -> str | None:
        return self._get("scope")  # type: ignore[no-any-return]

    @scope.setter
    def scope(self, value: str | None) -> None:
        self._derived["scope"] = value

    @property
    def depth(self) -> int:
        value = self._get("depth")
        return value if isinstance(value, int) else 0

    @depth.setter
    def depth(self, value: int) -> None:
        self._derived["depth"] = value

    @property
    def task_id(self) -> str:
        return self._get("task_id") or ""

    @task_id.setter
    def task_id(self, value: str) -> None:
        self._derived["task_id"] = value

    @property
    def content(self) -> list[Any]:
        return []

    @property
    def usage(self) -> None:
        return None

    def text(self) -> str:
        return ""


MESSAGE_CLASSES: dict[str, type[AnyMessage]] = {
    MessageRole.system.value: SystemMessage,
    MessageRole.user.value: UserMessage,
    MessageRole.assistant.value: AssistantMessage,
    MessageRole.tool.value: ToolMessage,
    MessageRole.informational.value: InformationalMessage,
    MessageRole.compression.value: CompressionMessage,
    MessageRole.taskconfig.value: TaskConfigMessage,
    MessageRole.taskentry.value: TaskEntryMessage,
    MessageRole.taskexit.value: TaskExitMessage,
}


_ROLE_TAGS: dict[str, str] = {role: role for role in MESSAGE_CLASSES}


def _role_tag(value: Any) -> str:
    """Route a message to its class by `role`: ~4x faster than trying each union member."""
    if type(value) is dict:
        role = value.get("role")
    elif isinstance(value, UnknownMessage):
        return "unknown"
    else:
        role = getattr(value, "role", None)
        if isinstance(role, MessageRole):
            role = role.value
    try:
        return _ROLE_TAGS.get(role, "unknown")  # type: ignore[arg-type]
    except TypeError:
        return "unknown"


Message = Annotated[
    Annotated[SystemMessage, Tag("system")]
    | Annotated[UserMessage, Tag("user")]
    | Annotated[AssistantMessage, Tag("assistant")]
    | Annotated[ToolMessage, Tag("tool")]
    | Annotated[InformationalMessage, Tag("informational")]
    | Annotated[CompressionMessage, Tag("compression")]
    | Annotated[TaskConfigMessage, Tag("taskconfig")]
    | Annotated[TaskEntryMessage, Tag("taskentry")]
    | Annotated[TaskExitMessage, Tag("taskexit")]
    | Annotated[UnknownMessage, Tag("unknown")],
    Discriminator(_role_tag),
]

AnyMessage = (
    SystemMessage
    | UserMessage
    | AssistantMessage
    | ToolMessage
    | InformationalMessage
    | CompressionMessage
    | TaskConfigMessage
    | TaskEntryMessage
    | TaskExitMessage
    | UnknownMessage
)

MESSAGE_ADAPTER: TypeAdapter[AnyMessage] = TypeAdapter(Message)
MESSAGE_LIST_ADAPTER: TypeAdapter[list[AnyMessage]] = TypeAdapter(list[Message])


def parse_message(data: Any) -> AnyMessage:
    """Validate one stored or incoming message; unknown roles are kept, not refused."""
    try:
        return MESSAGE_ADAPTER.validate_python(data)
    except Exception as exc:  # pydantic.ValidationError and friends
        raise ValidationError(f"invalid message: {str(exc)[:300]}") from None


def _keyed_unions(schema: Any) -> Any:
    """A copy of a core schema whose role/type unions read the key in pydantic-core.

    `_role_tag` and `_part_tag` are Python calls, one per message and one per part; a
    string discriminator does the same lookup without leaving Rust. It knows only the
    known roles and part types (and the literal tag ``"unknown"``): anything else fails
    there, and `parse_messages` then asks the exact adapter.
    """
    if isinstance(schema, dict):
        copied = {key: _keyed_unions(value) for key, value in schema.items()}
        if copied.get("type") == "tagged-union":
            if copied["discriminator"] is _role_tag:
                copied["discriminator"] = "role"
            elif copied["discriminator"] is _part_tag:
                copied["discriminator"] = "type"
        return copied
    if isinstance(schema, list):
        return [_keyed_unions(value) for value in schema]
    return schema


@functools.cache
def _keyed_list_validator() -> SchemaValidator:
    """Built on first use (compiling it at import would slow down every `import mindstore`)."""
    return SchemaValidator(_keyed_unions(MESSAGE_LIST_ADAPTER.core_schema))


def parse_messages(data: list[Any]) -> list[AnyMessage]:
    """Validate a list of messages (stored or incoming); unknown roles and parts are kept.

    Two validators give the same objects: the keyed one (unions dispatched on the `role`
    and `type` keys, no Python call per message and part) accepts every list whose roles
    and part types are all known; any other list (an unknown role or part, invalid data)
    goes through the exact adapter, whose result or error is the answer. So invalid data
    raises exactly what it raised before, at the price of a second validation.
    """
    try:
        messages: list[AnyMessage] = _keyed_list_validator().validate_python(data)
        return messages
    except Exception:
        pass
    try:
        return MESSAGE_LIST_ADAPTER.validate_python(data)
    except Exception as exc:
        raise ValidationError(f"invalid message list: {exc}") from exc


def create_message_from_dict(data: dict[str, Any]) -> AnyMessage:
    """The Mind Map's factory: a known role gives its class; a missing or unknown role is an error.

    Use `parse_message` to accept unknown roles (the store does, when reading).
    """
    if not isinstance(data, dict):
        raise ValidationError(f"message data must be a dict, got {type(data).__name__}")
    role = data.get("role")
    if not role:
        raise ValidationError("message data is missing its 'role' field")
    cls = MESSAGE_CLASSES.get(role)
    if cls is None:
        raise ValidationError(f"unknown message role: {role!r}")
    try:
        return cls.model_validate(data)
    except Exception as exc:
        raise ValidationError(f"invalid {role} message: {exc}") from exc


def message_to_dict(message: AnyMessage) -> JSON:
    """The stored form of a message."""
    document: JSON = MESSAGE_ADAPTER.dump_python(message, mode="python", by_alias=True)
    return document
