"""The model window of a task level: exactly what a model must see, fitted to a budget (pure).

This module assembles and fits: what a model may see, the level a read returned
(`LevelRead`), its assembly in level order and its fitting to the budget, and how much a
read asks for. The result's type is `mindstore.compression.context_window` (re-exported
here), its request shapes `mindstore.compression.window_formats`.

`tasks.context(...)` reads a level in pieces (`LevelRead`: the level's start, its system
messages, its newest messages and counts of the rest, see `mindstore.pipelines.context`)
or, after a compression round, has it whole (`read_from_level`); both go through the
same functions here, so a window is the same whichever way it was read.

The rules, in order:

1. **Bookkeeping never reaches the model**: task configs, task entries and exits,
   compression markers, unknown roles, informational messages without a part marked
   `is_visible_ai`, and inside kept messages the informational parts only a UI shows.
2. **Pinned**: every system message of the level, the level's opening context (its
   leading setup messages; in a sub-task, the task description its entry wrote) and the
   checkpoint's summary are kept whatever the budget.
3. **Budget**: the rest is filled from the newest message backwards while it fits; the
   oldest message that only partly fits keeps the end of its text (the default
   manager's truncation). The stored history is never changed.
4. **Pairs**: a tool result whose call is not in the window, and a call whose result is
   not, are left out (an assistant message keeps its other parts), so a provider never
   sees half a pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.compression.checkpoint_view import DEFAULT_STUB_TEXT, stub_message, summary_message
from mindstore.compression.context_window import ContextWindow as ContextWindow  # re-export
from mindstore.compression.context_window import LeftOut as LeftOut  # re-export
from mindstore.compression.managers import truncated_border
from mindstore.compression.strategies import SETUP_ROLES, conversation
from mindstore.compression.tokens import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    TokenCounter,
)
from mindstore.compression.toolpairs import role_of
from mindstore.model.messages import AnyMessage, AssistantMessage, ToolMessage
from mindstore.model.parts import (
    InformationalPart,
    TaskConfigPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)

HEAD_READ = 6
"""Messages read from the level's start: its setup block (config, system prompt, entry
and the entry's description) fits in it; later system messages are read by role."""
MODEL_ROLES = frozenset({"system", "user", "assistant", "tool"})
STORED_OVERHEAD_BYTES = 120
"""About what a stored message costs beyond its content (id, timestamps, role, the part's
keys; the lean stored form leaves empty fields out): bytes that are not tokens."""
READ_MARGIN = 1.25
"""A read asks for this many times the messages the estimate says will fit."""


# -- what a model may see --------------------------------------------------------------


def model_visible(message: AnyMessage) -> bool:
    """A model role, or an informational message with a part marked `is_visible_ai`
    (the server's filter, `pipelines.context.model_visible_expr`, is the same test)."""
    role = role_of(message)
    if role in MODEL_ROLES:
        return True
    if role == "informational":
        return any(_visible_ai(part) for part in message.content)
    return False


def _visible_ai(part: Any) -> bool:
    if isinstance(part, UnknownPart):  # as stored: the server reads the raw field too
        return part.raw.get("is_visible_ai") is True
    return getattr(part, "is_visible_ai", False) is True


def ui_only(part: Any) -> bool:
    """A part only a UI shows: an informational part not marked `is_visible_ai`."""
    return isinstance(part, InformationalPart) and not part.is_visible_ai


def strip_ui_only(message: AnyMessage) -> tuple[AnyMessage | None, int]:
    """The message without its UI-only parts (None if nothing is left), and how many went."""
    content = getattr(message, "content", None)
    if not content:
        return message, 0
    kept = [part for part in content if not ui_only(part)]
    if len(kept) == len(content):
        return message, 0
    if not kept:
        return None, len(content)
    return message.model_copy(update={"content": kept}), len(content) - len(kept)


