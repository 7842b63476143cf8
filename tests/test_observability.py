"""What mindstore shows of itself: lazy imports, logging, the recorder's footprint, pymongo
event listeners, an existing client, `--version`."""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
import sys

import pytest
from bson import Int64
from pymongo.monitoring import CommandStartedEvent, CommandSucceededEvent

import mindstore
from mindstore.backends import (
    CommandRecorder,
    EmbeddedClient,
    EmbeddedDatabase,
    RecordedCommand,
    RecorderListener,
)


@pytest.fixture
def recorder_db() -> EmbeddedDatabase:
    return EmbeddedClient(recorder=CommandRecorder()).get_database("obs")


EMBEDDED_MODULES = "[m for m in sys.modules if 'mongomock' in m or 'motor' in m]"


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# --------------------------------------------------------------------------- lazy imports


def test_importing_mindstore_loads_no_embedded_backend() -> None:
    """A user of a real server never loads mongomock, mongomock-motor or motor: not by
    importing the package or its CLI, not by connecting to (or failing to reach) a server;
    opening the embedded backend does load them (so the check is not vacuous)."""
    code = f"""
import asyncio, sys
import mindstore, mindstore.backends, mindstore.cli
print(sorted({EMBEDDED_MODULES}))
try:
    asyncio.run(mindstore.connect("mongodb://127.0.0.1:1/db?serverSelectionTimeoutMS=50"))
except mindstore.ConfigurationError:
    pass
print(sorted({EMBEDDED_MODULES}))
asyncio.run(mindstore.connect("embedded"))
print("mongomock" in sys.modules and "mongomock_motor" in sys.modules)
"""
    imported, after_server, after_embedded = _python(code).splitlines()
    assert imported == "[]"
    assert after_server == "[]"
    assert after_embedded == "True"


def test_embedded_names_stay_importable_from_both_places() -> None:
    import mindstore.backends as backends
    import mindstore.backends.embedded as embedded

    for name in embedded.__all__:
        if name in backends.__all__:
            assert getattr(backends, name) is getattr(embedded, name)
    assert backends.load_snapshot.__module__ == "mindstore.backends.snapshot"


# --------------------------------------------------------------------------- the recorder


def _deep_size(value: object, seen: set[int] | None = None) -> int:
    """Bytes of everything `value` keeps alive (shared objects counted once)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        size += sum(_deep_size(v, seen) for v in value)
    elif hasattr(value, "__slots__"):
        size += sum(_deep_size(getattr(value, s, None), seen) for s in value.__slots__)
    return size


PAYLOAD_FIELDS = ("filter", "update", "pipeline", "projection", "documents", "writes")


@pytest.mark.parametrize("keep", [False, True])
async def test_the_recorder_keeps_sizes_only_unless_asked(keep: bool) -> None:
    recorder = CommandRecorder(keep_payloads=keep)
    store = await mindstore.connect("embedded", recorder=recorder)
    acme = store.scoped("acme")
    tid = (await acme.tasks.create(title="big")).id
    for _ in range(30):
        await acme.tasks.add_human_message(tid, "x" * 20_000)
    updates = recorder.records.by_name("update")
    assert len(updates) == 30 and all(c.bytes_sent > 20_000 for c in updates)
    held = _deep_size(recorder.records)
    if keep:
        assert all(c.update for c in updates) and held > 30 * 20_000
    else:
        assert all(getattr(c, f) is None for c in recorder.records for f in PAYLOAD_FIELDS)
        assert held < len(recorder.records) * 1_000  # figures only, whatever was sent
    await store.close()


def test_a_payload_capture_keeps_its_copies_and_the_records_lose_theirs() -> None:
    recorder = CommandRecorder(max_records=100)
    with recorder.capture(payloads=True) as outer:
        recorder.record(RecordedCommand(name="find", filter={"a": 1}))
        with recorder.capture() as inner:  # sizes only, nested in a payload capture
            recorder.record(RecordedCommand(name="update", filter={"b": 1}, bytes_sent=7))
        assert [c.bytes_sent for c in inner] == [7]
        assert recorder.records[0].filter == {"a": 1}  # still shared while `outer` is open
    assert [c.filter for c in outer] == [{"a": 1}, {"b": 1}]
    assert [c.filter for c in recorder.records] == [None, None]
    with recorder.capture() as plain:
        recorder.record(RecordedCommand(name="find", filter={"c": 1}))
    assert plain[0].filter is None and recorder.records[-1].filter is None


async def test_a_payload_capture_sees_cursor_batches_folded_in(
    recorder_db: EmbeddedDatabase,
) -> None:
    coll = recorder_db["batches"]
    await coll.insert_many([{"_id": i} for i in range(250)])
    with coll.database.reporter.recorder.capture(payloads=True) as log:  # type: ignore[union-attr]
        assert len(await coll.find({"_id": {"$gte": 0}}).to_list()) == 250
    assert log[0].round_trips == 2 and log[0].filter == {"_id": {"$gte": 0}}


async def test_commands_carry_their_duration(recorder_db: EmbeddedDatabase) -> None:
    await recorder_db["d"].insert_one({"_id": 1})
    await recorder_db["d"].find_one({"_id": 1})
    recorder = recorder_db.reporter.recorder
    assert recorder is not None
    assert [c.name for c in recorder.records] == ["insert", "find"]
    assert all(0 < c.duration_ms < 5_000 for c in recorder.records)


async def test_slow_commands_are_logged_without_their_payload(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "do-not-log-" + "s" * 50
    slow = EmbeddedClient(recorder=CommandRecorder(slow_ms=0)).get_database("db")
    fast = EmbeddedClient(recorder=CommandRecorder()).get_database("db")  # 100 ms
    silent = EmbeddedClient(recorder=CommandRecorder(slow_ms=None)).get_database("db")
    with caplog.at_level(logging.INFO, logger="mindstore"):
        await slow["notes"].insert_one({"_id": 1, "text": secret})
        await fast["notes"].insert_one({"_id": 1, "text": secret})
        await silent["notes"].insert_one({"_id": 1, "text": secret})
    lines = [r.getMessage() for r in caplog.records if r.name == "mindstore.backends.recorder"]
    assert len(lines) == 1, lines
    assert lines[0].startswith("slow insert on db.notes: ")
    assert __file__ in lines[0]  # the code that sent it
    assert secret not in caplog.text


def test_a_real_server_command_is_slow_by_the_listener_duration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = CommandRecorder(slow_ms=100)
    listener = RecorderListener(recorder)
    address = ("db.example", 27017)
    with caplog.at_level(logging.INFO, logger="mindstore"):
        for request_id, micros in ((1, 150_000), (2, 2_000)):
            command = {"find": "tasks", "filter": {"_id": "t"}, "$db": "app"}
            listener.started(CommandStartedEvent(command, "app", request_id, address, request_id))
            reply = {"cursor": {"firstBatch": [], "id": Int64(0), "ns": "app.tasks"}, "ok": 1.0}
            duration = dt.timedelta(microseconds=micros)
            listener.succeeded(
                CommandSucceededEvent(
                    duration, reply, "find", request_id, address, request_id, database_name="app"
                )
            )
    assert [c.duration_ms for c in recorder.records] == [150.0, 2.0]
    lines = [r.getMessage() for r in caplog.records if r.name == "mindstore.backends.recorder"]
    assert len(lines) == 1 and lines[0].startswith("slow find on app.tasks: 150.0 ms"), lines
