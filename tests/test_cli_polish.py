"""CLI rough edges: a closed pipe, help placeholders, `erase --dry-run` ids, option names.

* `mindstore tasks follow T | head` ends quietly with 141 (128 + SIGPIPE, as `yes | head`),
  not "unexpected BrokenPipeError ... (malformed stored data, or a bug)";
* `--help` shows no typer type placeholders (`<bool>`, `<str>`, `<path>`), and one
  metavar per option name across commands (`commands.help`);
* `erase --dry-run` lists the ids it would erase (bounded, with the counts), in the JSON
  receipt and on stderr;
* a bad `--before` names `--before`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperArgument, TyperOption
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot, save_snapshot
from mindstore.cli import app
from mindstore.commands.help import METAVARS, tidy_help
from mindstore.commands.pipes import EXIT_CLOSED_PIPE

runner = CliRunner()
# the module: `mindstore.backup.erase` as an attribute is the package's `erase` function
erase_module = importlib.import_module("mindstore.backup.erase")
SRC = Path(__file__).resolve().parents[1] / "src"
PLACEHOLDER = re.compile(r"<(bool|str|path|int|float|list\[[a-z]+\])[^>]*>")


def _seed(path: Path, *, tasks: int = 3, messages: int = 0) -> list[str]:
    """A data file with `tasks` tasks of tenant acme (the first with `messages` long ones)
    and one task of tenant beta; returns acme's task ids."""

    async def build() -> list[str]:
        store = await mindstore.connect("embedded", database="cli_polish")
        try:
            acme = store.scoped("acme").tasks
            ids = []
            for number in range(tasks):
                record = await acme.create(owner="alice", task_id=f"task-{number}")
                ids.append(record.id)
            for number in range(messages):
                await acme.add_human_message(ids[0], f"{number} " + "x" * 400)
            await store.scoped("beta").tasks.create(owner="bob", task_id="beta-task")
            await save_snapshot(store.database, path)
            return ids
        finally:
            await store.close()

    return asyncio.run(build())


def _task_ids(path: Path) -> list[str]:
    async def read() -> list[str]:
        store = await mindstore.connect("embedded", database="cli_polish")
        try:
            await load_snapshot(store.database, path)
            return sorted(d["_id"] for d in await store.database["tasks"].find({}).to_list())
        finally:
            await store.close()

    return asyncio.run(read())


# ------------------------------------------------------------------ closed pipes
def test_follow_into_a_reader_that_closes_early_ends_quietly(tmp_path: Path) -> None:
    data = tmp_path / "d.gz"
    _seed(data, tasks=1, messages=400)  # about 200 KB of lines: far past what one read takes
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(SRC), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    environment.pop("MINDSTORE_DEBUG", None)
    command = [sys.executable, "-m", "mindstore", "--data", str(data), "tasks", "follow",
               "task-0", "--tenant", "acme", "--idle", "5", "-f", "json"]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    assert json.loads(first)["kind"] == "new"
    process.stdout.close()  # the reader goes away, as `head -1` does
    errors = process.stderr.read().decode()
    code = process.wait(timeout=120)
    assert code == EXIT_CLOSED_PIPE == 141, errors
    assert errors == "", errors  # no traceback, no "unexpected BrokenPipeError"