def pair_tool_calls(messages: Sequence[AnyMessage]) -> tuple[list[AnyMessage], list[str]]:
    """`messages` with every tool call answered in them and every result called in them.

    Unanswered calls leave their assistant message (which is dropped only if nothing else
    is left in it); results without their call leave their tool message (dropped when it
    holds nothing else). Returns the messages and the call ids left out, sorted."""
    issued = {p.tool_call_id for m in messages if isinstance(m, AssistantMessage)
              for p in m.content if isinstance(p, ToolCallPart)}  # fmt: skip
    answered = {p.tool_call_id for m in messages if isinstance(m, ToolMessage)
                for p in m.content if isinstance(p, ToolResultPart)}  # fmt: skip
    unpaired = (issued - answered) | (answered - issued)
    if not unpaired:
        return list(messages), []
    out: list[AnyMessage] = []
    for message in messages:
        if isinstance(message, (AssistantMessage, ToolMessage)):
            kind = ToolCallPart if isinstance(message, AssistantMessage) else ToolResultPart
            kept = [
                p
                for p in message.content
                if not (isinstance(p, kind) and p.tool_call_id in unpaired)
            ]
            if len(kept) != len(message.content):
                if not kept:
                    continue
                message = message.model_copy(update={"content": kept})
        out.append(message)
    return out, sorted(unpaired)


