"""Pure compression pieces: reducers, context managers, tool pairing, strategy planning."""

from __future__ import annotations

import asyncio

import pytest

from mindstore.compression import (
    CompressionCheckpoint,
    DefaultContextManager,
    ExtractiveSummarizer,
    MessageContextManager,
    add_messages,
    append_items,
    apply_checkpoint,
    estimate_tokens,
    plan_compression,
    remove_tool_messages,
    replace_messages,
)
from mindstore.compression.managers import TRUNCATION_PREFIX
from mindstore.compression.toolpairs import (
    call_ids,
    drop_orphan_results,
    result_ids,
    safe_cut,
)
from mindstore.errors import ValidationError
from mindstore.model.messages import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import (
    CompressionConfig,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)


def user(mid: str, text: str = "hi") -> UserMessage:
    return UserMessage(id=mid, content=[TextPart(text=text)])


def ai(mid: str, *calls: str, text: str = "ok") -> AssistantMessage:
    parts = [TextPart(text=text)] + [ToolCallPart(tool_call_id=c, tool_name="t") for c in calls]
    return AssistantMessage(id=mid, content=parts)


def tool(mid: str, call: str, body: str = "result") -> ToolMessage:
    return ToolMessage(
        id=mid, content=[ToolResultPart(tool_call_id=call, tool_name="t", result=body)]
    )


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def pairs_intact(messages) -> bool:
    issued = {c for m in messages for c in call_ids(m)}
    answered = {c for m in messages for c in result_ids(m)}
    return answered <= issued


# ---------------------------------------------------------------- reducers (seed 003)
def test_add_messages_keeps_order_and_drops_duplicate_ids():
    a, b, c = user("a"), user("b"), user("c")
    assert ids(add_messages([a], [b, a])) == ["a", "b"]
    assert ids(add_messages([a, b], [c, b, c])) == ["a", "b", "c"]
    assert ids(append_items([a], [b, a])) == ["a", "b"]
    assert ids(replace_messages([a], [c])) == ["c"]


def test_remove_tool_messages_only_removes_completed_sequences():
    u, call, result, final = user("u"), ai("a1", "c1"), tool("t1", "c1"), ai("a2")
    assert ids(remove_tool_messages([u, call, result, final])) == ["u", "a2"]
    assert ids(remove_tool_messages([u, call])) == ["u", "a1"]  # waiting for results
    assert ids(remove_tool_messages([u, call, result])) == ["u", "a1", "t1"]  # no final answer
    # two consecutive rounds: only the round followed by a plain answer is complete
    chain = [u, call, result, ai("a3", "c2"), tool("t2", "c2"), final]
    assert ids(remove_tool_messages(chain)) == ["u", "a1", "t1", "a2"]
    # several results for one call message
    multi = [u, ai("a4", "x", "y"), tool("tx", "x"), tool("ty", "y"), final]
    assert ids(remove_tool_messages(multi)) == ["u", "a2"]


# ---------------------------------------------------------------- tool pairing
def test_safe_cut_moves_back_to_the_call_of_a_kept_result():
    history = [user("u0"), ai("a1", "c1"), user("u1"), tool("t1", "c1"), user("u2")]
    assert safe_cut(history, 3) == 1
    assert safe_cut(history, 4) == 4
    assert safe_cut(history, 3, floor=2) == 3  # the call sits below the floor: not moved
    assert ids(drop_orphan_results(history[2:])) == ["u1", "u2"]


# ---------------------------------------------------------------- seed 002 default manager
def test_default_manager_keeps_first_fills_from_tail_and_truncates_the_border():
    system = SystemMessage(id="s", content=[TextPart(text="be brief")])
    history = [system] + [user(f"m{i}", f"{i:03d} " + "x" * 396) for i in range(10)]
    per_message = estimate_tokens(history[1])
    budget = estimate_tokens(system) + 3 * per_message + per_message // 2
    trimmed = DefaultContextManager(budget, safety_buffer=0)(history)
    assert trimmed[0].id == "s"
    assert ids(trimmed[-3:]) == ["m7", "m8", "m9"]
    border = trimmed[1]
    assert border.id == "m6" and border.text().startswith(TRUNCATION_PREFIX)
    assert border.text().endswith("x" * 20) and len(border.text()) < len(history[7].text())
    assert sum(estimate_tokens(m) for m in trimmed) <= budget
    assert history[7].id == "m6" and history[7].text().startswith("006 ")  # source untouched


def test_default_manager_subtracts_the_safety_buffer_and_rejects_bad_limits():
    history = [user(f"m{i}", "y" * 400) for i in range(20)]
    total = sum(estimate_tokens(m) for m in history)
    assert DefaultContextManager(total + 5_000)(history) == history
    assert len(DefaultContextManager(total + 4_000)(history)) < len(history)
    with pytest.raises(ValidationError):
        DefaultContextManager(0)
    with pytest.raises(ValidationError):
        DefaultContextManager(10, safety_buffer=-1)


