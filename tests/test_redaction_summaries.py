"""Redaction reaches compression summaries (docs/lifecycle.md, "Redaction").

A compression round's summary is written from the messages it drops, so a redacted
message's content lives on in it. Redacting a message that a summary covers withholds
that summary (every compression message of the task that holds one written from it, in
the open page or a sealed page); a summary of other messages stays; a replay changes
nothing; the view shows the placeholder where the summary stood.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import bson
import pytest

from mindstore.compression.summarizer import Summarizer
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.ids import task_key
from mindstore.model.parts import CompressionConfig, TaskConfigPart
from mindstore.model.plans.redaction import WITHHELD_SUMMARY
from mindstore.store import Store

SMALL = CompressionConfig(token_limit=300, keep_recent_messages=2, keep_first_messages=1)
CONFIG = TaskConfigPart(model_name="m", compression_config=SMALL)
SECRET = "SSN-123-45-6789"


async def verbatim(messages: list[Any], previous: str | None) -> str:
    """A summariser that copies what it drops (as a model's summary may)."""
    texts = [part.text for m in messages for part in m.content if hasattr(part, "text")]
    return " | ".join([previous or "", *texts])


async def stored_bytes(store: Store, tenant: str, tid: str) -> bytes:
    task = await store.database["tasks"].find_one({"_id": task_key(tenant, tid)})
    pages = await store.database["task_pages"].find({"task": task_key(tenant, tid)}).to_list(None)
    return b"".join(bson.encode(document) for document in [task, *pages])


async def compressed_task(store: Store, rounds: int = 2) -> tuple[str, str]:
    """A task whose first user message holds the secret and was summarised away, over
    `rounds` compression rounds (each summary folds in the previous one)."""
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    await tasks.add_human_message(tid, "hello")  # the head the view keeps
    first = await tasks.add_human_message(tid, f"my number is {SECRET} " + "pad " * 40)
    summarizer: Summarizer = verbatim
    for round_ in range(rounds):
        for i in range(4):
            await tasks.add_human_message(tid, f"round {round_} message {i} " + "words " * 40)
        window = await tasks.context(tid, strategy="truncate_and_summarize", summarizer=summarizer)
        assert window.compressed_now
    summaries = [part.cache.get("summary", "") for m in await tasks.messages(tid)
                 if m.role == "compression" for part in m.content]  # fmt: skip
    assert len(summaries) == rounds and all(SECRET in summary for summary in summaries)
    return tid, first.id


@pytest.mark.parametrize(("rounds", "sealed"), [(1, False), (3, False), (2, True)])
async def test_redacting_a_summarised_message_withholds_every_summary_written_from_it(
    store: Store, store_factory: Callable[..., Awaitable[Store]], rounds: int, sealed: bool
) -> None:
    if sealed:  # a tenant under a keyring: the summaries are sealed, the same rule holds
        store = await store_factory(keyring=Keyring(LocalMasterKey(os.urandom(32))))
    tid, secret_id = await compressed_task(store, rounds)
    tasks = store.scoped("acme").tasks
    if not sealed:
        assert SECRET.encode() in await stored_bytes(store, "acme", tid)  # the summary holds it
    await tasks.redact(tid, secret_id, reason="customer request")
    assert SECRET.encode() not in await stored_bytes(store, "acme", tid)
    summaries = [part.cache.get("summary") for m in await tasks.messages(tid)
                 if m.role == "compression" for part in m.content]  # fmt: skip
    assert len(summaries) == rounds and set(summaries) == {WITHHELD_SUMMARY}
    window = await tasks.context(tid, auto_compress=False)
    shown = [part.text for m in window.messages for part in m.content if hasattr(part, "text")]
    assert WITHHELD_SUMMARY in shown and not any(SECRET in text for text in shown)
    before = await stored_bytes(store, "acme", tid)
    await tasks.redact(tid, secret_id, reason="customer request")  # a replay: nothing
    assert await stored_bytes(store, "acme", tid) == before


async def test_redacting_a_message_no_summary_covers_keeps_the_summaries(store: Store) -> None:
    tid, _ = await compressed_task(store, 1)
    tasks = store.scoped("acme").tasks
    recent = (await tasks.messages(tid))[-2]  # kept in the view: in no summary
    assert recent.role == "user"
    before = [m for m in await tasks.messages(tid) if m.role == "compression"]
    await tasks.redact(tid, recent.id)
    after = [m for m in await tasks.messages(tid) if m.role == "compression"]
    assert [m.model_dump() for m in after] == [m.model_dump() for m in before]
    assert SECRET.encode() in await stored_bytes(store, "acme", tid)
