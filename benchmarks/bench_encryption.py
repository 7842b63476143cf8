"""Per-tenant encryption, side by side in one run: the same work on a store without a
keyring and on one with a keyring set up as docs/encryption.md shows it (a local key vault
holding each tenant's key, `Keyring(LocalKeyVault(path, LocalMasterKey(...)))`).

- stored bytes of the 80-turn tool-calling conversation of `bench_storage` (the task
  document's BSON), goal: at most 1.25x without;
- warm append time: `add_human_message` to a task this process wrote last (header cache
  warm, key cache warm), median of interleaved rounds, goal: at most 1.3x without;
- bytes sent per append at two history lengths, with and without a keyring: with one,
  still independent of the history (one sealed message, nothing re-sent; the only growth
  is the array index's digits, as without);
- calls to the key provider over the whole run: at most one unwrap per tenant and key
  version per cache period, one wrap per new data key.
"""

from __future__ import annotations

import random
import tempfile
import statistics
import time
import uuid
from typing import Any

import bson

import mindstore
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from mindstore.crypto import KekState, Keyring, LocalKeyVault, LocalMasterKey
from mindstore.integrations.langchain_messages import from_langchain

WORDS = ("the", "manual", "covers", "billing", "refunds", "chapter", "policy", "customer", "account",
         "invoice", "support", "ticket", "escalation", "section", "appendix", "limit", "quota", "plan")  # fmt: skip
TURNS = 80
APPENDS = 200
STORED_GOAL = 1.25
APPEND_GOAL = 1.3
TEXT = "What is the weather in Lisbon next week, and should I pack an umbrella? " * 2


class CountingProvider:
    """The vault, counting what the keyring asks of it."""

    def __init__(self, inner: LocalKeyVault) -> None:
        self.inner, self.provider_id = inner, inner.provider_id
        self.calls = {"wrap": 0, "unwrap": 0}

    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        self.calls["wrap"] += 1
        return await self.inner.wrap(tenant, data_key, context)

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        self.calls["unwrap"] += 1
        return await self.inner.unwrap(tenant, wrapped, context)

    async def destroy(self, tenant: str) -> None:
        await self.inner.destroy(tenant)

    async def status(self, tenant: str) -> KekState:
        return await self.inner.status(tenant)


def conversation(turns: int, seed: int = 11) -> list[list[Any]]:
    """The 80-turn tool-calling agent of `bench_langgraph_storage` (compact profile: a
    question, a model turn calling `search`, its ~250-character result, a ~160-character
    answer), built directly as LangChain messages, one list per graph step: the same
    messages without needing the LangGraph/MongoDB peers installed."""
    rng = random.Random(seed)
    steps: list[list[Any]] = []
    for turn in range(turns):
        call_id, query = f"call_{2 * turn + 1}", f"Question {turn}: what does the manual say"
        steps.append([HumanMessage(f"{query} about topic {turn}?", id=f"q-{turn}")])
        steps.append([AIMessage(content="", id=f"ai-{2 * turn + 1}",
                                tool_calls=[{"name": "search", "args": {"query": query[:40]},
                                             "id": call_id}],
                                usage_metadata={"input_tokens": 400, "output_tokens": 25,
                                                "total_tokens": 425})])  # fmt: skip
        steps.append([ToolMessage(f"Results for {query[:40]!r}: " + _text(rng, 250),
                                  tool_call_id=call_id, name="search", id=f"tool-{turn}")])  # fmt: skip
        steps.append([AIMessage(content=_text(rng, 160), id=f"ai-{2 * turn + 2}",
                                usage_metadata={"input_tokens": 900, "output_tokens": 150,
                                                "total_tokens": 1050})])  # fmt: skip
    return steps


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:size]


async def _stored(store: Any, steps: list[Any]) -> int:
    tasks = store.scoped("bench").tasks
    task_id = (await tasks.create(task_id=f"storage-{uuid.uuid4().hex[:8]}")).id
    for step in steps:
        await tasks.add_messages(task_id, from_langchain(step, check=True))
    document = await store.database["tasks"].find_one({"_id": f"bench/{task_id}"})
    return len(bson.encode(document))


async def _append_times(stores: dict[str, Any], appends: int) -> dict[str, float]:
    tasks = {name: store.scoped("bench").tasks for name, store in stores.items()}
    ids = {name: (await t.create(title="append")).id for name, t in tasks.items()}
    for name, t in tasks.items():  # warm: header cache, key cache, code paths
        for _ in range(20):
            await t.add_human_message(ids[name], TEXT)
    samples: dict[str, list[float]] = {name: [] for name in stores}
    for _ in range(appends):
        for name, t in tasks.items():  # interleaved: the same machine load for both
            start = time.perf_counter()
            await t.add_human_message(ids[name], TEXT)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


async def _sent_per_append(store: Any, history: int) -> int:
    tasks = store.scoped("bench").tasks
    task_id = (await tasks.create()).id
    for i in range(history):
        await tasks.add_human_message(task_id, f"{TEXT} {i}")
    with store.backend.recorder.capture() as log:
        await tasks.add_human_message(task_id, TEXT)
    return sum(c.bytes_sent for c in log.by_name("update"))


async def run(results: dict[str, Any], turns: int = TURNS, appends: int = APPENDS) -> None:
    plain = await mindstore.connect("embedded")
    vault = tempfile.TemporaryDirectory()
    provider = CountingProvider(LocalKeyVault(f"{vault.name}/vault", LocalMasterKey.generate()))
    sealed = await mindstore.connect("embedded", keyring=Keyring(provider, cache_seconds=3600))
    try:
        steps = conversation(turns)
        plain_bytes, sealed_bytes = await _stored(plain, steps), await _stored(sealed, steps)
        times = await _append_times({"plain": plain, "keyring": sealed}, appends)
        sent = {h: await _sent_per_append(sealed, h) for h in (10, 300)}
        sent_plain = {h: await _sent_per_append(plain, h) for h in (10, 300)}
        tenants = await sealed.database["data_keys"].distinct("tenant")
    finally:
        await plain.close()
        await sealed.close()
        vault.cleanup()
    stored_ratio = round(sealed_bytes / plain_bytes, 3)
    append_ratio = round(times["keyring"] / times["plain"], 3)
    results["encryption"] = {
        "turns": turns,
        "stored_bytes": {"plain": plain_bytes, "keyring": sealed_bytes, "ratio": stored_ratio,
                         "goal": STORED_GOAL, "met": stored_ratio <= STORED_GOAL},
        "warm_append_us": {"plain": round(times["plain"], 1), "keyring": round(times["keyring"], 1),
                           "ratio": append_ratio, "goal": APPEND_GOAL,
                           "met": append_ratio <= APPEND_GOAL},
        "bytes_sent_per_append": {"keyring": {str(h): b for h, b in sent.items()},
                                  "plain": {str(h): b for h, b in sent_plain.items()}},
        # the only growth is the array index's digits, as without a keyring
        "sent_independent_of_history": sent[300] - sent[10] == sent_plain[300] - sent_plain[10],
        # one data key per tenant in this run, one cache period: one wrap and one unwrap each
        "provider_calls": {**provider.calls, "tenants": len(tenants),
                           "met": provider.calls["unwrap"] <= len(tenants)},
    }  # fmt: skip


if __name__ == "__main__":
    import asyncio
    import json

    out: dict[str, Any] = {}
    asyncio.run(run(out))
    print(json.dumps(out, indent=2))
