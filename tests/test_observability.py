"""What mindstore shows of itself: lazy imports, logging, the recorder's footprint, pymongo
event listeners, an existing client, `--version`."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from bson import Int64
from pymongo import AsyncMongoClient, monitoring
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError
from pymongo.monitoring import CommandStartedEvent, CommandSucceededEvent

import mindstore
from mindstore.backends import (
    CommandRecorder,
    EmbeddedClient,
    EmbeddedDatabase,
    RecordedCommand,
    RecorderListener,
    open_backend,
)
from mindstore.errors import ConfigurationError
from mindstore.repositories.tasks import RetryPolicy
from mindstore.store import Store


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
    """A user of a real server never loads mongomock (or motor): not by importing the
    package or its CLI, not by connecting to (or failing to reach) a server; opening the
    embedded backend does load mongomock (so the check is not vacuous), and never motor or
    mongomock-motor (deprecated; the embedded backend wraps mongomock directly)."""
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
print("mongomock" in sys.modules, sorted(m for m in sys.modules if "motor" in m))
"""
    imported, after_server, after_embedded = _python(code).splitlines()
    assert imported == "[]"
    assert after_server == "[]"
    assert after_embedded == "True []"


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
    # what the recorder keeps of each write, one write per append: a store that never
    # seals (a seal's page writes would be commands of their own)
    store = await mindstore.connect("embedded", recorder=recorder, page_policy=None)
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


# --------------------------------------------------------------------------- logging


def test_mindstore_is_silent_until_the_application_configures_logging() -> None:
    code = """
import asyncio, logging
import mindstore
from mindstore.backends import CommandRecorder
async def main(configure):
    if configure:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    store = await mindstore.connect("embedded", recorder=CommandRecorder(slow_ms=0))
    await store.scoped("acme").tasks.create(title="t")  # every command is 'slow'
    logging.getLogger("mindstore.backends.recorder").warning("a warning")
import sys
asyncio.run(main(sys.argv[1] == "configured"))
"""
    silent = subprocess.run(
        [sys.executable, "-c", code, "default"], capture_output=True, text=True, timeout=120
    )
    assert silent.returncode == 0, silent.stderr
    assert silent.stdout == "" and silent.stderr == ""
    shown = subprocess.run(
        [sys.executable, "-c", code, "configured"], capture_output=True, text=True, timeout=120
    )
    assert "mindstore.backends.connection: opened an embedded (in-memory) store" in shown.stderr
    assert "mindstore.backends.recorder: slow insert on " in shown.stderr
    assert "a warning" in shown.stderr
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("mindstore").handlers)