def test_a_closed_pipe_inside_a_command_body_is_not_reported_as_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same path in-process: the write that fails raises BrokenPipeError inside `run`;
    the root command turns it into exit 141 with nothing on stderr."""
    data = tmp_path / "d.gz"
    _seed(data, tasks=1, messages=2)
    from mindstore.commands import lifecycle

    def closed(*args: Any, **kwargs: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(lifecycle, "echo_text", closed)
    result = runner.invoke(app, ["--data", str(data), "tasks", "follow", "task-0",
                                 "--tenant", "acme", "--idle", "0.2"])  # fmt: skip
    assert result.exit_code == EXIT_CLOSED_PIPE, result.output
    assert result.stderr == ""


# ------------------------------------------------------------------ help
def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


def test_help_shows_no_type_placeholders() -> None:
    root = typer.main.get_command(app)
    for path, _ in _commands(root):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        assert not PLACEHOLDER.search(result.output), (path, PLACEHOLDER.findall(result.output))
        usage = next(line for line in result.output.splitlines() if "Usage:" in line)
        for argument in re.findall(r"\{([^}]*)\}", usage):
            assert argument == argument.upper(), (path, usage)


EXPORT_FORMATS = "[jsonl|mind-map|openai-chat|openai-responses|anthropic|gemini]"
"""`--format` of `export`: a conversation's format, not the output's (table, json, csv)."""


def test_every_option_has_one_metavar_across_commands() -> None:
    root = typer.main.get_command(app)
    tidy_help(root)
    seen: dict[str, set[str]] = {}
    for path, command in _commands(root):
        help_option = command.get_help_option(typer.Context(command))
        for parameter in [*command.params, help_option]:
            assert parameter.metavar is not None, (path, parameter.name)
            if isinstance(parameter, TyperArgument):
                assert re.fullmatch(r"[A-Z][A-Z_]*", parameter.metavar), (path, parameter.metavar)
                continue
            assert isinstance(parameter, TyperOption)
            if parameter.is_flag:
                assert parameter.metavar == "", (path, parameter.opts)
                continue
            assert re.fullmatch(r"[A-Z][A-Z_]*|\[[a-z_-]+(\|[a-z_-]+)+\]", parameter.metavar), (
                path, parameter.opts, parameter.metavar)  # fmt: skip
            seen.setdefault(parameter.opts[0], set()).add(parameter.metavar)
    # one spelling per option name, except where an option means two things
    different = {"--by": {"GROUPS", "MEASURE"}, "--since": {"TIME", "MESSAGE_ID"},
                 "--state": {"STATE", "[running|completed|failed|paused|aborted|resume_awaited]"},
                 "--limit": {"N"},
                 "--format": {"[table|json|csv]", EXPORT_FORMATS},
                 "--mode": {"[skip|overwrite|fail]", "[hybrid|lexical|semantic]"}}  # fmt: skip
    for option, metavars in seen.items():
        if option in different:
            assert metavars <= different[option], (option, metavars)
        else:
            assert len(metavars) == 1, (option, metavars)
        if option in METAVARS and option not in different:
            assert metavars == {METAVARS[option]}


# ------------------------------------------------------------------ erase --dry-run
def test_erase_dry_run_lists_the_ids_it_would_erase_and_erases_nothing(tmp_path: Path) -> None:
    data = tmp_path / "d.gz"
    ids = _seed(data, tasks=3)
    before = _task_ids(data)
    result = runner.invoke(app, ["--data", str(data), "erase", "--tenant", "acme", "--dry-run"])
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert receipt["dry_run"] is True and receipt["counts"]["tasks"] == 3
    assert receipt["ids"]["tasks"] == sorted(ids)
    assert receipt["ids_listed_max"] == erase_module.LISTED_IDS
    assert "beta-task" not in json.dumps(receipt["ids"])
    assert f"would erase 3 from tasks: {', '.join(sorted(ids))}" in result.stderr
    assert _task_ids(data) == before


def test_erase_dry_run_lists_a_bounded_number_with_the_full_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "d.gz"
    ids = _seed(data, tasks=5)
    monkeypatch.setattr(erase_module, "LISTED_IDS", 2)
    result = runner.invoke(app, ["--data", str(data), "erase", "--tenant", "acme", "--owner",
                                 "alice", "--dry-run"])  # fmt: skip
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert receipt["ids"]["tasks"] == sorted(ids)[:2] and receipt["ids_listed_max"] == 2
    assert receipt["counts"]["tasks"] == 5
    assert "(3 more)" in result.stderr


def test_retention_dry_run_lists_ids_and_a_real_erase_lists_none(tmp_path: Path) -> None:
    data = tmp_path / "d.gz"
    ids = _seed(data, tasks=2)
    dry = runner.invoke(app, ["--data", str(data), "erase", "--tenant", "acme", "--before",
                              "2999-01-01", "--dry-run"])  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["ids"]["tasks"] == sorted(ids)
    done = runner.invoke(app, ["--data", str(data), "erase", "--tenant", "acme", "--yes"])
    assert done.exit_code == 0, done.output
    receipt = json.loads(done.stdout)
    assert "ids" not in receipt and receipt["counts"]["tasks"] == 2
    assert "would erase" not in done.stderr
    assert _task_ids(data) == ["beta/beta-task"]


# ------------------------------------------------------------------ option names in errors
@pytest.mark.parametrize("value", ["yesterday", "nan", "1e300", "2026-13-01"])
def test_a_bad_before_names_the_option(tmp_path: Path, value: str) -> None:
    data = tmp_path / "d.gz"
    _seed(data, tasks=1)
    before = _task_ids(data)
    result = runner.invoke(app, ["--data", str(data), "erase", "--tenant", "acme", "--before",
                                 value, "--yes"])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --before "), result.stderr
    assert "before:" not in result.stderr
    assert _task_ids(data) == before
