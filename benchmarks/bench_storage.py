"""Bytes stored for one conversation: mindstore's lean stored form, the form it wrote before,
and LangChain's `MongoDBChatMessageHistory`, side by side in one run.

The conversation is the 80-turn tool-calling agent of `bench_langgraph_storage` (compact
profile: a question, a model turn that calls the search tool, the tool's result, the
answer; 320 LangChain messages). The payload is those messages as JSON
(`json.dumps([message_to_dict(m) ...])`), what a caller hands over.

Stored, each on the same backend (embedded, or `MINDSTORE_URI`):

- `mindstore`: the messages typed (`from_langchain`, their LangChain ids as message ids, as
  the LangGraph saver stores them), appended one graph step at a time; bytes = the BSON of
  the task document (header and messages);
- `mindstore_chat_history`: the same through `MindstoreChatMessageHistory`, the drop-in
  LangChain chat history (it gives each message a fresh id and keeps LangChain's id in the
  message metadata);
- `langchain_mongodb_history`: `MongoDBChatMessageHistory.add_message` per message; bytes =
  the BSON of every document of the session (one per message: `_id`, `SessionId`, the
  message as a JSON string).

`before` is the same task document with its messages in the form written before the lean
one (every field, nulls and defaults included, the task id on every message), computed in
the same run from the messages read back; `left_out_bytes` says what the lean form saves,
by kind. `same_messages` checks that reading the task gives back the LangChain messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

import bson
import mongomock
from langchain_core.messages import BaseMessage, message_to_dict
from langchain_mongodb.chat_message_histories import MongoDBChatMessageHistory
from langgraph.checkpoint.memory import InMemorySaver
from pymongo import MongoClient

import mindstore
from benchmarks.bench_langgraph_storage import PROFILES, build, question
from mindstore.integrations.langchain import MindstoreChatMessageHistory
from mindstore.integrations.langchain_messages import from_langchain, to_langchain
from mindstore.model.plans import full_stored_doc, stored_doc
from mindstore.model.storage_form import element_size

TURNS = 80
GOAL_RATIO = 1.1
"""Issue 20: stored bytes at most this times the payload, and below LangChain's history."""


def conversation(turns: int) -> list[list[BaseMessage]]:
    """The graph's messages, grouped by the step that produced them."""
    graph = build(InMemorySaver(), PROFILES["compact"])
    config = {"configurable": {"thread_id": "storage"}}
    steps: list[list[BaseMessage]] = []
    seen = 0
    for turn in range(turns):
        for update in graph.stream({"messages": [question(turn)]}, config, stream_mode="values"):
            messages = update["messages"]
            if len(messages) > seen:
                steps.append(list(messages[seen:]))
                seen = len(messages)
    return steps


def _bytes(document: dict[str, Any]) -> int:
    return len(bson.encode(document))


def left_out(full: Any, lean: Any, top: bool = True) -> dict[str, int]:
    """Bytes of the elements `full` has and `lean` does not, by kind (null, default, task_id)."""
    out = {"null": 0, "default": 0, "task_id": 0}
    if isinstance(full, dict) and isinstance(lean, dict):
        for key, value in full.items():
            if key not in lean:
                kind = (
                    "task_id"
                    if top and key == "task_id"
                    else "null"
                    if value is None
                    else "default"
                )
                out[kind] += element_size(key, value)
            else:
                for kind, size in left_out(value, lean[key], top=False).items():
                    out[kind] += size
    elif isinstance(full, list) and isinstance(lean, list):
        for item, lean_item in zip(full, lean, strict=False):
            for kind, size in left_out(item, lean_item, top=False).items():
                out[kind] += size
    return out


def _row(document: dict[str, Any], payload: int) -> dict[str, Any]:
    messages = document.get("messages", [])
    return {"bytes_stored": _bytes(document), "message_bytes": sum(_bytes(m) for m in messages),
            "ratio_to_payload": round(_bytes(document) / payload, 3)}  # fmt: skip


async def _mindstore(
    store: Any, steps: list[list[BaseMessage]], payload: int
) -> tuple[dict[str, Any], dict[str, int]]:
    tasks = store.scoped("bench").tasks
    task_id = (await tasks.create(task_id=f"storage-{uuid.uuid4().hex[:8]}")).id
    for step in steps:
        await tasks.add_messages(task_id, from_langchain(step, check=True))
    document = await store.database["tasks"].find_one({"_id": f"bench/{task_id}"})
    read = await tasks.messages(task_id)
    before = dict(document, messages=[full_stored_doc(m) for m in read])
    before["size_bytes"] = sum(_bytes(m) for m in before["messages"])
    row = _row(document, payload)
    row["before"] = _row(before, payload)
    row["same_messages"] = to_langchain(read) == [m for step in steps for m in step]
    row["lean_equals_stored_doc"] = document["messages"] == [stored_doc(m, task_id) for m in read]
    saved = {"null": 0, "default": 0, "task_id": 0}
    for full, lean in zip(before["messages"], document["messages"], strict=True):
        for kind, size in left_out(full, lean).items():
            saved[kind] += size
    return row, saved