async def test_lost_races_and_conflicts_are_logged_at_debug(
    store: mindstore.Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Two writers that always read the header (no cache) race for one task: the second
    update loses; with one attempt it gives up (Conflict), with three it retries."""
    tid = (await store.scoped("acme").tasks.create()).id

    async def race(attempts: int) -> list[object]:
        writers = [
            Store(store.backend, retry=RetryPolicy(attempts=attempts), header_cache_size=0)
            for _ in range(2)
        ]
        calls = (w.scoped("acme").tasks.add_human_message(tid, "x") for w in writers)
        return await asyncio.gather(*calls, return_exceptions=True)

    logger = "mindstore.repositories.engine"
    with caplog.at_level(logging.DEBUG, logger=logger):
        outcomes = await race(1)
    assert [type(o).__name__ for o in outcomes] == ["UserMessage", "Conflict"]
    lines = [r.getMessage() for r in caplog.records if r.name == logger]
    assert lines == [
        f"task {tid!r}: lost a race to another writer (attempt 1 of 1)",
        f"task {tid!r}: conflict, all 1 attempts lost to concurrent writers",
    ]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=logger):
        outcomes = await race(3)
    assert all(not isinstance(o, BaseException) for o in outcomes)
    lines = [r.getMessage() for r in caplog.records if r.name == logger]
    assert lines == [f"task {tid!r}: lost a race to another writer (attempt 1 of 3)"]
    assert len(await store.scoped("acme").tasks.messages(tid)) == 3


# --------------------------------------------------------------------------- event listeners


class Events(monitoring.CommandListener):
    """Keeps every command event it is given."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.events.append(event)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self.events.append(event)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self.events.append(event)


class Topology(monitoring.TopologyListener):
    """Counts the topologies it saw opening."""

    def __init__(self) -> None:
        self.opens = 0

    def opened(self, event: Any) -> None:
        self.opens += 1

    def description_changed(self, event: Any) -> None:
        pass

    def closed(self, event: Any) -> None:
        pass


class Broken(monitoring.CommandListener):
    def started(self, event: Any) -> None:
        raise RuntimeError("listener bug")

    def succeeded(self, event: Any) -> None:
        raise RuntimeError("listener bug")

    def failed(self, event: Any) -> None:
        raise RuntimeError("listener bug")


def _figures(log: Any) -> list[tuple[Any, ...]]:
    return [
        (c.name, c.collection, c.bytes_sent, c.bytes_received, c.round_trips, c.n_returned, c.ok)
        for c in log
    ]


async def test_the_embedded_backend_feeds_pymongo_command_listeners(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Command listeners see every command as pymongo would report it: started, then
    succeeded or failed, getMore batches included; a `RecorderListener` fed by them counts
    exactly what the embedded recorder counts."""
    events, mirror, topology = Events(), CommandRecorder(), Topology()
    store = await mindstore.connect(
        "embedded",
        event_listeners=[events, RecorderListener(mirror), topology, Broken()],
    )
    acme = store.scoped("acme")
    tid = (await acme.tasks.create(title="t")).id
    await acme.tasks.add_human_message(tid, "hello")
    raw = store.database["raw"]
    await raw.insert_many([{"_id": i} for i in range(150)])
    assert len(await raw.find({}).to_list()) == 150  # first batch of 101, then a getMore
    with pytest.raises(DuplicateKeyError):
        await raw.insert_one({"_id": 1})
    await store.close()

    # a failed command: the embedded recorder counts the error reply's bytes, while the
    # listener is given no reply size for a failure; everything else is the same
    mine, theirs = _figures(store.backend.recorder.records), _figures(mirror.records)
    assert [f for f in theirs if f[-1]] == [f for f in mine if f[-1]]
    assert [f[:3] for f in theirs if not f[-1]] == [f[:3] for f in mine if not f[-1]] != []
    started = [e for e in events.events if isinstance(e, monitoring.CommandStartedEvent)]
    ended = {e.request_id: e for e in events.events if e not in started}
    assert len(ended) == len(started) and {e.request_id for e in started} == set(ended)
    names = [e.command_name for e in started]
    assert {"createIndexes", "insert", "update", "find", "getMore"} <= set(names)
    assert all(e.connection_id == ("embedded", 0) and "$db" in e.command for e in started)
    failed = [e for e in ended.values() if isinstance(e, monitoring.CommandFailedEvent)]
    assert [e.command_name for e in failed] == ["insert"]
    assert "duplicate" in failed[0].failure["errmsg"].lower()
    more = next(e for e in started if e.command_name == "getMore")
    assert len(ended[more.request_id].reply["cursor"]["nextBatch"]) == 49
    assert topology.opens == 0  # accepted; there is no topology to watch
    broken = [r for r in caplog.records if "command listener" in r.getMessage()]
    assert broken and all(r.levelno == logging.ERROR for r in broken)


async def test_listeners_registered_process_wide_reach_the_embedded_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As `pymongo.monitoring.register` does (OpenTelemetry's instrumentation uses it)."""
    events = Events()
    registered = monitoring._LISTENERS._replace(command_listeners=[events])
    monkeypatch.setattr(monitoring, "_LISTENERS", registered)
    store = await mindstore.connect("embedded")
    await store.scoped("acme").tasks.create(title="t")
    assert "insert" in [e.command_name for e in events.events]
    await store.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"event_listeners": [object()]}, r"event_listeners\[0\] must be a pymongo"),
        ({"event_listeners": "listener"}, "event_listeners must be a list"),
        ({"recorder": "yes"}, "recorder must be a CommandRecorder"),
        ({"client": "mongodb://x"}, "client must be a pymongo AsyncMongoClient"),
    ],
)
async def test_bad_monitoring_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        await mindstore.connect(**kwargs)


