"""Write `store.json`: stored documents of one encrypted tenant as the release before
ciphertext format 2 wrote them (format 1), for `tests/test_crypto_binding.py` to prove
that such data still reads and that the sweep moves it to format 2.

Run it with that release's sources and tests first on the path (it imports the test
helpers that drive a LangGraph graph), from this directory:

    PYTHONPATH=<old>/src:<old>/tests python make.py

The master key is fixed (`MASTER`): test data only. Nothing else here is random but the
nonces, ids and times the store draws itself.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bson import json_util

import mindstore
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.formats.agent_state import AgentState
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TextPart

MASTER = bytes(range(32))
OFFLOAD = 1024
BIG = "payload " + "p" * 2 * OFFLOAD
COLLECTIONS = (
    "data_keys", "tasks", "task_pages", "payloads",
    "langgraph_checkpoints", "langgraph_writes", "langgraph_blobs",
)  # fmt: skip


async def main() -> None:
    from test_crypto_integrations import graph_on  # the old release's test helpers

    store = await mindstore.connect(
        "embedded", database="format1", keyring=Keyring(LocalMasterKey(MASTER)),
        offload_threshold=OFFLOAD,
    )  # fmt: skip
    acme = store.scoped("acme")
    task = await acme.tasks.create(
        task_id="old-task", title="old title", metadata={"city": "Lisbon", "n": 3},
        content=[TextPart(text="first part"), TextPart(text="second part")],
    )  # fmt: skip
    await acme.tasks.add_human_message(task.id, "hello there", message_id="m1")
    await acme.tasks.add_message(
        task.id, UserMessage(id="m2", content=[TextPart(text=BIG), TextPart(text="small")])
    )
    await acme.tasks.save_agent_state(task.id, AgentState(summary="old summary", node="n1"))
    await graph_on(store, "t1", ["billing?"])
    await graph_on(store, "t2", ["refunds?"])
    dump: dict[str, list[Any]] = {}
    for name in COLLECTIONS:
        dump[name] = await store.database[name].find({}).sort("_id", 1).to_list(None)
    text = json_util.dumps(dump, json_options=json_util.CANONICAL_JSON_OPTIONS, indent=1)
    Path(__file__).with_name("store.json").write_text(json.dumps(json.loads(text), indent=1))
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
