"""Pluggable compression strategies: a custom strategy end to end (Compressor on a stored
and an in-memory task, `tasks.context`, checkpoints read back), the registry by type, the
document's helpers, and the cumulative merge of rounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.compression import (
    BaseCompressionConfig,
    CompressionCheckpoint,
    CompressionStrategy,
    Compressor,
    StoredLevel,
    StrategyRegistry,
    ToolCompression,
    apply_checkpoint,
    checkpoints_in,
    merge_round,
    register_compression_strategy,
)
from mindstore.compression.checkpoint import STUBBED_KEY
from mindstore.compression.registry import DEFAULT_REGISTRY
from mindstore.compression.strategies import conversation
from mindstore.compression.toolpairs import call_ids, result_ids, safe_cut
from mindstore.compression.window import model_view
from mindstore.errors import MindstoreError, ValidationError
from mindstore.model.messages import UserMessage, message_to_dict
from mindstore.model.parts import (
    CompressionConfig,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)

SMALL = CompressionConfig(token_limit=400, keep_recent_messages=3, keep_first_messages=1)
CONFIG = TaskConfigPart(model_name="m", compression_config=SMALL,
                        tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True),
                                       ToolMetadata(name="search")])  # fmt: skip


class ForgetConfig(BaseCompressionConfig):
    """A custom strategy's own config: how many recent messages to keep."""

    strategy: str | None = "forget_older"
    keep: int = 4


class ForgetOlder(CompressionStrategy):
    """Drops everything between the level's first message and its last `keep` messages.

    It records only what *this* round drops (not everything so far) and writes its own
    summary: the Compressor must merge it into the cumulative checkpoint.
    """

    def __init__(self, keep: int | None = None) -> None:
        self.keep = keep
        self.calls: list[str] = []

    @property
    def strategy_type(self) -> str:
        return "forget_older"

    async def compress(self, task, new_checkpoint, config):
        self.calls.append("compress" if new_checkpoint is not None else "transform")
        if new_checkpoint is None:
            return self.view(task, config)
        keep = self.keep if self.keep is not None else getattr(config, "keep", 4)
        previous = self.latest_checkpoint(task)
        gone = set(previous.dropped_ids) if previous else set()
        visible = [m for m in conversation(task.current_task_messages()) if m.id not in gone]
        cut = safe_cut(visible, max(1, len(visible) - keep), floor=1)
        dropped = visible[1:cut]
        new_checkpoint.compressed_message_ids = [m.id for m in dropped]
        if dropped:
            new_checkpoint.summary = f"forgot {len(dropped) + len(gone)} messages"
        return self.view(task, config, new_checkpoint)


class BadIds(ForgetOlder):
    @property
    def strategy_type(self) -> str:
        return "bad_ids"

    async def compress(self, task, new_checkpoint, config):
        if new_checkpoint is not None:
            new_checkpoint.compressed_message_ids = ["not-in-this-level"]
        return self.view(task, config)


async def tool_round(tasks, tid: str, tag: str, size: int = 300) -> None:
    await tasks.add_human_message(tid, f"{tag} " + "question " * 10)
    assistant = await tasks.add_assistant_message(tid)
    await tasks.add_tool_call_part(
        tid, assistant.id, ToolCallPart(tool_call_id=f"c-{tag}", tool_name="search")
    )
    await tasks.answer_tool_call(tid, f"c-{tag}", {"hits": "h" * size})


def as_dicts(messages):
    return [message_to_dict(m) for m in messages]


def pairs_intact(messages) -> bool:
    issued = {c for m in messages for c in call_ids(m)}
    return {c for m in messages for c in result_ids(m)} <= issued


@pytest.fixture
def registered():
    """`forget_older` in the process-wide registry for one test, then forgotten."""
    register_compression_strategy(ForgetOlder)
    yield
    DEFAULT_REGISTRY.unregister("forget_older")