async def test_a_given_client_excludes_a_uri_and_listeners() -> None:
    client: AsyncMongoClient[Any] = AsyncMongoClient("mongodb://127.0.0.1:1/app", connect=False)
    try:
        with pytest.raises(ConfigurationError, match="either a uri or a client"):
            await mindstore.connect("mongodb://127.0.0.1:1/app", client=client)
        with pytest.raises(ConfigurationError, match="event_listeners cannot be added"):
            await mindstore.connect(client=client, event_listeners=[Events()])
    finally:
        await client.close()


async def test_server_listeners_reach_the_pymongo_client() -> None:
    """No server here: the topology opens (the listener hears it), then the ping fails."""
    topology = Topology()
    with pytest.raises(ConfigurationError, match=r"cannot reach MongoDB at 127\.0\.0\.1:1"):
        await open_backend(
            "mongodb://127.0.0.1:1/app?serverSelectionTimeoutMS=100", event_listeners=[topology]
        )
    assert topology.opens >= 1


@pytest.fixture
def server_answers_ping(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stand in for a server's reply to ``ping`` (there is no server in the test suite)."""
    pings: list[str] = []

    async def command(self: Any, command: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        assert command == "ping", command
        pings.append(self.name)
        return {"ok": 1.0}

    monkeypatch.setattr(AsyncDatabase, "command", command)
    return pings


async def test_connecting_logs_the_server_with_its_password_masked(
    server_answers_ping: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    listener = Events()
    with caplog.at_level(logging.INFO, logger="mindstore"):
        backend = await open_backend(
            "mongodb://app:s3cret@127.0.0.1:1/appdb", event_listeners=[listener]
        )
    try:
        assert server_answers_ping == ["admin"]
        assert backend.kind == "mongodb" and backend.database.name == "appdb"
        given = backend.client.options.event_listeners
        assert listener in given
        fed = [g.recorder for g in given if isinstance(g, RecorderListener)]
        assert fed == [backend.recorder]
        assert "connected to MongoDB at mongodb://app:***@127.0.0.1:1/appdb" in caplog.text
        assert "s3cret" not in caplog.text and "s3cret" not in repr(backend)
    finally:
        await backend.close()


async def test_an_existing_client_is_used_and_left_open(
    server_answers_ping: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    recorder = CommandRecorder()
    client: AsyncMongoClient[Any] = AsyncMongoClient(
        "mongodb://app:s3cret@127.0.0.1:1/appdb",
        connect=False,
        event_listeners=[RecorderListener(recorder)],
    )
    closed: list[bool] = []
    real_close = client.close

    async def close() -> None:
        closed.append(True)
        await real_close()

    client.close = close  # type: ignore[method-assign]
    try:
        with caplog.at_level(logging.INFO, logger="mindstore"):
            backend = await open_backend(client=client)
        assert backend.client is client and backend.kind == "mongodb"
        assert backend.database.name == "appdb" and backend.recorder is recorder
        assert "using the given MongoDB client at 127.0.0.1:1, database 'appdb'" in caplog.text
        assert "s3cret" not in caplog.text and "s3cret" not in repr(backend)
        other = await open_backend(client=client, database="other")
        assert other.database.name == "other" and other.recorder is recorder
        await backend.close()
        await other.close()
        assert closed == []  # the caller's client stays open
    finally:
        await real_close()


async def test_an_unreachable_client_fails_in_one_line_and_stays_open() -> None:
    client: AsyncMongoClient[Any] = AsyncMongoClient(
        "mongodb://app:s3cret@127.0.0.1:1/appdb", connect=False, serverSelectionTimeoutMS=100
    )
    try:
        with pytest.raises(ConfigurationError) as info:
            await open_backend(client=client)
        message = str(info.value)
        assert message.startswith("cannot reach MongoDB at 127.0.0.1:1")
        assert "\n" not in message and "s3cret" not in message
        with pytest.raises(ConfigurationError):  # still usable: it fails the same way again
            await open_backend(client=client)
    finally:
        await client.close()


# --------------------------------------------------------------------------- --version


def test_the_cli_prints_the_installed_version() -> None:
    from typer.testing import CliRunner

    from mindstore.cli import app

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text())["project"]["version"]
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"mindstore {declared}"
    assert mindstore.__version__ == declared
    assert CliRunner().invoke(app, ["--version", "tasks", "list"]).output.strip() == (
        f"mindstore {declared}"  # eager: nothing else runs
    )
