"""Message parts: the typed content blocks carried inside a message.

The Mind Map defines the core parts (text, image, file, reasoning, redacted thinking, tool call,
tool result, informational, compression, task config, task entry, task exit). The content
kinds that only the message-layer and agent-graph formats know (audio, thinking with
signature, video, document, data, annotation, error) are added here so one store can hold
conversations from any of those agent frameworks. The `Part` union dispatches on `type` with
a callable discriminator; an unknown `type` becomes an `UnknownPart` that serialises back
unchanged.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Discriminator, Field, Tag

from mindstore.model.base import JSON, Model, Timestamp, Verbatim


class MediaRef(Model):
    """Where media lives (the agent-graph format): a URL, a provider file id, or small inline
    base64."""

    kind: Literal["url", "file_id", "data"] = "url"
    url: str | None = None
    file_id: str | None = None
    data_base64: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    filename: str | None = None
    width: int | None = None
    height: int | None = None
    duration_ms: int | None = None
    page: int | None = None


class ObserverResult(Model):
    """Outcome of one observer watching a tool execution (the Mind Map)."""

    is_success: bool
    observer_name: str
    message: str | None = None
    data: JSON | None = None


class TextPart(Model):
    type: Literal["text"] = "text"
    text: str


class ImagePart(Model):
    """An image: inline base64 (the Mind Map) or a media reference (the agent-graph format)."""

    type: Literal["image"] = "image"
    image: str = ""
    mime_type: str | None = None
    media: MediaRef | None = None
    alt_text: str | None = None
    bbox: list[float] | None = None


class FilePart(Model):
    type: Literal["file"] = "file"
    data: str
    mime_type: str
    filename: str | None = None


class ReasoningPart(Model):
    type: Literal["reasoning"] = "reasoning"
    reasoning: str
    signature: str | None = None
    started_ts: Timestamp | None = None
    finished_ts: Timestamp | None = None


class RedactedThinkingPart(Model):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ThinkingPart(Model):
    """Anthropic-style extended thinking (the message-layer format); the signature must
    survive untouched."""

    type: Literal["thinking"] = "thinking"
    content: str = ""
    signature: str = ""


class ToolCallPart(Model):
    type: Literal["toolCall"] = "toolCall"
    tool_call_id: str
    tool_name: str
    args: JSON = Field(default_factory=dict)
    is_loading: bool = True
    is_approval_pending: bool = True
    kind: str | None = None


class ToolResultContent(Model):
    type: Literal["text", "image"] = "text"
    text: str | None = None
    image_data: str | None = None
    mime_type: str | None = None


class ToolResultPart(Model):
    """Result of a tool call (the Mind Map) plus the message-layer format's `terminate` and
    `metadata`."""

    type: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    result: Any = Field(default_factory=dict)
    observer_results: list[ObserverResult] = Field(default_factory=list)
    is_approved: bool = True
    is_error: bool = False
    error: str | None = None
    is_loading: bool = False
    has_feedback: bool = False
    tool_result_contents: list[ToolResultContent] = Field(default_factory=list)
    terminate: bool = False
    metadata: JSON = Field(default_factory=dict)


class InformationalPart(Model):
    type: Literal["informational"] = "informational"
    is_visible_ai: bool = False
    is_visible_ui: bool = False
    informational_type: str | None = None
    error_type: str | None = None
    details: str | None = None
    additional_data: JSON | list[JSON] | None = None


class CompressionPart(Model):
    type: Literal["compression"] = "compression"
    start_message_idx: int
    end_message_idx: int
    reason: str
    strategies: list[str] = Field(default_factory=list)
    compressed_message_ids: list[str] = Field(default_factory=list)
    kept_message_ids: list[str] = Field(default_factory=list)
    cache: JSON = Field(default_factory=dict)
    metadata: JSON | None = None


class CompressionStrategyType(str, Enum):
    """The strategies of the compression document."""

    tool_compression = "tool_compression"
    truncate_and_summarize = "truncate_and_summarize"
    compact_summarization = "compact_summarization"


class CompressionConfig(Model):
    """When and how a task level is compressed (the Mind Map and the compression document)."""

    enabled: bool = True
    token_limit: int = 200_000
    strategy: CompressionStrategyType = CompressionStrategyType.tool_compression
    keep_recent_messages: int = 10
    keep_first_messages: int = 1
    target_ratio: float = 0.5
    """truncate_and_summarize drops the oldest messages until the level is this share of
    `token_limit`."""
    stub_text: str = "[tool result compressed]"


class ToolMetadata(Model):
    """A tool the model may call; `is_task_entry` tools open a nested sub-task."""

    name: str
    description: str | None = None
    parameters: JSON = Field(default_factory=dict)
    is_task_entry: bool = False
    is_task_exit: bool = False
    requires_approval: bool | None = None


class TaskConfigPart(Model):
    type: Literal["taskconfig"] = "taskconfig"
    model_name: str
    max_tokens: int | None = None
    api_base: str | None = None
    dialect_name: str | None = None
    dialect_options: JSON | None = None
    user_agent_prompt: str | None = None
    user_prompt: str | None = None
    thinking_budget_tokens: int | None = None
    reasoning_effort: str | None = None
    tool_metadata: list[ToolMetadata] = Field(default_factory=list)
    enable_parallel_tools: bool = True
    enable_auto_tools: bool = False
    compression_config: CompressionConfig = Field(
        default_factory=lambda: CompressionConfig(enabled=True, token_limit=200_000)
    )
    enable_search: bool = False

    def task_entry_tool_names(self) -> list[str]:
        return [tool.name for tool in self.tool_metadata if tool.is_task_entry]


class TaskEntryPart(Model):
    type: Literal["taskentry"] = "taskentry"
    initial_task_config: TaskConfigPart
    initial_context: list[TextPart | ImagePart | InformationalPart] = Field(default_factory=list)
    # The open tool call this sub-task answers when it exits (None: none was found).
    trigger_call_id: str | None = None


class TaskExitPart(Model):
    type: Literal["taskexit"] = "taskexit"
    handoff_description: list[TextPart | ImagePart] = Field(default_factory=list)
    # The call this exit answered and the ToolMessage that answered it (None: nothing).
    tool_call_id: str | None = None
    answer_id: str | None = None


class AudioPart(Model):
    """Audio clips (the message-layer format: base64, `file:` paths or bytes; the agent-graph
    format: media ref)."""

    type: Literal["audio"] = "audio"
    audio: list[str | bytes] = Field(default_factory=list)
    mime_type: str | None = None
    media: MediaRef | None = None
    transcript: str | None = None
    sample_rate: int | None = None
    channels: int | None = None


class VideoPart(Model):
    type: Literal["video"] = "video"
    media: MediaRef
    thumbnail: MediaRef | None = None


class DocumentPart(Model):
    type: Literal["document"] = "document"
    media: MediaRef
    pages: list[int] | None = None
    excerpt: str | None = None


class DataPart(Model):
    type: Literal["data"] = "data"
    mime_type: str
    data_base64: str | None = None
    media: MediaRef | None = None


class AnnotationRef(Model):
    url: str | None = None
    file_id: str | None = None
    page: int | None = None
    index: int | None = None
    title: str | None = None


class AnnotationPart(Model):
    type: Literal["annotation"] = "annotation"
    kind: Literal["citation", "note"] = "note"
    refs: list[AnnotationRef] = Field(default_factory=list)
    spans: list[tuple[int, int]] | None = None


class ErrorPart(Model):
    type: Literal["error"] = "error"
    message: str
    code: str | None = None
    data: JSON | None = None


class UnknownPart(Verbatim):
    """A part whose `type` this version does not know; kept verbatim.

    Constructed from the raw dict (`UnknownPart.model_validate(raw)`); serialises back to
    exactly that dict, so a newer writer's data survives a read-modify cycle here.
    """

    what: ClassVar[str] = "a message part"

    @property
    def type(self) -> str | None:
        return self._raw_text("type")


KNOWN_PART_TYPES: dict[str, type[Model]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        TextPart,
        ImagePart,
        FilePart,
        ReasoningPart,
        RedactedThinkingPart,
        ThinkingPart,
        ToolCallPart,
        ToolResultPart,
        InformationalPart,
        CompressionPart,
        TaskConfigPart,
        TaskEntryPart,
        TaskExitPart,
        AudioPart,
        VideoPart,
        DocumentPart,
        DataPart,
        AnnotationPart,
        ErrorPart,
    )
}


_PART_TAGS: dict[str, str] = {kind: kind for kind in KNOWN_PART_TYPES}


def _part_tag(value: Any) -> str:
    """Route a part to its class by `type`; anything unrecognised goes to `UnknownPart`."""
    if type(value) is dict:
        kind = value.get("type")
    elif isinstance(value, UnknownPart):
        return "unknown"
    else:
        kind = getattr(value, "type", None)
    try:
        return _PART_TAGS.get(kind, "unknown")  # type: ignore[arg-type]
    except TypeError:  # an unhashable `type` value (list, dict): unknown
        return "unknown"


Part = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ImagePart, Tag("image")]
    | Annotated[FilePart, Tag("file")]
    | Annotated[ReasoningPart, Tag("reasoning")]
    | Annotated[RedactedThinkingPart, Tag("redacted_thinking")]
    | Annotated[ThinkingPart, Tag("thinking")]
    | Annotated[ToolCallPart, Tag("toolCall")]
    | Annotated[ToolResultPart, Tag("toolResult")]
    | Annotated[InformationalPart, Tag("informational")]
    | Annotated[CompressionPart, Tag("compression")]
    | Annotated[TaskConfigPart, Tag("taskconfig")]
    | Annotated[TaskEntryPart, Tag("taskentry")]
    | Annotated[TaskExitPart, Tag("taskexit")]
    | Annotated[AudioPart, Tag("audio")]
    | Annotated[VideoPart, Tag("video")]
    | Annotated[DocumentPart, Tag("document")]
    | Annotated[DataPart, Tag("data")]
    | Annotated[AnnotationPart, Tag("annotation")]
    | Annotated[ErrorPart, Tag("error")]
    | Annotated[UnknownPart, Tag("unknown")],
    Discriminator(_part_tag),
]