async def test_a_custom_strategy_compresses_a_stored_task_and_the_store_serves_its_view(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(5):
        await tool_round(tasks, tid, f"r{i}")
    strategy = ForgetOlder(keep=4)
    compressor = Compressor(strategy, SMALL)
    await compressor.load(StoredLevel(tasks, tid))
    assert compressor.checkpoints == []
    view = await compressor.compress()
    first = compressor.latest
    assert (
        first is not None
        and first.summary == f"forgot {len(first.compressed_message_ids)} messages"
    )
    assert pairs_intact(view) and view[0].role == "taskconfig" and view[1].text() == first.summary
    # stored like a built-in: a compression message naming the strategy, served by tasks.context
    stored = (await tasks.messages(tid))[-1]
    assert stored.role == "compression" and stored.content[0].strategies == ["forget_older"]
    window = await tasks.context(tid, auto_compress=False)
    assert as_dicts(window.messages) == as_dicts(model_view(view))
    assert window.left_out.compressed == len(first.compressed_message_ids)
    # a second round records only what it adds; the checkpoint stays cumulative
    for i in range(3):
        await tool_round(tasks, tid, f"s{i}")
    await compressor.compress()
    second = compressor.latest
    assert set(first.compressed_message_ids) < set(second.compressed_message_ids)
    assert second.metadata["round"] == 2 and second.metadata["strategy"] == "forget_older"
    reloaded = Compressor(ForgetOlder(keep=4), SMALL)
    await reloaded.load(StoredLevel(tasks, tid))
    assert reloaded.checkpoints == compressor.checkpoints
    assert as_dicts(model_view(await reloaded.transform())) == as_dicts(
        (await tasks.context(tid, auto_compress=False)).messages
    )
    assert reloaded.strategy.calls == ["transform"]
    # nothing was deleted
    assert {m.id for m in await tasks.messages(tid)} >= set(second.compressed_message_ids)


async def test_a_custom_strategy_object_runs_through_tasks_context(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(6):
        await tool_round(tasks, tid, f"r{i}")
    strategy = ForgetOlder(keep=3)
    window = await tasks.context(tid, strategy=strategy)
    assert window.compressed_now and strategy.calls == ["compress"]
    assert window.checkpoint.metadata["strategy"] == "forget_older"
    again = await tasks.context(tid, auto_compress=False)
    assert as_dicts(again.messages) == as_dicts(window.messages)
    assert (
        len(again.messages) == 1 + 3
    )  # summary, the kept tail (the task config never goes to a model)


async def test_a_registered_type_is_found_by_name_and_by_its_config(acme, registered):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(6):
        await tool_round(tasks, tid, f"r{i}")
    # a config that names the type picks the strategy; the strategy reads the config's fields
    compressor = Compressor(config=ForgetConfig(keep=2))
    assert isinstance(compressor.strategy, ForgetOlder)
    await compressor.load(StoredLevel(tasks, tid))
    view = await compressor.compress()
    assert len(conversation(view)) == 1 + 1 + 2
    # by name through tasks.context (built without `keep`: the level's config has none, so 4)
    for i in range(4):
        await tool_round(tasks, tid, f"s{i}")
    window = await tasks.context(tid, strategy="forget_older")
    assert window.compressed_now and window.checkpoint.metadata["strategy"] == "forget_older"
    stored = conversation(await tasks.messages(tid))
    assert window.messages[0].text().startswith("forgot") and pairs_intact(window.messages)
    assert [m.id for m in window.messages[-4:]] == [
        m.id for m in stored[-4:]
    ]  # keep=4, plus a call
    assert len(window.messages) == 1 + 5
    assert "forget_older" in DEFAULT_REGISTRY.names()


async def test_a_private_registry_and_the_builtins_are_strategy_objects():
    registry = StrategyRegistry()
    with pytest.raises(ValidationError, match="unknown compression strategy 'tool_compression'"):
        Compressor("tool_compression", registry=registry)
    registry.register(ForgetOlder(keep=1))
    assert registry.names() == ["forget_older"]
    assert Compressor("forget_older", registry=registry).strategy.keep == 1  # the object itself
    builtin = Compressor("tool_compression").strategy
    assert isinstance(builtin, ToolCompression) and builtin.strategy_type == "tool_compression"
    assert (
        Compressor(config=CompressionConfig(strategy="compact_summarization")).strategy_type
        == "compact_summarization"
    )


async def test_load_accepts_an_in_memory_task_and_matches_its_stored_twin(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(3):
        await tool_round(tasks, tid, f"r{i}")
    await tasks.add_task_entry(tid, [TextPart(text="sub")], CONFIG, entry_id="entry1")
    for i in range(4):
        await tool_round(tasks, tid, f"s{i}")
    task = await tasks.load(tid)
    assert isinstance(task, mindstore.Task)
    in_memory, stored = (
        Compressor(ForgetOlder(keep=3), SMALL),
        Compressor(ForgetOlder(keep=3), SMALL),
    )
    await in_memory.load(task)
    await stored.load(StoredLevel(tasks, tid))
    # the document's helpers: the current level (the sub-task) only
    assert (
        in_memory.get_task_boundaries()
        == stored.get_task_boundaries()
        == task.find_current_task_boundaries()
    )
    assert in_memory.get_task_boundaries()[0] == [m.id for m in task.messages].index("entry1")
    assert as_dicts(in_memory.get_task_messages()) == as_dicts(stored.get_task_messages())
    before = len(task.messages)
    memory_view, stored_view = await in_memory.compress(), await stored.compress()
    assert len(task.messages) == before + 1 and task.messages[-1].role == "compression"
    assert in_memory.get_compression_messages_in_task() == [task.messages[-1]]
    # the same view; only the synthetic summary's id is drawn per round
    assert [m.id for m in memory_view[2:]] == [m.id for m in stored_view[2:]]
    assert (
        as_dicts(memory_view[2:]) == as_dicts(stored_view[2:])
        and memory_view[1].text() == stored_view[1].text()
    )
    assert in_memory.latest.compressed_message_ids == stored.latest.compressed_message_ids
    assert not set(stored.latest.compressed_message_ids) & {
        m.id for m in task.messages[: task.find_current_task_boundaries()[0]]
    }
    level = task.current_task_messages()
    assert as_dicts(apply_checkpoint(level, checkpoints_in(level)[-1])) == as_dicts(memory_view)


async def test_a_builtin_strategy_compresses_an_in_memory_task():
    task = mindstore.Task()
    task.add_task_config(CONFIG)
    for i in range(8):
        task.add_human_message(f"m{i} " + "words " * 60)
    compressor = Compressor("truncate_and_summarize", SMALL)
    await compressor.load(task)
    view = await compressor.compress()
    assert compressor.latest is not None and task.messages[-1].role == "compression"
    assert len(view) < 9 and view[0].role == "taskconfig"
    assert await compressor.transform() == view


async def test_bad_strategies_and_arguments_are_typed_errors_and_write_nothing(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(4):
        await tool_round(tasks, tid, f"r{i}")
    count = len(await tasks.messages(tid))
    compressor = Compressor(BadIds(), SMALL)
    await compressor.load(StoredLevel(tasks, tid))
    with pytest.raises(ValidationError, match="not in the current level"):
        await compressor.compress()
    assert len(await tasks.messages(tid)) == count
    with pytest.raises(ValidationError, match="strategy"):
        Compressor(42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="strategy"):
        Compressor(config=BaseCompressionConfig())  # names no strategy
    with pytest.raises(
        ValidationError, match=r"unknown compression strategy 'nope'.*tool_compression"
    ):
        Compressor("nope")
    with pytest.raises(ValidationError, match="task"):
        await Compressor("tool_compression").load("not a task")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="load"):
        Compressor("tool_compression").get_task_messages()
    with pytest.raises(ValidationError, match="CompressionStrategy"):
        register_compression_strategy(object)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await tasks.context(tid, strategy=3.5)
    with pytest.raises(TypeError):  # the interface is abstract

        class Incomplete(CompressionStrategy):
            strategy_type = "incomplete"

        Incomplete()  # type: ignore[abstract]
    assert issubclass(ValidationError, MindstoreError)
    assert len(await tasks.messages(tid)) == count


async def test_a_round_that_records_nothing_writes_nothing(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    await tool_round(tasks, tid, "only")
    compressor = Compressor(ForgetOlder(keep=10), SMALL)
    await compressor.load(StoredLevel(tasks, tid))
    count = len(await tasks.messages(tid))
    await compressor.compress()
    assert compressor.checkpoints == [] and len(await tasks.messages(tid)) == count


# ---------------------------------------------------------------- merge_round properties
IDS = [f"m{i}" for i in range(12)]


def _conv() -> list[UserMessage]:
    return [UserMessage(id=i, content=[TextPart(text=i)]) for i in IDS]


def _checkpoint(
    compressed: set[str], stubbed: set[str], summary: str | None
) -> CompressionCheckpoint:
    return CompressionCheckpoint(
        compressed_message_ids=[i for i in IDS if i in compressed],
        metadata={STUBBED_KEY: [i for i in IDS if i in stubbed & compressed]},
        summary=summary,
    )


ROUND = st.tuples(
    st.sets(st.sampled_from(IDS)),
    st.sets(st.sampled_from(IDS)),
    st.one_of(st.none(), st.text(max_size=5)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ROUND, min_size=1, max_size=6))
def test_merged_checkpoints_only_grow_partition_the_level_and_are_idempotent(rounds):
    conv = _conv()
    previous: CompressionCheckpoint | None = None
    for compressed, stubbed, summary in rounds:
        merged = merge_round(previous, _checkpoint(compressed, stubbed, summary), conv, "custom")
        if merged is None:
            continue
        assert merged.compressed_message_ids + merged.kept_message_ids != []
        assert sorted(merged.compressed_message_ids + merged.kept_message_ids, key=IDS.index) == IDS
        assert not set(merged.dropped_ids) & set(merged.stubbed_ids)
        assert set(merged.stubbed_ids) <= set(merged.compressed_message_ids)
        if previous is not None:
            assert set(previous.dropped_ids) <= set(merged.dropped_ids)
            assert set(previous.compressed_message_ids) <= set(merged.compressed_message_ids)
            assert merged.metadata["round"] == previous.metadata["round"] + 1
        anchor = merged.summary_after_id
        assert anchor is None or anchor not in merged.dropped_ids
        # merging a checkpoint into itself adds nothing: nothing would be written
        assert merge_round(merged, merged.model_copy(deep=True), conv, "custom") is None
        view_ids = [m.id for m in apply_checkpoint(conv, merged) if m.id in IDS]
        assert view_ids == [i for i in IDS if i not in merged.dropped_ids]
        previous = merged
