"""`tasks.context(...)`: the messages a model must see for a task's current level.

What goes in a window and what stays out is decided in `mindstore.compression.window`;
this module reads what a window needs and no more, and compresses when the level
passes its limit, once per need.

A call without compression to do costs at most three round trips:

1. the task header (`seq`, `size_bytes`, the level, where its config is);
2. one pipeline (`pipelines.context.context_window_pipeline`): the level's first
   messages (system prompt, config, entry and its description), its later system
   messages, its newest visible messages, as many as the header's average message size
   says fill `max_tokens` (with margin), the latest checkpoint and the counts of the rest;
3. only if those fell short of the budget: the messages just before them, sized from
   what was read (again, in the rare case of very uneven message sizes).

Without `max_tokens` the second read takes the whole visible level. Auto-compression
(the level's `CompressionConfig` enabled and the view past `token_limit`) reads the
whole level once, runs the strategy (or a chain of them, `strategy=[...]`: each next
one runs only while the level is still over the limit) and appends one checkpoint that
records what was tried and the tokens before and after (`mindstore.compression.outcome`).
The next calls reuse it: they count the level from the recorded tokens plus the messages
added since, and after a round that could not reach the limit they wait for the level to
grow by `keep_recent_messages` before trying again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mindstore.compression.base import (
    AnyCompressionConfig,
    CompressionStrategy,
    LevelSnapshot,
    strategy_name,
)
from mindstore.compression.checkpoint import (
    ROUND_KEY,
    SPAN_KEY,
    CompressionCheckpoint,
    checkpoints_in,
    merge_round,
)
from mindstore.compression.checkpoint_view import DEFAULT_STUB_TEXT
from mindstore.compression.compressor import REASON
from mindstore.compression.context_window import ContextWindow, LeftOut
from mindstore.compression.level_read import read_level_range, read_level_window
from mindstore.compression.outcome import (
    OUTCOME_KEY,
    Attempt,
    CompressionOutcome,
    carried_over,
    compression_due,
    marker,
    outcome_of,
    retry_after,
    without_id_lists,
)
from mindstore.compression.registry import StrategyArgument, resolve_strategy
from mindstore.compression.strategies import conversation
from mindstore.compression.summarizer import Summarizer
from mindstore.compression.tokens import TokenCounter, count_tokens, estimate_tokens
from mindstore.compression.window import (
    HEAD_READ,
    Assembled,
    LevelRead,
    assemble,
    fit,
    messages_for,
    messages_to_add,
    pair_tool_calls,
    read_from_level,
    setup_may_go_on,
    tokens_per_stored_byte,
)
from mindstore.errors import NotFound, ValidationError
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import CompressionConfig
from mindstore.validation import check_bool, check_int, check_optional_int

if TYPE_CHECKING:
    from mindstore.repositories.tasks import TaskRepository

__all__ = ["ContextWindow", "LeftOut", "build_context"]

MAX_READ = 2**31 - 1
StrategyChain = list[CompressionStrategy]


def _chain(
    strategy: Any,
    config: AnyCompressionConfig | None,
    summarizer: Summarizer | None,
    counter: TokenCounter,
) -> StrategyChain:
    """The strategies to try, in order: one, or a list handed over while still over the limit."""
    if isinstance(strategy, (list, tuple)):
        if not strategy:
            raise ValidationError("strategy: an empty list names no strategy")
        return [
            resolve_strategy(s, config, summarizer=summarizer, token_counter=counter)
            for s in strategy
        ]
    return [resolve_strategy(strategy, config, summarizer=summarizer, token_counter=counter)]


async def _level_config(
    tasks: TaskRepository, task_id: str, header: TaskHeader, read: LevelRead
) -> CompressionConfig:
    """The current level's compression config (defaults without a task config)."""
    if read.config is not None:
        return read.config.compression_config
    if header.current_config_index() is None:
        return CompressionConfig()
    try:  # the config was not where a window read looks (an unusual history): read it
        return (await tasks.current_task_config(task_id)).compression_config
    except NotFound:
        return CompressionConfig()


def _tokens(assembled: Assembled, counter: TokenCounter) -> list[int]:
    return [counter(message) for message in assembled.items]


