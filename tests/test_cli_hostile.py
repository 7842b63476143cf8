"""The command line against hostile input: stored data that looks like markup, escape
sequences or spreadsheet formulas; numbers no store can take; paths it cannot write;
data files that are missing or malformed; unknown tenants; bad URIs.

Every refusal is one ``error:`` line on stderr (no traceback) and a documented exit
code; stored data is shown as it is, never acted on.
"""

from __future__ import annotations

import asyncio
import csv
import gzip
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app
from mindstore.model.parts import TaskConfigPart
from test_backup_support import new_store, resign

runner = CliRunner()

TITLE = "[/bold]\x1b[31mred\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \u202eevil\u202c"
OWNER = "[red]mallory[/red]"
FORMULA = '=HYPERLINK("https://evil.example","x")'
TEXTS = ["[/bold] [link=https://evil.example]x[/link]", "\x1b[2J\x1b[H cleared", "-2+3", "@SUM(A1)",
         "+1", "\tindented", "\rcarriage", "line one\nline two", FORMULA]  # fmt: skip
CONFIG = TaskConfigPart(model_name="m")
TERMINAL_ACTIONS = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def invoke(data: Path | None, *args: str, **kwargs):
    prefix = ["--data", str(data)] if data is not None else []
    return runner.invoke(app, [*prefix, *args], **kwargs)


def by_id(tenant: str, task_id: str) -> dict:
    return {"tenant": tenant, "_id": {"$in": [task_id, f"{tenant}/{task_id}"]}}


async def _hostile_store(path: Path) -> dict:
    store = await mindstore.connect("embedded", database="cli_hostile")
    try:
        acme = store.scoped("acme")
        task = await acme.tasks.create(owner="alice", title="plain", task_id="t1")
        for text in TEXTS:
            await acme.tasks.add_human_message("t1", text)
        other = await acme.tasks.create(owner="bob", title="x", task_id="t2", config=CONFIG)
        await acme.tasks.add_assistant_message("t2", message_id="a1")
        await acme.tasks.finish_assistant_message("t2", "a1", tokens_in=5, tokens_out=1, cost=0.5)
        # stored values no verb would write today but older data may hold
        await store.database["tasks"].update_one(by_id("acme", task.id), {"$set": {"title": TITLE}})
        await store.database["tasks"].update_one(
            by_id("acme", other.id), {"$set": {"title": FORMULA, "owner": OWNER}}
        )
        await save_snapshot(store.database, path)
        return {"task": task.id, "other": other.id}
    finally:
        await store.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "store.gz"
    asyncio.run(_hostile_store(path))
    return path


def _one_error_line(result, code: int) -> None:
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    assert not any(char in result.stderr for char in TERMINAL_ACTIONS)


def _shown_inert(text: str) -> None:
    assert not any(char in text for char in TERMINAL_ACTIONS), repr(text)


# ----------------------------------------------------------------------------- tables


@pytest.mark.parametrize("args", [
    ["tasks", "list"], ["tasks", "show", "t1"], ["tasks", "messages", "t1"],
    ["tasks", "show", "t2"], ["stats", "owners"], ["stats", "usage", "--by", "owner"],
])  # fmt: skip
def test_tables_show_stored_markup_and_escapes_as_plain_text(hostile, args):
    result = invoke(hostile, *args, "--tenant", "acme")
    assert result.exit_code == 0, result.output
    _shown_inert(result.stdout)
    if args[:2] in (["tasks", "list"], ["tasks", "show"]) and args[-1] != "t2":
        assert (
            "[/bold]" in result.stdout
            and "\\x1b[31mred" in result.stdout
            and "\\u202e" in result.stdout
        )
    if "owner" in args or args[-1] == "owners" or args[-1] == "t2":
        assert OWNER in result.stdout  # the markup is shown, not applied


def test_message_previews_are_plain_too(hostile):
    result = invoke(hostile, "tasks", "messages", "t1", "--tenant", "acme")
    assert "[link=https://evil.example]x[/link]" in result.stdout
    assert "\\x1b[2J\\x1b[H cleared" in result.stdout


