"""Streaming into one assistant message: token deltas coalesced into parts (pure).

A model streams an answer as many small deltas. Storing each as a part (`add_text_part`)
would turn "Hel", "lo", " world" into three parts; here consecutive deltas of one kind
grow one part, and a write replaces that part's text with everything received so far:

* a part not stored yet is set whole, at the next free index of the message's content:
  ``$set messages.<i>.content.<j> = {type: text, text: ...}``;
* a stored part is patched in place, only the fields that changed:
  ``$set messages.<i>.content.<j>.text = <all text so far>`` (``.reasoning``,
  ``.finished_ts``, ``.signature`` for a reasoning part).

"Replace this part's text" is a `Patch` like any other: a path relative to the message,
guarded by the message id, applied under the task's version guard by the same engine as
every verb, so the header's `size_bytes` follows the message. MongoDB has no portable
string append, so a write carries the part's whole text: its cost grows with the part,
never with the message or the task.

`StreamState` is the writer's memory of what it stored and what is still pending;
`plan_stream_write` turns it into one `Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from mindstore.errors import InvalidTransition, ValidationError
from mindstore.model.base import now_ts, to_ms
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage, AssistantMessage
from mindstore.model.parts import ReasoningPart, TextPart
from mindstore.model.planner import DocTransform, Plan, Planner

StreamKind = Literal["text", "reasoning"]
TEXT_FIELD: dict[str, str] = {"text": "text", "reasoning": "reasoning"}
"""The field of each part kind that deltas grow."""


@dataclass
class StreamedPart:
    """One part a stream grows: where it is, what is stored, what is not yet."""

    kind: StreamKind
    index: int | None = None
    """Its index in the message's content; None until its first write places it."""
    stored: str = ""
    pending: list[str] = field(default_factory=list)
    started_ts: float | None = None
    finished_ts: float | None = None
    signature: str | None = None
    dirty: set[str] = field(default_factory=set)
    """Fields other than the text changed since the last write."""

    @property
    def text(self) -> str:
        return self.stored + "".join(self.pending)

    @property
    def needs_write(self) -> bool:
        return self.index is None or bool(self.pending) or bool(self.dirty)

    def part(self) -> TextPart | ReasoningPart:
        if self.kind == "text":
            return TextPart(text=self.text)
        return ReasoningPart(reasoning=self.text, signature=self.signature,
                             started_ts=self.started_ts, finished_ts=self.finished_ts)  # fmt: skip


@dataclass
class StreamState:
    """The parts one stream has opened in one message, oldest first."""

    parts: list[StreamedPart] = field(default_factory=list)

    @property
    def current(self) -> StreamedPart | None:
        return self.parts[-1] if self.parts else None

    def add(self, kind: StreamKind, delta: str, now: float | None = None) -> StreamedPart:
        """Record a delta: it grows the current part when that is of the same kind, else
        it opens a new part (closing a reasoning part it follows)."""
        current = self.current
        if current is None or current.kind != kind:
            if current is not None and current.kind == "reasoning" and current.finished_ts is None:
                current.finished_ts = to_ms(now) if now is not None else now_ts()
                current.dirty.add("finished_ts")
            current = StreamedPart(kind=kind)
            if kind == "reasoning":
                current.started_ts = to_ms(now) if now is not None else now_ts()
            self.parts.append(current)
        if delta:
            current.pending.append(delta)
        return current

    def sign(self, signature: str) -> None:
        """The current reasoning part's signature (providers send it at the end)."""
        current = self.current
        if current is None or current.kind != "reasoning":
            raise InvalidTransition(
                "a signature belongs to a reasoning part: stream reasoning first"
            )
        current.signature = signature
        current.dirty.add("signature")

    def close(self, now: float | None = None) -> None:
        """End the stream: an open reasoning part gets its `finished_ts`."""
        current = self.current
        if current is not None and current.kind == "reasoning" and current.finished_ts is None:
            current.finished_ts = to_ms(now) if now is not None else now_ts()
            current.dirty.add("finished_ts")

    @property
    def pending_bytes(self) -> int:
        return sum(
            len(delta.encode("utf-8", "surrogatepass")) for p in self.parts for delta in p.pending
        )

    @property
    def needs_write(self) -> bool:
        return any(part.needs_write for part in self.parts)

    @property
    def places_parts(self) -> bool:
        """A write now would append a part (it must know the message's current content)."""
        return any(part.index is None and part.needs_write for part in self.parts)

    def snapshot(self) -> StreamState:
        """What one write will carry: a copy, so deltas that arrive while it is in flight
        stay pending for the next write instead of being taken as written."""
        return StreamState(
            [
                replace(part, pending=list(part.pending), dirty=set(part.dirty))
                for part in self.parts
            ]
        )

    def committed(self, written: StreamState, placed: dict[int, int]) -> None:
        """`written` (a snapshot of this state) was applied: its text is stored, its new
        parts have an index; what arrived since stays pending."""
        for position, done in enumerate(written.parts):
            part = self.parts[position]
            if position in placed:
                part.index = placed[position]
            part.stored = done.text
            del part.pending[: len(done.pending)]
            part.dirty = {name for name in part.dirty if getattr(part, name) != getattr(done, name)}


def check_delta(delta: Any, name: str = "delta") -> str:
    if not isinstance(delta, str):
        raise ValidationError(f"{name} must be a string, got {type(delta).__name__}")
    try:
        delta.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{name} must encode as UTF-8 (no lone surrogates)") from None
    return delta


def check_streamable(message: AnyMessage) -> AssistantMessage:
    if not isinstance(message, AssistantMessage):
        role = getattr(message, "role", None)
        raise InvalidTransition(
            f"stream is not allowed on a {role} message (assistant messages only)"
        )
    return message


def plan_stream_write(
    header: TaskHeader,
    task_id: str,
    index: int,
    message: AnyMessage,
    state: StreamState,
    *,
    transform: DocTransform | None = None,
) -> tuple[Plan, AnyMessage, dict[int, int]]:
    """One write of everything the stream holds that the store does not: the plan, the
    message as it will be stored, and the content index given to each new part (keyed
    by its position in `state.parts`). `message` is the stored message (for a write that
    places parts: as of the state the write is pinned to, read or cached, so a part
    appended by someone else is never overwritten)."""
    old = check_streamable(message)
    new = old.model_copy(deep=True)
    planner = Planner(header, task_id, transform=transform)
    if index >= planner.base:
        raise ValidationError("cannot stream into a message appended in the same write")
    paths: list[tuple[str, Any]] = []
    placed: dict[int, int] = {}
    for position, part in enumerate(state.parts):
        if not part.needs_write:
            continue
        value = part.part()
        if part.index is None:
            slot = len(new.content)
            new.content.append(value)
            placed[position] = slot
            paths.append((f"content.{slot}", value))
            continue
        if part.index >= len(new.content):
            raise ValidationError(f"part {part.index} of message {old.id!r} is gone")
        new.content[part.index] = value
        fields = ({TEXT_FIELD[part.kind]} if part.pending else set()) | part.dirty
        for name in sorted(fields):
            paths.append((f"content.{part.index}.{name}", getattr(value, name)))
    if paths and new.status == "completed":
        new.status = "loading"  # as add_text_part: content arriving means the turn is open again
        paths.append(("status", "loading"))
    if paths:  # patches in the lean stored form, size_bytes following the message
        planner.patch_message(index, old, new, paths)
    return planner.finish(new), new, placed