def _finish(
    read: LevelRead,
    assembled: Assembled,
    budget: int | None,
    counter: TokenCounter,
    scope: str | None,
    notes: list[str],
) -> ContextWindow:
    fitted = fit(assembled, budget, counter)
    messages, unpaired = pair_tool_calls(fitted.messages)
    from_level = sum(1 for m in fitted.messages if m.id != assembled.summary_id)
    left_out = LeftOut(
        bookkeeping=read.view_count - read.model_count + assembled.emptied,
        compressed=read.level_count - read.view_count,
        stubbed=read.stubbed_count,
        trimmed=max(read.model_count - assembled.emptied - from_level, 0),
        ui_parts=assembled.ui_parts,
        unpaired=tuple(unpaired),
        truncated=fitted.truncated,
    )
    return ContextWindow(
        messages=messages,
        tokens=count_tokens(messages, counter),
        checkpoint=without_id_lists(read.checkpoint),
        trimmed=left_out.trimmed > 0 or fitted.truncated is not None,
        scope=scope,
        notes=[*notes, *fitted.notes],
        left_out=left_out,
    )


async def build_context(
    tasks: TaskRepository,
    task_id: str,
    *,
    max_tokens: int | None = None,
    strategy: StrategyArgument | Sequence[StrategyArgument] = None,
    summarizer: Summarizer | None = None,
    token_counter: TokenCounter = estimate_tokens,
    auto_compress: bool = True,
    safety_buffer: int = 0,
) -> ContextWindow:
    """The model window of the task's current level (see the module docstring)."""
    check_optional_int(max_tokens, "max_tokens", minimum=1)
    check_int(safety_buffer, "safety_buffer")
    check_bool(auto_compress, "auto_compress")
    if not callable(token_counter):
        raise ValidationError(f"token_counter must be callable, got {type(token_counter).__name__}")
    chain = _chain(strategy, None, summarizer, token_counter) if strategy is not None else None
    budget = None if max_tokens is None else max(max_tokens - safety_buffer, 0)

    header = await tasks.port.scope.scope_header(task_id)
    scope = header.current_scope
    wanted = (
        MAX_READ if budget is None else messages_for(budget, header.size_bytes / max(header.seq, 1))
    )
    head = HEAD_READ
    read = await read_level_window(tasks.port, task_id, header, head=head, tail=wanted)
    while setup_may_go_on(read, head):  # a long opening context: read it whole
        head *= 2
        read = await read_level_window(tasks.port, task_id, header, head=head, tail=wanted)
    config = await _level_config(tasks, task_id, header, read)
    stub_text = getattr(config, "stub_text", None) or DEFAULT_STUB_TEXT
    assembled = assemble(read, stub_text)
    notes: list[str] = []

    if auto_compress and config.enabled:
        tokens = _tokens(assembled, token_counter)
        read_tokens = sum(tokens)
        gap = assembled.gap if assembled.gap is not None else len(tokens)
        due = compression_due(
            token_limit=config.token_limit,
            outcome=outcome_of(read.checkpoint),
            visible_count=read.visible_count,
            complete_tokens=read_tokens if read.complete else None,
            newest_tokens=tokens[gap:],
            read_tokens=read_tokens,
            bound=read_tokens
            + max(header.size_bytes - read.read_bytes, 0)
            * tokens_per_stored_byte(read_tokens, read.read_bytes),
        )
        if due.note:
            notes.append(due.note)
        if due.compress is not False:
            strategies = (
                chain if chain is not None else _chain(None, config, summarizer, token_counter)
            )
            return await _compress_and_build(
                tasks, task_id, header, config, strategies, token_counter, budget, stub_text, notes
            )

    read, assembled = await _widened(
        tasks, task_id, read, assembled, budget, token_counter, stub_text
    )
    return _finish(read, assembled, budget, token_counter, scope, notes)


async def _widened(
    tasks: TaskRepository,
    task_id: str,
    read: LevelRead,
    assembled: Assembled,
    budget: int | None,
    counter: TokenCounter,
    stub_text: str,
) -> tuple[LevelRead, Assembled]:
    """Read older visible messages until the budget is filled or the level is read whole."""
    while budget is not None and not read.complete:
        fitted = fit(assembled, budget, counter)
        if not fitted.short:
            break
        missing = max(budget - count_tokens(fitted.messages, counter), 1)
        tail_items = (
            assembled.items[assembled.gap :] if assembled.gap is not None else assembled.items
        )
        end = read.tail_start
        start = max(
            read.head_visible,
            end - messages_to_add(missing, count_tokens(tail_items, counter), len(tail_items)),
        )
        mark_id, _count, older, stubbed = await read_level_range(
            tasks.port,
            task_id,
            read.scope,
            start,
            end - start,
            paged=read.paged,
            paged_level=read.paged_level,
        )
        if mark_id != read.checkpoint_message_id:  # a compression landed in between: start over
            header = await tasks.port.scope.scope_header(task_id)
            read = await read_level_window(
                tasks.port, task_id, header, head=HEAD_READ, tail=MAX_READ
            )
            return read, assemble(read, stub_text)
        if not older:  # nothing more to read (cannot happen while the checkpoint stays)
            break
        read.widen(older, stubbed)
        assembled = assemble(read, stub_text)
    return read, assembled