def test_json_keeps_the_stored_values_exactly(hostile):
    result = invoke(hostile, "tasks", "list", "--tenant", "acme", "-f", "json")
    titles = {row["id"]: row["title"] for row in json.loads(result.stdout)}
    assert titles == {"t1": TITLE, "t2": FORMULA}
    _shown_inert(result.stdout)  # JSON escapes control characters itself
    messages = json.loads(
        invoke(hostile, "tasks", "messages", "t1", "--tenant", "acme", "-f", "json").stdout
    )
    assert [m["content"][0]["text"] for m in messages] == TEXTS


# ----------------------------------------------------------------------------- csv


def _csv(result) -> list[dict[str, str]]:
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.stdout)))


def test_csv_cells_never_run_as_formulas(hostile):
    rows = {
        row["id"]: row
        for row in _csv(invoke(hostile, "tasks", "list", "--tenant", "acme", "-f", "csv"))
    }
    assert rows["t2"]["title"] == "'" + FORMULA and rows["t2"]["owner"] == OWNER
    assert rows["t1"]["title"].startswith("[/bold]\\x1b[31m")
    assert rows["t2"]["cost"] == "0.5" and rows["t2"]["tokens_in"] == "5"  # numbers stay numbers
    texts = [
        row["text"]
        for row in _csv(invoke(hostile, "tasks", "messages", "t1", "--tenant", "acme", "-f", "csv"))
    ]
    # (previews collapse whitespace: tab, carriage return and newline are spaces there)
    assert texts[2:8] == ["'-2+3", "'@SUM(A1)", "'+1", "indented", "carriage", "line one line two"]
    assert texts[8] == "'" + FORMULA
    owners = _csv(invoke(hostile, "stats", "owners", "--tenant", "acme", "-f", "csv"))
    assert [row["owner"] for row in owners] == [OWNER]  # the only owner with usage
    for row in (*rows.values(), *owners):
        assert not any(
            str(cell).startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row.values()
        )


# ----------------------------------------------------------------------------- numbers

BAD_NUMBERS = [
    ["stats", "usage", "--since", "nan"],
    ["stats", "usage", "--since", "NaN"],
    ["stats", "usage", "--until", "inf"],
    ["stats", "latency", "--until", "-Infinity"],
    ["stats", "activity", "--since", "1e300"],
    ["stats", "sessions", "--until", "-1e300"],
    ["stats", "tools", "--since", "99999999999999"],
    ["stats", "subtasks", "--since", "2026-02-30"],
    ["stats", "owners", "--limit", str(2**70)],
    ["stats", "owners", "--limit", "-1"],
    ["tasks", "messages", "t1", "--start", str(2**70)],
    ["tasks", "messages", "t1", "--start", "2**70"],
    ["tasks", "messages", "t1", "--start", "-1"],
    ["tasks", "messages", "t1", "--limit", str(2**63)],
    ["tasks", "messages", "t1", "--tail", str(2**64)],
    ["tasks", "messages", "t1", "--start", "1e3"],
    ["tasks", "list", "--limit", str(2**70)],
    ["tasks", "list", "--limit", "nan"],
    ["tasks", "list", "--cursor", "%%%not-a-cursor"],
    ["tasks", "show", "$where"],
    ["tasks", "show", "\x1b[2Jt1"],
]


@pytest.mark.parametrize("args", BAD_NUMBERS, ids=lambda args: " ".join(args))
def test_bad_numbers_and_ids_are_one_line_exit_2(hostile, args):
    result = invoke(hostile, *args, "--tenant", "acme")
    _one_error_line(result, 2)
    assert result.stdout == ""


@pytest.mark.parametrize("args", [
    ["stats", "usage", "--since", "0001-01-01", "--until", "9999-12-31T23:59:59Z"],
    ["stats", "activity", "--since", "-62135596800", "--until", "253402300799"],
    ["tasks", "messages", "t1", "--start", str(2**31 - 1)],
])  # fmt: skip
def test_the_extremes_of_the_ranges_work(hostile, args):
    result = invoke(hostile, *args, "--tenant", "acme")
    assert result.exit_code == 0, result.output


def test_demo_data_numbers_are_bounded(tmp_path):
    result = invoke(tmp_path / "d.gz", "demo-data", "--tasks", str(2**70))
    _one_error_line(result, 2)
    assert not (tmp_path / "d.gz").exists()


