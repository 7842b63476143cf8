"""Streaming into one assistant message: token deltas coalesced into parts (pure).

A model streams an answer as many small deltas. Storing each as a part (`add_text_part`)
would turn "Hel", "lo", " world" into three parts; here consecutive deltas of one kind
grow one part, and each write sends only what arrived since the last one:

* a part not stored yet is set whole, at the next free index of the message's content:
  ``$set messages.<i>.content.<j> = {type: text, text: ...}``;
* a stored part gets the new text appended as one chunk:
  ``$push messages.<i>.content.<j>.§more = <the deltas since the last write>``, and the
  filter asks that the chunks stored so far are exactly the ones this stream wrote
  (``{$exists: false}`` before the first, ``{$size: n}`` after ``n``): a write retried
  after its reply was lost can never append its chunk twice;
* other fields that changed (``.finished_ts``, ``.signature`` of a reasoning part) are set.

Readers join the chunks to the text field (`model.stored_read`), so every read (get,
load, tail, watch, context windows, formats, backups) sees the whole text at any moment;
the chunks stay in the stored form (joining them in the store would send the text again,
and MongoDB has no portable string append). So the bytes a streamed turn sends are its
text once plus a bounded overhead per write, whatever the answer's length.

A write sets the part's whole text instead (a *fold*: ``$set ...text``, the chunks
``$unset``) where a chunk cannot be pushed: into a sealed message (its changes are
`pending` entries that set paths, docs/write-paths.md), when the chunk would not be
stored as it is (it begins with ``mindstore:``, so it is stored escaped, or it is at or
above the payload threshold, so it is offloaded), or when the part's first text was
offloaded (a first write of 256 KiB or more).

Every write is a `Plan` applied under the task's version guard by the engine every verb
uses, with the header's `size_bytes` following the stored form exactly (a chunk adds its
BSON element). A chunk's stored form comes from the write transform, asked for the chunk
list with the chunk at its index: under a keyring that is a ciphertext bound to that
index (`mindstore.crypto.fields`), pushed as it is and counted as sealed. `StreamState`
is the writer's memory of what it stored and what is still pending; `plan_stream_write`
turns it into one `Plan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from mindstore.errors import InvalidTransition, ValidationError
from mindstore.model.base import now_ts, to_ms
from mindstore.model.header import TaskHeader
from mindstore.model.lean_form import ABSENT
from mindstore.model.messages import AnyMessage, AssistantMessage
from mindstore.model.parts import ReasoningPart, TextPart
from mindstore.model.plans import DocTransform, Patch, Plan, Planner
from mindstore.model.storage_form import CHUNKS_KEY, element_size, value_size
from mindstore.payloads import RESERVED_PREFIX

StreamKind = Literal["text", "reasoning"]
TEXT_FIELD: dict[str, str] = {"text": "text", "reasoning": "reasoning"}
"""The field of each part kind that deltas grow."""


@dataclass
class StreamedPart:
    """One part a stream grows: where it is, what is stored, what is not yet."""

    kind: StreamKind
    index: int | None = None
    """Its index in the message's content; None until its first write places it."""
    base: str = ""
    """The text stored in the part's text field (set when placed or folded)."""
    chunks: list[str] = field(default_factory=list)
    """The chunks pushed after it (`CHUNKS_KEY`), in order."""
    pending: list[str] = field(default_factory=list)
    started_ts: float | None = None
    finished_ts: float | None = None
    signature: str | None = None
    dirty: set[str] = field(default_factory=set)
    """Fields other than the text changed since the last write."""

    @property
    def stored(self) -> str:
        """The part's text as stored (its text field and its chunks, joined)."""
        return self.base + "".join(self.chunks)

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


