"""Every role and every part type survives a trip through the store unchanged."""

from __future__ import annotations

import bson
import pytest

from mindstore.errors import ValidationError
from mindstore.model.messages import (
    MESSAGE_CLASSES,
    Origin,
    Usage,
    UsageCost,
    message_to_dict,
    parse_message,
)
from mindstore.model.parts import KNOWN_PART_TYPES

MEDIA = {
    "kind": "url",
    "url": "https://example.com/a.mp4",
    "mime_type": "video/mp4",
    "size_bytes": 10,
}
SAMPLE_PARTS: dict[str, dict] = {
    "text": {"type": "text", "text": "héllo ✓"},
    "image": {
        "type": "image",
        "image": "aW1n",
        "mime_type": "image/png",
        "alt_text": "a cat",
        "bbox": [0.0, 1.0, 2.0, 3.0],
    },
    "file": {
        "type": "file",
        "data": "ZmlsZQ==",
        "mime_type": "application/pdf",
        "filename": "a.pdf",
    },
    "reasoning": {
        "type": "reasoning",
        "reasoning": "because",
        "signature": "s",
        "started_ts": 1.5,
        "finished_ts": 2.5,
    },
    "redacted_thinking": {"type": "redacted_thinking", "data": "xx"},
    "thinking": {"type": "thinking", "content": "hmm", "signature": "sig=="},
    "toolCall": {
        "type": "toolCall",
        "tool_call_id": "c1",
        "tool_name": "search",
        "args": {"$ref": "#/a", "a.b": [1, {"$schema": "s"}]},
        "is_loading": False,
        "is_approval_pending": False,
    },
    "toolResult": {
        "type": "toolResult",
        "tool_call_id": "c1",
        "tool_name": "search",
        "result": {"$id": 1, "rows": [1, 2]},
        "observer_results": [
            {"is_success": True, "observer_name": "safety", "message": "ok", "data": {"k": 1}}
        ],
        "is_error": True,
        "error": "boom",
        "tool_result_contents": [{"type": "image", "image_data": "aQ==", "mime_type": "image/png"}],
        "terminate": True,
        "metadata": {"trace": "t1"},
    },
    "informational": {
        "type": "informational",
        "is_visible_ai": True,
        "details": "d",
        "additional_data": [{"x": 1}],
    },
    "compression": {
        "type": "compression",
        "start_message_idx": 0,
        "end_message_idx": 3,
        "reason": "token_limit",
        "strategies": ["tool_compression"],
        "compressed_message_ids": ["a"],
        "kept_message_ids": ["b"],
        "cache": {"summary": "s"},
        "metadata": {"checkpoint": {"checkpoint_id": "b"}},
    },
    "taskconfig": {
        "type": "taskconfig",
        "model_name": "m",
        "tool_metadata": [{"name": "t", "parameters": {"$schema": "x"}, "is_task_entry": True}],
        "compression_config": {"enabled": False, "token_limit": 1000},
    },
    "taskentry": {
        "type": "taskentry",
        "initial_task_config": {"type": "taskconfig", "model_name": "m2"},
        "initial_context": [
            {"type": "text", "text": "ctx"},
            {"type": "informational", "details": "i"},
        ],
    },
    "taskexit": {
        "type": "taskexit",
        "handoff_description": [
            {"type": "text", "text": "done"},
            {"type": "image", "image": "aQ=="},
        ],
    },
    "audio": {
        "type": "audio",
        "audio": ["YXVkaW8=", b"ID3\x00raw"],
        "mime_type": "audio/mpeg",
        "transcript": "hi",
        "sample_rate": 16000,
        "channels": 1,
    },
    "video": {"type": "video", "media": MEDIA, "thumbnail": {"kind": "file_id", "file_id": "f1"}},
    "document": {
        "type": "document",
        "media": {"kind": "data", "data_base64": "ZG9j"},
        "pages": [1, 2],
        "excerpt": "e",
    },
    "data": {"type": "data", "mime_type": "application/json", "data_base64": "e30=", "media": None},
    "annotation": {
        "type": "annotation",
        "kind": "citation",
        "refs": [{"url": "https://x", "page": 3}],
        "spans": [[0, 4]],
    },
    "error": {
        "type": "error",
        "message": "rate limited",
        "code": "429",
        "data": {"retry_after": 3},
    },
}


def test_the_sample_covers_every_known_part_type():
    assert set(SAMPLE_PARTS) == set(KNOWN_PART_TYPES)


async def test_every_role_and_part_round_trips_through_the_store(acme):
    originals = []
    for index, role in enumerate(MESSAGE_CLASSES):
        if role in {"taskentry", "taskexit"}:
            continue  # structural messages: exercised through the verbs elsewhere
        message = parse_message(
            {
                "role": role,
                "id": f"msg-{role}",
                "started_ts": 1_700_000_000 + index,
                "content": [*SAMPLE_PARTS.values(), {"type": "future_part", "x": {"$y": 1}}],
                "name": "agent-7",
                "logprobs": [{"token": "a", "logprob": -0.1}],
                "metadata": {"$k": bson.Int64(5)},
                "usage": Usage(input_tokens=3, cost=UsageCost(total=0.5)).to_dict(),
                "origin": Origin(task_id="parent", index=index).to_dict(),
            }
        )
        originals.append(message)
    unknown = parse_message(
        {"role": "critic", "id": "u1", "verdict": {"$gt": 3}, "nested": [b"\x00\x01"]}
    )
    # Every part in every role breaks the per-role rules of new writes on purpose: this is
    # stored history as another writer left it, imported as such (one insert), and it must
    # come back byte for byte.
    tid = (await acme.tasks.create(messages=[*originals, unknown], replay=True)).id
    stored = await acme.tasks.messages(tid)
    for before, after in zip([*originals, unknown], stored, strict=True):
        expected = message_to_dict(before)
        assert message_to_dict(after) == expected
        assert type(after) is type(before)
    # the unknown message is returned exactly as given: the store's own fields stay out
    assert message_to_dict(stored[-1]) == {
        "role": "critic",
        "id": "u1",
        "verdict": {"$gt": 3},
        "nested": [b"\x00\x01"],
    }
    with pytest.raises(ValidationError):  # as a new write, a user message cannot hold a call
        await acme.tasks.add_messages(tid, [originals[1].model_copy(update={"id": "again"})])