# ----------------------------------------------------------------------------- paths


def test_unwritable_paths_fail_before_any_work(hostile, tmp_path):
    before = hostile.read_bytes()
    _one_error_line(invoke(Path("/proc/mindstore-x.gz"), "demo-data", "--tasks", "1"), 7)
    _one_error_line(invoke(hostile, "backup", "/proc/mindstore-x"), 8)
    _one_error_line(invoke(hostile, "backup", "/proc/mindstore-x.tar", "--tar"), 8)
    # erase checks that its receipt can be written before it erases anything
    _one_error_line(
        invoke(hostile, "erase", "--tenant", "acme", "--yes", "--receipt", "/proc/r.json"), 8
    )
    assert hostile.read_bytes() == before
    result = invoke(hostile, "backup", str(tmp_path / "b"), "--tenant", "acme")
    assert result.exit_code == 0
    _one_error_line(invoke(Path("/proc/mindstore-y.gz"), "restore", str(tmp_path / "b")), 7)
    assert list(tmp_path.iterdir()) == [tmp_path / "b"]  # no staging directory left behind


@pytest.mark.parametrize("path", ["/dev/null", "/proc/self", "/tmp"])
def test_a_data_file_that_is_not_a_regular_file_is_refused(path):
    for args in (["tasks", "list", "--tenant", "acme"], ["demo-data", "--tasks", "1"]):
        _one_error_line(invoke(Path(path), *args), 7)


@pytest.mark.parametrize("args", [
    ["tasks", "list", "--tenant", "acme"],
    ["tasks", "show", "t1", "--tenant", "acme"],
    ["stats", "usage", "--tenant", "acme"],
    ["backup", "BACKUP"],
    ["restore", "BACKUP", "--dry-run"],
    ["erase", "--tenant", "acme", "--yes"],
    ["erase", "--tenant", "acme", "--dry-run"],
])  # fmt: skip
def test_a_missing_data_file_is_an_error_for_reading_commands(hostile, tmp_path, args):
    backup_dir = tmp_path / "b"
    assert invoke(hostile, "backup", str(backup_dir)).exit_code == 0
    missing = tmp_path / "typo.gz"
    args = [
        str(tmp_path / "new-backup")
        if a == "BACKUP" and args[0] == "backup"
        else str(backup_dir)
        if a == "BACKUP"
        else a
        for a in args
    ]
    result = invoke(missing, *args)
    _one_error_line(result, 7)
    assert "no data file" in result.stderr and not missing.exists()


def test_writing_commands_may_create_the_data_file(hostile, tmp_path):
    assert invoke(hostile, "backup", str(tmp_path / "b")).exit_code == 0
    result = invoke(tmp_path / "new.gz", "restore", str(tmp_path / "b"))
    assert result.exit_code == 0, result.output and (tmp_path / "new.gz").exists()
    result = invoke(tmp_path / "demo.gz", "demo-data", "--tasks", "2", "--tenants", "1")
    assert result.exit_code == 0, result.output
    assert invoke(tmp_path / "demo.gz", "tasks", "list", "--tenant", "tenant-0").exit_code == 0


# ----------------------------------------------------------------------------- data files


async def _malformed(path: Path, documents: list[dict]) -> None:
    store = await new_store()
    try:
        await store.database["tasks"].insert_many(documents)
        await save_snapshot(store.database, path)
    finally:
        await store.close()


