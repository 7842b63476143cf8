"""Stored bytes of one LangGraph thread: `langgraph-checkpoint-mongodb` against `MindstoreSaver`.

Side by side in one run, the same 80-turn tool-calling graph (a `StateGraph` over
`MessagesState`: a scripted model node that calls a search tool for every question and
then answers, LangGraph's `ToolNode`, `tools_condition`) runs once with each saver on the
embedded backend. Each turn is four messages and five checkpoints. Then every document
each saver left is encoded as BSON and summed: the MongoDB saver's `checkpoints` and
`checkpoint_writes`; mindstore's `langgraph_checkpoints`, `langgraph_writes`,
`langgraph_blobs` and the thread's task (the messages, stored once).

Two message sizes: `compact` (questions, answers and tool results of 50-250 characters)
and `documents` (tool results of about 1.5 KB, answers of about 600 characters). A saver
that copies the history into every checkpoint grows with the square of the thread's length
and with the message size; mindstore's per-step cost does not grow with either.

Shim: pymongo >= 4.11 passes `sort=` to bulk `UpdateOne`, which mongomock rejects (and
pymongo 4.20 reads the attribute, so it cannot simply be dropped); here `bulk_write` on the
MongoDB saver's collections applies each `UpdateOne` with `update_one`, the same filter,
update and upsert. Only `put_writes` uses it; it changes what is sent, not what is stored.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
import uuid
from typing import Any

import bson
import mongomock
from langchain_core.messages import AIMessage, HumanMessage, message_to_dict
from langchain_core.tools import tool
from langgraph.checkpoint.mongodb import MongoDBSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import mindstore
from mindstore.documents import LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES
from mindstore.integrations.langgraph import MindstoreSaver

TURNS = 80
GOAL = 50
WORDS = ("the", "manual", "covers", "billing", "refunds", "chapter", "policy", "customer", "account",
         "invoice", "support", "ticket", "escalation", "section", "appendix", "limit", "quota", "plan")  # fmt: skip
PROFILES = {"compact": {"result": 250, "answer": 160}, "documents": {"result": 1500, "answer": 600}}


def text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:size]


def build(checkpointer: Any, profile: dict[str, int], seed: int = 11) -> Any:
    rng = random.Random(seed)

    @tool
    def search(query: str) -> str:
        """Search the manual."""
        return f"Results for {query!r}: " + text(rng, profile["result"])

    calls = {"n": 0}

    def model(state: MessagesState) -> dict[str, Any]:
        calls["n"] += 1
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            call = {"name": "search", "args": {"query": str(last.content)[:40]}, "id": f"call_{calls['n']}"}
            return {"messages": [AIMessage(content="", id=f"ai-{calls['n']}", tool_calls=[call],
                                           usage_metadata={"input_tokens": 400, "output_tokens": 25, "total_tokens": 425})]}  # fmt: skip
        return {"messages": [AIMessage(content=text(rng, profile["answer"]), id=f"ai-{calls['n']}",
                                       usage_metadata={"input_tokens": 900, "output_tokens": 150, "total_tokens": 1050})]}  # fmt: skip

    builder = StateGraph(MessagesState)
    builder.add_node("agent", model)
    builder.add_node("tools", ToolNode([search]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def question(turn: int) -> HumanMessage:
    return HumanMessage(f"Question {turn}: what does the manual say about topic {turn}?", id=f"q-{turn}")


class _BulkShim:
    """A mongomock collection whose `bulk_write` applies each `UpdateOne` on its own."""

    def __init__(self, collection: Any) -> None:
        self._c = collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)

    def bulk_write(self, requests: list[Any], *args: Any, **kwargs: Any) -> None:
        for request in requests:
            self._c.update_one(request._filter, request._doc, upsert=request._upsert)


class _ShimDatabase:
    def __init__(self, database: Any) -> None:
        self._d = database

    def __getitem__(self, name: str) -> _BulkShim:
        return _BulkShim(self._d[name])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._d, name)


class _ShimClient:
    def __init__(self, client: Any) -> None:
        self._c = client

    def __getitem__(self, name: str) -> _ShimDatabase:
        return _ShimDatabase(self._c[name])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)


def _bytes(documents: list[dict[str, Any]]) -> int:
    return sum(len(bson.encode(document)) for document in documents)


def _plain(messages: list[Any]) -> list[Any]:
    """Messages as dicts, with the random ids LangGraph gives id-less messages masked."""
    out = []
    for message in messages:
        data = message_to_dict(message)
        if isinstance(message.id, str) and len(message.id) == 36 and message.id.count("-") == 4:
            data["data"]["id"] = "<uuid>"
        out.append(data)
    return out


def run_mongodb(profile: dict[str, int], turns: int) -> dict[str, Any]:
    raw = mongomock.MongoClient()
    saver = MongoDBSaver(_ShimClient(raw), db_name="bench")
    graph = build(saver, profile)
    config = {"configurable": {"thread_id": "thread-1"}}
    start = time.perf_counter()
    for turn in range(turns):
        graph.invoke({"messages": [question(turn)]}, config)
    elapsed = time.perf_counter() - start
    collections = {name: list(raw["bench"][name].find()) for name in ("checkpoints", "checkpoint_writes")}
    state = graph.get_state(config).values["messages"]
    history = sum(1 for _ in graph.get_state_history(config))
    return {
        "bytes_stored": sum(_bytes(docs) for docs in collections.values()),
        "by_collection": {name: {"documents": len(docs), "bytes": _bytes(docs)} for name, docs in collections.items()},
        "seconds": round(elapsed, 2),
        "checkpoints": history,
        "messages": _plain(state),
    }


async def run_mindstore(profile: dict[str, int], turns: int) -> dict[str, Any]:
    store = await mindstore.connect("embedded", database=f"bench_{uuid.uuid4().hex[:8]}")
    try:
        saver = MindstoreSaver(store.scoped("bench"))
        graph = build(saver, profile)
        config = {"configurable": {"thread_id": "thread-1"}}
        start = time.perf_counter()
        for turn in range(turns):
            await graph.ainvoke({"messages": [question(turn)]}, config)
        elapsed = time.perf_counter() - start
        database = store.database
        collections = {}
        for name in (LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES, LANGGRAPH_BLOBS, "tasks", "payloads"):
            collections[name] = await database[name].find({"tenant": "bench"}).to_list(length=None)
        state = (await graph.aget_state(config)).values["messages"]
        start = time.perf_counter()
        history = [s async for s in graph.aget_state_history(config)]
        history_seconds = time.perf_counter() - start
        task = collections["tasks"][0]["messages"] if collections["tasks"] else []
        return {
            "bytes_stored": sum(_bytes(docs) for docs in collections.values()),
            "by_collection": {name: {"documents": len(docs), "bytes": _bytes(docs)} for name, docs in collections.items()},
            "seconds": round(elapsed, 2),
            "checkpoints": len(history),
            "state_history_seconds": round(history_seconds, 2),
            "task_message_bytes": _bytes(task),
            "task_message_bytes_without_null_fields": _bytes([_without_nulls(m) for m in task]),
            "messages": _plain(state),
        }
    finally:
        await store.close()


def _without_nulls(value: Any) -> Any:
    """A stored message without its null, empty and zero fields (what a leaner stored form
    of mindstore messages would keep): an estimate, reported next to the measured bytes."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items()
                if v not in (None, [], {}, False, 0, 0.0) or k in ("id", "role", "type")}  # fmt: skip
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