def model_view(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """What a model may see of `messages`, untrimmed: bookkeeping and UI-only parts out,
    tool calls and results paired (`tasks.context()` without `max_tokens` returns this
    of the level's view)."""
    kept = []
    for message in messages:
        if model_visible(message):
            stripped, _count = strip_ui_only(message)
            if stripped is not None:
                kept.append(stripped)
    return pair_tool_calls(kept)[0]


# -- what a read returned ----------------------------------------------------------------


@dataclass(frozen=True)
class KnownCounts:
    """What a window read learnt of a paged level's pages (`LevelRead.paged_level`): each
    page's view and visible counts, and the task version they hold for. A widening read
    at that version slices only the pages it needs instead of counting them all again."""

    version: int
    pages: tuple[dict[str, Any], ...]


@dataclass
class LevelRead:
    """The part of a level one window read holds (decoded), or a whole level.

    `head` is the start of the level's view (bookkeeping included), `systems` the system
    messages after it, `tail` the newest visible messages (`visible_count` in all;
    visible = what a model may see, plus the summary's anchor). Stubbed tool results
    (`stubbed_ids`) are still to be stubbed; the checkpoint carries no id lists.
    """

    scope: str | None
    head: list[AnyMessage]
    systems: list[AnyMessage]
    tail: list[AnyMessage]
    level_count: int
    view_count: int
    visible_count: int
    model_count: int = 0
    """Messages of the view a model may see (`visible_count` without a hidden anchor)."""
    checkpoint: CompressionCheckpoint | None = None
    checkpoint_message_id: str | None = None
    stubbed_ids: set[str] = field(default_factory=set)
    stubbed_count: int = 0
    """Tool results the checkpoint stubbed in the whole level."""
    config: TaskConfigPart | None = None
    read_bytes: int = 0
    """Stored bytes of the messages read (for the estimate of what was not)."""
    paged: bool = False
    """Read from a task with sealed pages (its widening reads go per page too)."""
    paged_level: KnownCounts | None = None
    """The paged reader's per-page counts (`compression.paged_level_read`): a widening
    read of the same snapshot reuses them instead of reading them again."""

    @property
    def anchor(self) -> str | None:
        return self.checkpoint.summary_after_id if self.checkpoint is not None else None

    def in_visible(self, message: AnyMessage) -> bool:
        return model_visible(message) or (self.anchor is not None and message.id == self.anchor)

    @property
    def head_visible(self) -> int:
        return sum(1 for m in self.head if self.in_visible(m))

    @property
    def tail_start(self) -> int:
        """Position, among the level's visible messages, of the first one in `tail`."""
        return self.visible_count - len(self.tail)

    @property
    def complete(self) -> bool:
        """True when head and tail meet: nothing visible is left unread."""
        return self.tail_start <= self.head_visible

    def widen(self, older: Sequence[AnyMessage], stubbed: set[str]) -> None:
        """Add visible messages read just before `tail`."""
        self.tail = [*older, *self.tail]
        self.stubbed_ids |= stubbed


def read_from_level(
    level: Sequence[AnyMessage],
    scope: str | None,
    checkpoint: CompressionCheckpoint | None,
    config: TaskConfigPart | None = None,
    head: int = HEAD_READ,
) -> LevelRead:
    """A whole in-memory level as a `LevelRead` (the same filters as the server's)."""
    conv = conversation(level)
    dropped = set(checkpoint.dropped_ids) if checkpoint is not None else set()
    stubbed = set(checkpoint.stubbed_ids) if checkpoint is not None else set()
    view = [m for m in conv if m.id not in dropped]
    read = LevelRead(
        scope=scope,
        head=view[:head],
        systems=[m for m in view[head:] if role_of(m) == "system"],
        tail=[],
        level_count=len(conv),
        view_count=len(view),
        visible_count=0,
        checkpoint=checkpoint,
        stubbed_ids=stubbed & {m.id for m in view},
        config=config,
    )
    read.tail = [m for m in view if read.in_visible(m)]
    read.visible_count = len(read.tail)
    read.model_count = sum(1 for m in view if model_visible(m))
    read.stubbed_count = len(read.stubbed_ids)
    return read


# -- assembling and fitting ----------------------------------------------------------------


@dataclass
class Assembled:
    """A read put in level order: `items` (what a model may see, UI-only parts stripped),
    which of them are pinned, and where the unread gap is (`gap`: an index into `items`,
    None when the read is complete)."""

    items: list[AnyMessage]
    pinned: set[int]
    gap: int | None
    summary_id: str | None
    emptied: int
    """Messages read that held nothing but UI-only parts."""
    ui_parts: int


def _setup_block(
    sequence: Sequence[AnyMessage], sub_level: bool, summary_id: str | None
) -> set[str]:
    """Ids of the level's opening context: its leading setup messages, and in a sub-task
    the hidden user message its entry wrote (the task's description)."""
    ids: set[str] = set()
    for message in sequence:
        role = role_of(message)
        if message.id == summary_id:
            continue
        if role in SETUP_ROLES or (
            sub_level and role == "user" and getattr(message, "is_ui_hidden", False)
        ):
            ids.add(message.id)
            continue
        break
    return ids


def setup_may_go_on(read: LevelRead, head: int) -> bool:
    """Whether the level's opening context may continue past a partial read's head: the
    head is full (`head` messages) and every one of them is a setup message, so the next
    ones (an informational message after three system prompts) may be setup too and would
    be pinned by a whole read. The caller reads a longer head, so the pins do not depend
    on how much was read."""
    if read.complete or len(read.head) < head:
        return False
    return len(_setup_block(read.head, read.scope is not None, None)) == len(read.head)


def _place_summary(
    read: LevelRead, sequence: list[AnyMessage], gap: int | None
) -> tuple[str | None, int | None]:
    """Insert the checkpoint's summary after its anchor (as `apply_checkpoint` does); an
    anchor in the unread gap puts it at the gap. Returns its id and the moved gap."""
    checkpoint = read.checkpoint
    if checkpoint is None or checkpoint.summary is None or read.view_count >= read.level_count:
        return None, gap
    anchor = checkpoint.summary_after_id
    ids = [m.id for m in sequence]
    if anchor is None:
        position = 0
    elif anchor in ids:
        position = ids.index(anchor) + 1
    else:
        position = gap if gap is not None else 0
    like = sequence[position - 1] if position else (sequence[0] if sequence else None)
    summary = summary_message(checkpoint, like)
    sequence.insert(position, summary)
    if gap is not None and position <= gap:
        gap += 1
    return summary.id, gap


def assemble(read: LevelRead, stub_text: str = DEFAULT_STUB_TEXT) -> Assembled:
    """The read in level order with the summary in place, bookkeeping out, pins marked."""

    def stub(message: AnyMessage) -> AnyMessage:
        return stub_message(message, stub_text) if message.id in read.stubbed_ids else message

    head = [stub(m) for m in read.head]
    tail = [stub(m) for m in read.tail]
    gap: int | None = None
    if read.complete:
        sequence = head + tail[max(0, read.head_visible - read.tail_start) :]
    else:
        in_tail = {m.id for m in tail}
        gap = len(head)
        sequence = head + [stub(m) for m in read.systems if m.id not in in_tail] + tail
    summary_id, gap = _place_summary(read, sequence, gap)
    setup = _setup_block(sequence, read.scope is not None, summary_id)
    items: list[AnyMessage] = []
    pinned: set[int] = set()
    emptied = ui_parts = 0
    item_gap = None
    for index, message in enumerate(sequence):
        if index == gap:
            item_gap = len(items)
        if not model_visible(message):
            continue
        kept, stripped = strip_ui_only(message)
        ui_parts += stripped
        if kept is None:
            emptied += 1
            continue
        if message.id in setup or message.id == summary_id or role_of(message) == "system":
            pinned.add(len(items))
        items.append(kept)
    if gap is not None and item_gap is None:
        item_gap = len(items)
    return Assembled(items, pinned, item_gap, summary_id, emptied, ui_parts)


@dataclass
class Fitted:
    messages: list[AnyMessage]
    truncated: str | None
    short: bool
    """The read ran out before the budget did while older messages are still unread."""
    notes: list[str]


def fit(assembled: Assembled, budget: int | None, counter: TokenCounter) -> Fitted:
    """Pinned messages, then the newest others that fit `budget` (all of them when None),
    the oldest kept one cut to its text's end if it only partly fits."""
    items, gap = assembled.items, assembled.gap
    notes: list[str] = []
    if budget is None:
        return Fitted(list(items), None, gap is not None, notes)
    keep = set(assembled.pinned)
    remaining = budget - sum(counter(items[i]) for i in keep)
    summary = next((i for i in keep if items[i].id == assembled.summary_id), None)
    if remaining < 0 and summary is not None:
        keep.discard(summary)
        remaining += counter(items[summary])
        notes.append(
            "the checkpoint's summary did not fit max_tokens beside the pinned messages: left out"
        )
    if remaining < 0:
        notes.append("the system prompts and the level's opening context alone pass max_tokens")
        remaining = 0
    candidates = [
        i for i in range(len(items)) if i not in assembled.pinned and (gap is None or i >= gap)
    ]
    truncated: str | None = None
    replaced: dict[int, AnyMessage] = {}
    short = gap is not None
    for index in reversed(candidates):
        cost = counter(items[index])
        if cost <= remaining:
            keep.add(index)
            remaining -= cost
            continue
        short = False
        border = truncated_border(items[index], remaining, counter)
        if border is not None:
            keep.add(index)
            replaced[index] = border
            truncated = items[index].id
        break
    if short and remaining <= 0:
        short = False
    messages = [replaced.get(i, items[i]) for i in range(len(items)) if i in keep]
    return Fitted(messages, truncated, short, notes)


# -- sizing reads ---------------------------------------------------------------------------


def tokens_per_stored_byte(tokens: int, stored_bytes: int) -> float:
    """Tokens per stored byte of what was read; never below the default estimate's
    (a byte of text is at most about a quarter of a token for it)."""
    observed = tokens / stored_bytes if stored_bytes > 0 else 0.0
    return max(observed, 1 / CHARS_PER_TOKEN)


def messages_for(budget: int, average_bytes: float) -> int:
    """How many messages of `average_bytes` stored bytes fill `budget` tokens, with margin."""
    per_message = (
        max((average_bytes - STORED_OVERHEAD_BYTES) / CHARS_PER_TOKEN, 0) + MESSAGE_OVERHEAD_TOKENS
    )
    return max(1, math.ceil(budget / per_message * READ_MARGIN) + 2)


def messages_to_add(missing_tokens: int, read_tokens: int, read_messages: int) -> int:
    """How many more messages to read when a read fell `missing_tokens` short, sized from
    the tokens per message of what was read."""
    per_message = (
        max(read_tokens / read_messages, 1.0) if read_messages else float(MESSAGE_OVERHEAD_TOKENS)
    )
    return max(1, math.ceil(missing_tokens / per_message * READ_MARGIN) + 2)