MALFORMED = {
    "title not text": {"title": {"$gt": ""}},
    "messages not a list": {"messages": "oops", "seq": 1},
    "no created_at": {"created_at": None},
    "seq not a number": {"seq": "many"},
    "message not an object": {"messages": [42], "seq": 1},
    "usage not an object": {"usage": [1, 2]},
    "scope stack garbage": {"scope_stack": "x"},
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("args", [
    ["tasks", "list"], ["tasks", "show", "bad"], ["tasks", "messages", "bad"],
    ["tasks", "tree", "bad"], ["stats", "usage"], ["stats", "sessions"],
])  # fmt: skip
def test_malformed_documents_are_one_line_never_a_traceback(tmp_path, name, args):
    import datetime as dt

    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    good = {
        "_id": "bad",
        "tenant": "acme",
        "owner": "o",
        "title": "t",
        "state": "running",
        "created_at": when,
        "updated_at": when,
        "version": 0,
        "seq": 0,
        "size_bytes": 0,
        "scope_stack": [],
        "open_tool_calls": [],
        "usage": {},
        "messages": [],
    }
    path = tmp_path / "malformed.gz"
    asyncio.run(_malformed(path, [{**good, **MALFORMED[name]}]))
    result = invoke(path, *args, "--tenant", "acme")
    assert "Traceback" not in result.output
    if result.exit_code != 0:  # a read that does not need the broken field may succeed
        assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1, result.stderr
        assert result.exit_code in (1, 2, 3, 7)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not gzip at all",
        gzip.compress(b"{not json\n"),
        gzip.compress(b'{"format": "other"}\n'),
        b"\x1f\x8b\x08\x00trunc",
    ],
)
def test_a_data_file_that_is_not_a_snapshot_is_exit_7(tmp_path, content):
    path = tmp_path / "bad.gz"
    path.write_bytes(content)
    result = invoke(path, "tasks", "list", "--tenant", "acme")
    if content == b"":  # an empty file is an empty store
        assert result.exit_code == 0 and "no tasks" in result.stderr
    else:
        _one_error_line(result, 7)
    assert path.read_bytes() == content


# ----------------------------------------------------------------------------- tenants


def test_an_unknown_tenant_is_said_on_stderr(hostile):
    result = invoke(hostile, "tasks", "list", "--tenant", "acne")
    assert result.exit_code == 0 and "tenant acne has no tasks" in result.stderr
    result = invoke(hostile, "stats", "usage", "--tenant", "acne")
    assert result.exit_code == 0 and "tenant acne has no tasks" in result.stderr
    result = invoke(hostile, "tasks", "show", "t1", "--tenant", "acne")
    assert result.exit_code == 3 and "tenant acne has no tasks" in result.stderr
    known = invoke(hostile, "tasks", "list", "--tenant", "acme")
    assert "has no tasks" not in known.stderr


@pytest.mark.parametrize("tenant", ["$ne", "[/bold]", "a b", "\x1b[2J", "x" * 200])
def test_a_hostile_tenant_is_a_bad_argument(hostile, tenant):
    for args in (["tasks", "list"], ["stats", "usage"], ["erase", "--yes"]):
        _one_error_line(invoke(hostile, *args, "--tenant", tenant), 2)


# ----------------------------------------------------------------------------- uri


@pytest.mark.parametrize("uri", [
    "mongodb://localhost:1/?serverSelectionTimeoutMS=abc",
    "mongodb://localhost:1/?serverSelectionTimeoutMS=-5",
    "mongodb://localhost:1/?connectTimeoutMS=nan",
    "mongodb://localhost:1/?noSuchOption=1",
    "mongodb://localhost:1/?w=majority&w",
    "mongodb+srv://cluster.invalid/?serverSelectionTimeoutMS=abc",
    "mongodb://",
    "mongodb://localhost:99999/",
])  # fmt: skip
def test_a_malformed_uri_fails_at_once_with_exit_7(uri, monkeypatch):
    """Refused before any client is built: no server is tried, so nothing waits on one."""
    import pymongo

    built: list[str] = []
    monkeypatch.setattr(pymongo, "AsyncMongoClient", lambda *a, **k: built.append(a[0]))
    result = runner.invoke(app, ["--uri", uri, "tasks", "list", "--tenant", "acme"])
    _one_error_line(result, 7)
    assert built == []


def test_the_restore_of_a_hostile_backup_through_the_cli_writes_nothing(hostile, tmp_path):
    # the CLI maps the typed backup errors to their codes (the content checks themselves
    # are tested in test_backup_hostile.py)
    backup_dir = tmp_path / "b"
    assert invoke(hostile, "backup", str(backup_dir)).exit_code == 0
    manifest = json.loads((backup_dir / "manifest.json").read_text())
    manifest["encoding"]["compression"] = "zstd"
    resign(backup_dir, manifest)
    before = hostile.read_bytes()
    _one_error_line(invoke(hostile, "verify", str(backup_dir)), 13)
    _one_error_line(invoke(hostile, "restore", str(backup_dir)), 13)
    assert hostile.read_bytes() == before