@dataclass(frozen=True)
class PartWrite:
    """What one write does to one part: `placed` it whole at `index`, `pushed` `chunk`
    onto it, `folded` its whole text into its text field, or set other `fields` only."""

    index: int
    how: Literal["placed", "pushed", "folded", "fields"]
    chunk: str = ""


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
                replace(
                    part,
                    chunks=list(part.chunks),
                    pending=list(part.pending),
                    dirty=set(part.dirty),
                )
                for part in self.parts
            ]
        )

    def committed(self, written: StreamState, writes: dict[int, PartWrite]) -> None:
        """`written` (a snapshot of this state) was applied as `writes` (by position in
        `parts`): its text is stored, its new parts have an index; what arrived since
        stays pending."""
        for position, done in enumerate(written.parts):
            part = self.parts[position]
            write = writes.get(position)
            if write is not None:
                if write.how in ("placed", "folded"):
                    part.index, part.base, part.chunks = write.index, done.text, []
                elif write.how == "pushed":
                    part.chunks.append(write.chunk)
            del part.pending[: len(done.pending)]
            part.dirty = {name for name in part.dirty if getattr(part, name) != getattr(done, name)}

    def landed(self, written: StreamState, writes: dict[int, PartWrite], message: Any) -> bool:
        """Did the write of `written` as `writes` reach the store, judging by `message`
        as read now (caller form)? It did when every part it changed holds the text it
        wrote (a chunk is never empty, so a pushed part's text changes); a write of other
        fields only is taken as not landed (setting them again changes nothing)."""
        content = getattr(message, "content", None)
        if not isinstance(content, list):
            return False
        changed = [(written.parts[p], w) for p, w in writes.items() if w.how != "fields"]
        for part, write in changed:
            if write.index >= len(content):
                return False
            stored = getattr(content[write.index], TEXT_FIELD[part.kind], None)
            if getattr(content[write.index], "type", None) != part.kind or stored != part.text:
                return False
        return bool(changed)


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


def stays_inline(text: str, limit: int | None) -> bool:
    """A string the write transform keeps in the document (below `limit`, the payload
    threshold): a part's first text may be pushed onto only then (readers join before a
    payload could be put in its place). It may be escaped: the escape is a prefix, which
    readers remove before joining, and so does every caller form of a planned message."""
    return limit is not None and len(text.encode("utf-8")) < limit


def stored_as_is(text: str, limit: int | None) -> bool:
    """A string the write transform stores unchanged: inline and not escaped (it does not
    begin with ``mindstore:``). Only such a chunk is pushed: an escape in the middle of a
    joined text would stay in it."""
    return stays_inline(text, limit) and not text.startswith(RESERVED_PREFIX)


def _text_size(measure: DocTransform | None, message_id: str, index: int, name: str,
               text: str) -> int:  # fmt: skip
    """Bytes a part's text field takes as stored (escaped or a payload marker)."""
    if measure is None:
        return value_size(text)
    slot: dict[str, Any] = {name: text}
    document = measure({"id": message_id, "content": [None] * index + [slot]})
    return value_size(document["content"][index][name])


