"""The context pipeline sends only what the model will see."""

from __future__ import annotations

import pytest

from mindstore.model.levels import level_messages
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import TaskConfigPart, TextPart
from mindstore.model.task import Task
from mindstore.store import Store

CONFIG = TaskConfigPart(model_name="m")


def _checkpoint_metadata(compressed, kept):
    return {
        "checkpoint": {
            "checkpoint_id": kept[-1] if kept else "",
            "timestamp": 0,
            "compressed_message_ids": compressed,
            "kept_message_ids": kept,
            "metadata": {},
        }
    }


@pytest.mark.parametrize("page_messages", [None, 3])
async def test_context_of_a_5000_message_task_reads_less_than_the_task(store, page_messages):
    # at the run's page size, and in 1,666 pages of 3 messages: a page holding nothing the
    # view keeps must not send a row (a row per page would outweigh the kept messages)
    policy = store.page_policy if page_messages is None else PagePolicy(page_messages=page_messages)
    acme = Store(store.backend, page_policy=policy).scoped("acme")
    task = Task()
    task.add_task_config(CONFIG)
    for i in range(4999):
        task.add_human_message(f"message {i} " + "words " * 10)
    ids = [m.id for m in task.messages]
    compressed, kept = ids[1:4900], ids[4900:]
    task.add_compression_message(
        1,
        4899,
        "token_limit",
        ["truncate_and_summarize"],
        compressed,
        kept,
        cache={"summary": "earlier talk"},
        metadata=_checkpoint_metadata(compressed, kept),
    )
    tid = (await acme.tasks.import_task(task)).id

    with store.backend.recorder.capture() as context_log:
        _header, latest, messages = await acme.tasks.context_source(tid)
    with store.backend.recorder.capture() as full_log:
        everything = await acme.tasks.messages(tid)

    assert latest is not None and latest.cache == {"summary": "earlier talk"}
    assert latest.compressed_message_ids == compressed
    expected = [
        m.id for m in task.messages if m.id not in set(compressed) and m.role != "compression"
    ]
    assert [m.id for m in messages] == expected
    assert len(everything) == 5001
    # the checkpoint's list of ~5,000 compressed ids is the floor of the context read;
    # the 101 kept messages add little (lean stored messages: ~270 B each)
    assert context_log.bytes_received * 7 < full_log.bytes_received, (
        context_log.bytes_received,
        full_log.bytes_received,
    )


async def test_context_respects_levels_and_the_latest_checkpoint_only(acme):
    task = Task()
    task.add_task_config(CONFIG)
    root = [task.add_human_message(f"root {i}").id for i in range(4)]
    task.add_compression_message(
        0, 2, "r", [], root[:2], root[2:], metadata=_checkpoint_metadata(root[:2], root[2:])
    )
    task.add_task_entry([TextPart(text="sub")], CONFIG)
    inner = [task.add_human_message(f"inner {i}").id for i in range(3)]
    tid = (await acme.tasks.import_task(task)).id
    # inside the sub-task the root checkpoint does not apply, and root messages are not shown
    _, latest, messages = await acme.tasks.context_source(tid)
    assert latest is None
    assert [m.id for m in messages] == [
        m.id for m in level_messages(task.messages, task.current_scope()) if m.role != "compression"
    ]
    assert set(inner) <= {m.id for m in messages} and not set(root) & {m.id for m in messages}
    await acme.tasks.add_task_exit(tid, [TextPart(text="done")])
    _, latest, messages = await acme.tasks.context_source(tid)
    assert latest is not None
    shown = {m.id for m in messages}
    assert not set(root[:2]) & shown and set(root[2:]) <= shown and not set(inner) & shown