def test_default_manager_never_keeps_a_result_without_its_call():
    history = [user("u")] + [
        m for i in range(6) for m in (ai(f"a{i}", f"c{i}"), tool(f"t{i}", f"c{i}", "r" * 300))
    ]
    for budget in range(40, 700, 23):
        assert pairs_intact(DefaultContextManager(budget, safety_buffer=0)(history))


# ---------------------------------------------------------------- seed 003 message-count manager
def test_message_count_manager_keeps_first_and_last_user_turns():
    history = [SystemMessage(id="s")] + [m for i in range(5) for m in (user(f"u{i}"), ai(f"a{i}"))]
    assert ids(MessageContextManager(max_messages=2)(history)) == ["s", "u3", "a3", "u4", "a4"]
    assert MessageContextManager(max_messages=10)(history) == history
    with_tools = [
        SystemMessage(id="s"),
        user("u"),
        ai("a1", "c1"),
        tool("t1", "c1"),
        ai("a2"),
        user("v"),
        ai("a3", "c3"),
    ]
    assert ids(MessageContextManager(max_messages=5, remove_tool_msgs=True)(with_tools)) == [
        "s",
        "u",
        "a2",
        "v",
        "a3",
    ]
    with pytest.raises(ValidationError):
        MessageContextManager(max_messages=0)


# ---------------------------------------------------------------- strategy planning
CONFIG = CompressionConfig(token_limit=200, keep_recent_messages=2, keep_first_messages=1)


def conversation_with_tools(rounds: int):
    history = [SystemMessage(id="s"), user("u0", "task")]
    for i in range(rounds):
        history += [
            user(f"u{i + 1}", "q " * 30),
            ai(f"a{i}", f"c{i}"),
            tool(f"t{i}", f"c{i}", "r" * 200),
        ]
    return history


def test_tool_compression_stubs_old_results_and_keeps_them_in_place():
    history = conversation_with_tools(4)
    plan = plan_compression("tool_compression", history, CONFIG)
    assert plan is not None and not plan.to_summarize
    assert ids(plan.newly_stubbed) == ["t0", "t1", "t2"]  # t3 is within the recent window
    view = apply_checkpoint(history, plan.checkpoint)
    assert ids(view) == ids(history)
    stub = next(m for m in view if m.id == "t0")
    assert (
        stub.content[0].result == "[tool result compressed]"
        and stub.content[0].tool_call_id == "c0"
    )
    again = plan_compression("tool_compression", history, CONFIG, plan.checkpoint)
    assert again is None  # nothing left to stub


def test_truncate_drops_oldest_until_target_and_never_splits_pairs():
    history = conversation_with_tools(6)
    plan = plan_compression("truncate_and_summarize", history, CONFIG)
    assert plan is not None
    dropped = set(plan.checkpoint.dropped_ids)
    assert "s" not in dropped and "u0" not in dropped  # the head is protected
    kept = [m for m in history if m.id not in dropped]
    assert pairs_intact(kept)
    assert ids(plan.to_summarize) == [m.id for m in history if m.id in dropped]
    assert set(plan.checkpoint.kept_message_ids) == {m.id for m in kept}


def test_compact_keeps_only_recent_turns_and_checkpoints_stack():
    history = conversation_with_tools(5)
    first = plan_compression("compact_summarization", history, CONFIG)
    first.checkpoint.summary = asyncio.run(ExtractiveSummarizer()(first.to_summarize, None))
    view = apply_checkpoint(history, first.checkpoint)
    assert (
        ids(view)[:2] == ["s", "u0"]
        and view[2].metadata["mindstore_summary_of"] == first.checkpoint.checkpoint_id
    )
    assert ids(view)[3:] == ["u5", "a4", "t4"]  # the last turn starts at its user message
    history += [user("u6", "q " * 30), ai("a5", "c5"), tool("t5", "c5", "r" * 200), user("u7")]
    second = plan_compression("compact_summarization", history, CONFIG, first.checkpoint)
    assert set(first.checkpoint.compressed_message_ids) < set(
        second.checkpoint.compressed_message_ids
    )
    assert second.previous_summary == first.checkpoint.summary
    assert second.checkpoint.metadata["round"] == 2


def test_unknown_strategy_is_a_typed_error():
    with pytest.raises(ValidationError, match="unknown compression strategy"):
        plan_compression("zip_it", conversation_with_tools(2), CONFIG)


def test_checkpoint_round_trips_through_the_compression_part_layout():
    checkpoint = CompressionCheckpoint(checkpoint_id="x", compressed_message_ids=["a", "b"],
                                       kept_message_ids=["c"],
                                       metadata={"stubbed_message_ids": ["b"]},
                                       summary="s")  # fmt: skip
    back = CompressionCheckpoint.from_parts(checkpoint.message_metadata(), checkpoint.cache())
    assert back == checkpoint and back.dropped_ids == ["a"] and back.stubbed_ids == ["b"]
    assert CompressionCheckpoint.from_parts({"other": 1}, None) is None