async def _chat_history(store: Any, steps: list[list[BaseMessage]], payload: int) -> dict[str, Any]:
    session = f"history-{uuid.uuid4().hex[:8]}"
    history = MindstoreChatMessageHistory(session, store.scoped("bench"))
    for step in steps:
        await history.aadd_messages(step)
    document = await store.database["tasks"].find_one({"_id": f"bench/{session}"})
    read = await store.scoped("bench").tasks.messages(session)
    before = dict(document, messages=[full_stored_doc(m) for m in read])
    before["size_bytes"] = sum(_bytes(m) for m in before["messages"])
    row = _row(document, payload)
    row["before"] = _row(before, payload)
    row["same_messages"] = await history.aget_messages() == [m for step in steps for m in step]
    return row


def _langchain(
    client: Any, database: str, steps: list[list[BaseMessage]], payload: int
) -> dict[str, Any]:
    session = uuid.uuid4().hex
    history = MongoDBChatMessageHistory(None, session, database_name=database, client=client,
                                        create_index=False)  # fmt: skip
    for step in steps:
        for message in step:
            history.add_message(message)
    documents = list(
        client[database][history.collection.name].find({history.session_id_key: session})
    )
    stored = sum(_bytes(d) for d in documents)
    return {"bytes_stored": stored, "documents": len(documents), "ratio_to_payload": round(stored / payload, 3),
            "same_messages": history.messages == [m for step in steps for m in step]}  # fmt: skip


async def run(results: dict[str, Any], *, turns: int = TURNS) -> None:
    steps = conversation(turns)
    messages = [m for step in steps for m in step]
    payload = len(json.dumps([message_to_dict(m) for m in messages]).encode())
    uri = os.environ.get("MINDSTORE_URI")
    database = f"bench_{uuid.uuid4().hex[:8]}"
    store = await mindstore.connect(uri or "embedded", database=database)
    client: Any = MongoClient(uri) if uri else mongomock.MongoClient()
    try:
        ours, saved = await _mindstore(store, steps, payload)
        history = await _chat_history(store, steps, payload)
        peer = await asyncio.to_thread(_langchain, client, f"peer_{database}", steps, payload)
    finally:
        if uri:
            client.drop_database(f"peer_{database}")
            await store.backend.client.drop_database(database)
        client.close()
        await store.close()
    lean_total = sum(saved.values())
    results["storage"] = {
        "backend": "mongodb" if uri else "embedded",
        "turns": turns,
        "messages": len(messages),
        "payload_json_bytes": payload,
        "goal_ratio": GOAL_RATIO,
        "rows": {
            "mindstore": ours,
            "mindstore_chat_history": history,
            "langchain_mongodb_history": peer,
        },
        "left_out_bytes": {
            **saved,
            "total": lean_total,
            "share_of_before_message_bytes": round(lean_total / ours["before"]["message_bytes"], 3),
        },
        "meets_goal": {
            "at_most_goal_ratio": ours["ratio_to_payload"] <= GOAL_RATIO,
            "below_langchain_history": ours["bytes_stored"] < peer["bytes_stored"],
        },
        "notes": [
            "payload = json.dumps of LangChain's message_to_dict of every message (default separators)",
            "mindstore: typed messages with their LangChain ids, one add_messages per graph step; bytes = the "
            "task document's BSON (header included); before = the same document with the messages in the "
            "form written before the lean one (computed in the same run from the messages read back)",
            "mindstore_chat_history: MindstoreChatMessageHistory, which gives every message a fresh id and keeps "
            "LangChain's id in the message metadata (about 100 B a message)",
            "langchain_mongodb_history: one document per message (ObjectId, SessionId, the message as a JSON "
            "string); bytes = their BSON",
        ],
    }
    print(f"  storage: payload {payload:,} B; mindstore {ours['bytes_stored']:,} B ({ours['ratio_to_payload']}x, "
          f"before {ours['before']['bytes_stored']:,} B); LangChain {peer['bytes_stored']:,} B "
          f"({peer['ratio_to_payload']}x)", file=sys.stderr, flush=True)  # fmt: skip


if __name__ == "__main__":
    collected: dict[str, Any] = {}
    asyncio.run(run(collected, turns=20 if "--quick" in sys.argv else TURNS))
    print(json.dumps(collected, indent=2))