async def _compress_and_build(
    tasks: TaskRepository,
    task_id: str,
    header: TaskHeader,
    config: CompressionConfig,
    chain: StrategyChain,
    counter: TokenCounter,
    budget: int | None,
    stub_text: str,
    notes: list[str],
) -> ContextWindow:
    """Read the whole level, compress it if it is over its limit, build the window from
    the level in memory (no further read)."""
    scope = header.current_scope
    level = await tasks.level_messages(task_id, scope)
    found = checkpoints_in(level)
    latest = found[-1] if found else None
    read = read_from_level(level, scope, latest)
    before = sum(_tokens(assemble(read, stub_text), counter))
    due = compression_due(
        token_limit=config.token_limit,
        outcome=outcome_of(latest),
        visible_count=read.visible_count,
        complete_tokens=before,
        newest_tokens=[],
        read_tokens=before,
        bound=before,
    )
    if not due.compress:
        if due.note and due.note not in notes:
            notes.append(due.note)
        return _finish(read, assemble(read, stub_text), budget, counter, scope, notes)
    start = header.scope_stack[-1].index if header.scope_stack else 0
    final, changed, outcome = await _rounds(
        task_id, level, scope, (start, None), latest, config, chain, counter, stub_text, before
    )
    strategies = [attempt.strategy for attempt in outcome.tried]
    await tasks.add_compression_message(task_id, **_marker_args(final, strategies))
    if not outcome.reached:
        notes.append(outcome.note())
    read = read_from_level(level, scope, final)
    window = _finish(read, assemble(read, stub_text), budget, counter, scope, notes)
    window.compressed_now = changed
    return window


async def _rounds(
    task_id: str,
    level: list[AnyMessage],
    scope: str | None,
    boundaries: tuple[int | None, int | None],
    latest: CompressionCheckpoint | None,
    config: AnyCompressionConfig,
    chain: StrategyChain,
    counter: TokenCounter,
    stub_text: str,
    before: int,
) -> tuple[CompressionCheckpoint, bool, CompressionOutcome]:
    """Run the chain on the level in memory; the checkpoint to append (with its outcome)."""
    conv = conversation(level)
    current, working, tokens, changed = latest, list(level), before, False
    attempts: list[Attempt] = []
    for strategy in chain:
        name = strategy_name(strategy.strategy_type)
        candidate = CompressionCheckpoint(checkpoint_id=conv[-1].id if conv else "")
        await strategy.compress(LevelSnapshot(task_id, working, boundaries), candidate, config)
        merged = merge_round(current, candidate, conv, name)
        if merged is None:
            attempts.append(Attempt(strategy=name, tokens_before=tokens, tokens_after=tokens))
            continue
        after = sum(_tokens(assemble(read_from_level(level, scope, merged), stub_text), counter))
        newly = set(merged.compressed_message_ids) - set(
            current.compressed_message_ids if current else []
        )
        attempts.append(
            Attempt(strategy=name, tokens_before=tokens, tokens_after=after, compressed=len(newly))
        )
        current, tokens, changed = merged, after, True
        working = [*level, marker(merged, task_id, REASON, [name])]
        if after <= config.token_limit:
            break
    final = (
        current
        if changed and current is not None
        else carried_over(latest, conv, attempts[-1].strategy)
    )
    final.metadata[ROUND_KEY] = int((latest.metadata if latest else {}).get(ROUND_KEY, 0) or 0) + 1
    outcome = CompressionOutcome(
        round=final.metadata[ROUND_KEY],
        tried=attempts,
        tokens_before=before,
        tokens_after=tokens,
        token_limit=config.token_limit,
        reached=tokens <= config.token_limit,
        visible_count=read_from_level(level, scope, final).visible_count,
        retry_after=retry_after(config),
    )
    final.metadata[OUTCOME_KEY] = outcome.model_dump()
    return final, changed, outcome


def _marker_args(checkpoint: CompressionCheckpoint, strategies: list[str]) -> dict[str, Any]:
    """`add_compression_message` arguments for the checkpoint a round appends."""
    start, end = checkpoint.metadata.get(SPAN_KEY, [0, 0])
    return {
        "start_idx": start,
        "end_idx": end,
        "reason": REASON,
        "strategies": strategies,
        "compressed_message_ids": list(checkpoint.compressed_message_ids),
        "kept_message_ids": list(checkpoint.kept_message_ids),
        "cache": checkpoint.cache(),
        "metadata": checkpoint.message_metadata(),
    }