async def run(results: dict[str, Any], *, turns: int = TURNS) -> None:
    out: dict[str, Any] = {"turns": turns, "goal_ratio": GOAL, "profiles": {}}
    for name, profile in PROFILES.items():
        peer = await asyncio.to_thread(run_mongodb, profile, turns)
        ours = await run_mindstore(profile, turns)
        same = peer.pop("messages") == ours.pop("messages")
        ratio = round(peer["bytes_stored"] / ours["bytes_stored"], 1)
        lean = ours["bytes_stored"] - ours["task_message_bytes"] + ours["task_message_bytes_without_null_fields"]
        out["profiles"][name] = {
            "message_chars": profile,
            "langgraph_checkpoint_mongodb": peer,
            "mindstore_saver": ours,
            "ratio": ratio,
            "meets_goal": ratio >= GOAL,
            "same_final_messages": same,
            "ratio_if_stored_messages_dropped_null_fields": round(peer["bytes_stored"] / lean, 1),
        }
        print(f"  langgraph_storage: {name}: {peer['bytes_stored']:,} B vs {ours['bytes_stored']:,} B "
              f"({ratio}x)", file=sys.stderr, flush=True)  # fmt: skip
    out["notes"] = [
        "one run per saver on the embedded backend; bytes = BSON of every document each saver stored for the thread",
        "MongoDB saver: a checkpoint document holds every channel value, so the whole messages list is stored at "
        "every step (it grows with the square of the thread); mindstore: the messages once, in the thread's task, "
        "checkpoints hold counts, writes refer to the task's messages, other values are written once per version",
        "shim: mongomock rejects the sort= that pymongo >= 4.11 passes to bulk UpdateOne; the MongoDB saver's "
        "bulk_write is applied as one update_one per request (put_writes only); stored documents are unchanged",
        "ratio_if_stored_messages_dropped_null_fields: an estimate, not a measurement of shipped code: the same run "
        "with mindstore's stored messages leaving out their null, empty and zero fields",
    ]
    results["langgraph_storage"] = out


if __name__ == "__main__":
    import json

    collected: dict[str, Any] = {}
    asyncio.run(run(collected, turns=20 if "--quick" in sys.argv else TURNS))
    print(json.dumps(collected, indent=2))