def plan_stream_write(
    header: TaskHeader,
    task_id: str,
    index: int,
    message: AnyMessage,
    state: StreamState,
    *,
    transform: DocTransform | None = None,
    push_limit: int | None = None,
    measure: DocTransform | None = None,
) -> tuple[Plan, AnyMessage, dict[int, PartWrite]]:
    """One write of everything the stream holds that the store does not: the plan, the
    message as it will be stored (whole texts), and what it does to each part (keyed by
    its position in `state.parts`). `message` is the stored message (for a write that
    places parts: as of the state the write is pinned to, read or cached, so a part
    appended by someone else is never overwritten).

    `push_limit`: the payload threshold; chunks are pushed only below it (None: never,
    every write folds the whole text, as streams did before chunks). `measure`: the write
    transform without side effects, to size a folded text as stored (defaults to
    `transform`).
    """
    old = check_streamable(message)
    new = old.model_copy(deep=True)
    sizing = old.model_copy(deep=True)  # `new` with grown texts left as they were
    planner = Planner(header, task_id, transform=transform)
    if index >= planner.base:
        raise ValidationError("cannot stream into a message appended in the same write")
    measure = measure if measure is not None else transform
    sealed = index < header.sealed
    paths: list[tuple[str, Any]] = []
    writes: dict[int, PartWrite] = {}
    texts: list[tuple[StreamedPart, int]] = []  # stored parts whose text grows
    for position, part in enumerate(state.parts):
        if not part.needs_write:
            continue
        value = part.part()
        if part.index is None:
            slot = len(new.content)
            new.content.append(value)
            sizing.content.append(value)
            writes[position] = PartWrite(slot, "placed")
            paths.append((f"content.{slot}", value))
            continue
        if part.index >= len(new.content):
            raise ValidationError(f"part {part.index} of message {old.id!r} is gone")
        new.content[part.index] = value
        name = TEXT_FIELD[part.kind]
        kept = getattr(sizing.content[part.index], name, "")
        sizing.content[part.index] = value.model_copy(update={name: kept})
        writes[position] = PartWrite(part.index, "fields")
        if part.pending:
            texts.append((part, position))
        for name in sorted(part.dirty):
            paths.append((f"content.{part.index}.{name}", getattr(value, name)))
    if (paths or texts) and new.status == "completed":
        new.status = sizing.status = "loading"  # as add_text_part: the turn is open again
        paths.append(("status", "loading"))
    if paths or texts:  # patches in the lean stored form, size_bytes following the message
        planner.patch_message(index, old, sizing, paths)
    for part, position in texts:
        assert part.index is not None
        writes[position] = _grow(planner, index, old.id, part, sealed, push_limit, measure)
    return planner.finish(new), new, writes


def _grow(planner: Planner, index: int, message_id: str, part: StreamedPart, sealed: bool,
          push_limit: int | None, measure: DocTransform | None) -> PartWrite:  # fmt: skip
    """The patch that appends a part's pending text: one chunk pushed, guarded by the
    chunks stored so far, or the whole text folded into its field (see the module doc)."""
    assert part.index is not None
    chunk = "".join(part.pending)
    at = f"content.{part.index}"
    count = len(part.chunks)
    if not sealed and stays_inline(part.base, push_limit) and stored_as_is(chunk, push_limit):
        stored = _stored_chunks(measure, message_id, part.index, [*([None] * count), chunk])
        guard = {"$size": count} if count else {"$exists": False}
        planner.patches.append(Patch(index, message_id, f"{at}.{CHUNKS_KEY}", chunk,
                                     stored=stored[count], push=True, guard=guard))  # fmt: skip
        grown = (
            element_size(str(count), stored[count]) if count else element_size(CHUNKS_KEY, stored)
        )
        planner.resize(index, grown)
        return PartWrite(part.index, "pushed", chunk)
    name = TEXT_FIELD[part.kind]
    whole = part.text
    planner.patches.append(Patch(index, message_id, f"{at}.{name}", whole))
    change = _text_size(measure, message_id, part.index, name, whole) - _text_size(
        measure, message_id, part.index, name, part.base
    )
    if part.chunks:
        planner.patches.append(Patch(index, message_id, f"{at}.{CHUNKS_KEY}", None, ABSENT))
        change -= element_size(
            CHUNKS_KEY, _stored_chunks(measure, message_id, part.index, part.chunks)
        )
    planner.resize(index, change)
    return PartWrite(part.index, "folded")


def _stored_chunks(transform: DocTransform | None, message_id: str, index: int,
                   chunks: Sequence[str | None]) -> list[Any]:  # fmt: skip
    """A part's chunk list as the write transform stores it (under a keyring: each chunk
    sealed, bound to its index, so `size_bytes` counts the ciphertexts; None stays None)."""
    if transform is None:
        return list(chunks)
    slot: dict[str, Any] = {CHUNKS_KEY: list(chunks)}
    document = transform({"id": message_id, "content": [None] * index + [slot]})
    stored: list[Any] = document["content"][index][CHUNKS_KEY]
    return stored
