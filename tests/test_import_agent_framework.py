"""`mindstore import --from agent-framework`: a real `FileHistoryProvider` folder (JSON
Lines and MessagePack files, session ids that are and are not safe file names), read
back through `MindstoreHistoryProvider` and compared with what the framework's own
provider returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content, FileHistoryProvider, Message

from mindstore.errors import ValidationError
from mindstore.imports import UnreadableSource, import_from
from mindstore.integrations.agent_framework import MindstoreHistoryProvider
from mindstore.store import Store
from test_import_support import crash_then_resume, store_bytes

KIND = "agent-framework"
JSON_SESSIONS = ("refund-1", "Support Case/7", None)
BINARY_SESSIONS = ("binary-9",)


def turn(session: str | None) -> list[Message]:
    call = Content.from_function_call(call_id="call-1", name="lookup",
                                      arguments={"topic": "refunds"})  # fmt: skip
    result = Content.from_function_result(call_id="call-1", result="5 business days")
    return [
        Message(role="user", contents=[f"How long do refunds take? ({session})"],
                message_id="u1"),
        Message(role="assistant", contents=[call], message_id="a1", author_name="helper"),
        Message(role="tool", contents=[result], message_id="t1"),
        Message(role="assistant", contents=["Refunds take 5 business days."], message_id="a2",
                additional_properties={"model": "scripted-1"}),
    ]  # fmt: skip


async def build_source(folder: Path) -> dict[str | None, list[Message]]:
    found: dict[str | None, list[Message]] = {}
    for sessions, fmt in ((JSON_SESSIONS, "json"), (BINARY_SESSIONS, "msgpack")):
        provider = FileHistoryProvider(folder, serialization_format=fmt)  # type: ignore[arg-type]
        for session in sessions:
            messages = turn(session)
            await provider.save_messages(session, messages[:2])
            await provider.save_messages(session, messages[2:])
            found[session] = await provider.get_messages(session)
    return found


def imported_id(session: str | None) -> str:
    return "default" if session is None else session


async def served(store: Store, tenant: str) -> dict[str | None, list[Message]]:
    provider = MindstoreHistoryProvider(store.scoped(tenant))
    return {s: await provider.get_messages(s) for s in (*JSON_SESSIONS, *BINARY_SESSIONS)}


def dumped(found: dict[str | None, list[Message]]) -> dict[str | None, Any]:
    return {s: [m.to_dict() for m in messages] for s, messages in found.items()}


async def test_every_session_reads_back_as_the_file_provider_returns_it(
    store: Store, tmp_path: Path
) -> None:
    expected = await build_source(tmp_path / "history")
    receipt = await import_from(store, KIND, tmp_path / "history", tenant="acme")
    got = await served(store, "acme")
    assert dumped(got) == dumped(expected)
    assert [m.contents[0].type for m in got["refund-1"]] == [
        "text", "function_call", "function_result", "text"]  # fmt: skip
    assert receipt.read == {"conversations": 4, "messages": 16} == receipt.written
    assert sorted(receipt.conversations) == sorted(["refund-1", "Support Case/7", "default",
                                                    "binary-9"])  # fmt: skip
    assert receipt.read_sha256 == receipt.written_sha256


async def test_rerun_dry_run_crash_and_bad_sources(store: Store, tmp_path: Path) -> None:
    expected = await build_source(tmp_path / "history")
    folder = tmp_path / "history"
    before = await store_bytes(store)
    dry = await import_from(store, KIND, folder, tenant="acme", dry_run=True)
    assert dry.written == {"conversations": 4, "messages": 16}
    empty = tmp_path / "empty"
    empty.mkdir()
    for bad, reason in [(tmp_path / "none", "no such folder"), (empty, "no history files")]:
        with pytest.raises(UnreadableSource, match=reason):
            await import_from(store, KIND, bad, tenant="acme")
    with pytest.raises(ValidationError, match="owner"):
        await import_from(store, KIND, folder, tenant="acme", owner="$x")
    assert await store_bytes(store) == before
    assert not (tmp_path / "none").exists()  # the framework's reader never made it
    await import_from(store, KIND, folder, tenant="acme")
    before = await store_bytes(store)
    again = await import_from(store, KIND, folder, tenant="acme")
    assert again.written == {"conversations": 0, "messages": 0}
    assert await store_bytes(store) == before

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, KIND, folder, tenant=tenant, on_step=hook)

    async def check(tenant: str) -> None:
        assert dumped(await served(store, tenant)) == dumped(expected)

    assert await crash_then_resume(run, check) == 4
