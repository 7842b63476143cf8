"""The fault-injecting backend and the seam that types what it raises.

`FaultPlan` numbers the commands sent through a wrapped database and fails one of them
the way a cluster does (refused, applied with its reply lost, a crash before or after);
`backends.transient` turns each transient driver error into `Unavailable` and lets every
other error and every result through unchanged.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from pymongo.errors import DuplicateKeyError, OperationFailure, PyMongoError

from mindstore import Store
from mindstore.backends.faults import TRANSIENT_ERRORS, Fault, FaultPlan
from mindstore.backends.proxy import unwrap
from mindstore.backends.transient import is_transient
from mindstore.errors import Unavailable
from mindstore.operations import RetryPolicy


def faulty(store: Store, plan: FaultPlan) -> Store:
    backend = dataclasses.replace(store.backend, database=plan.wrap(store.backend.database))
    return Store(backend, retry=RetryPolicy.no_transient_retries())


async def test_commands_are_numbered_and_a_cursor_counts_once(store: Store) -> None:
    plan = FaultPlan()
    database = plan.wrap(store.backend.database)
    await database["things"].insert_many([{"_id": i, "tenant": "t"} for i in range(5)])
    assert [d["_id"] async for d in database["things"].find({}).sort("_id", 1).batch_size(2)] == [
        0, 1, 2, 3, 4,
    ]  # fmt: skip
    rows = await (await database["things"].aggregate([{"$match": {}}])).to_list(None)
    assert len(rows) == 5
    assert await database["things"].count_documents({}) == 5
    assert plan.sent == [
        "insert_many on things", "find on things", "aggregate on things",
        "count_documents on things",
    ]  # fmt: skip
    assert (plan.count, plan.writes) == (4, 1)
    assert unwrap(database) is store.backend.database


@pytest.mark.parametrize("kind", ["before", "after"])
async def test_a_refused_write_is_not_applied_and_a_lost_reply_is(store: Store, kind: str) -> None:
    plan = FaultPlan(Fault(1, kind))  # type: ignore[arg-type]
    database = plan.wrap(store.backend.database)
    await database["things"].insert_one({"_id": "a", "tenant": "t"})
    with pytest.raises(PyMongoError):  # below the seam the driver's error is raw
        await database["things"].insert_one({"_id": "b", "tenant": "t"})
    stored = await store.backend.database["things"].count_documents({"_id": "b"})
    assert stored == (1 if kind == "after" else 0)
    assert plan.fired and plan.count == 2
    await database["things"].insert_one({"_id": "c", "tenant": "t"})  # once only
    assert plan.count == 3


@pytest.mark.parametrize("kind", ["crash_before", "crash_after"])
async def test_a_crash_stops_the_operation_for_good(store: Store, kind: str) -> None:
    plan = FaultPlan(Fault(0, kind, writes_only=True))  # type: ignore[arg-type]
    database = plan.wrap(store.backend.database)

    async def operation() -> None:
        await database["things"].count_documents({})  # a read: not numbered
        await database["things"].insert_one({"_id": "x", "tenant": "t"})
        await database["things"].insert_one({"_id": "y", "tenant": "t"})

    running = asyncio.ensure_future(operation())
    await asyncio.wait_for(plan.crashed.wait(), 5)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not running.done()  # never resumes
    names = await store.backend.database["things"].distinct("_id")
    assert names == (["x"] if kind == "crash_after" else [])
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


@pytest.mark.parametrize("name", sorted(TRANSIENT_ERRORS))
async def test_each_transient_error_reaches_the_caller_as_unavailable(
    store: Store, name: str
) -> None:
    error = TRANSIENT_ERRORS[name]("update_one on tasks")
    assert is_transient(error)
    plan = FaultPlan(Fault(0, "before", TRANSIENT_ERRORS[name]))
    acme = faulty(store, plan).scoped("acme")
    with pytest.raises(Unavailable) as caught:
        await acme.tasks.create(task_id="T", title="x")
    assert caught.value.__cause__ is not None and type(caught.value.__cause__).__name__ == (
        type(error).__name__
    )
    assert caught.value.operation == "tasks.create"
    assert caught.value.exit_code == 75 and caught.value.retryable
    assert str(caught.value).startswith("tasks.create: the database is unavailable")


async def test_other_errors_and_results_pass_the_seam_unchanged(store: Store) -> None:
    assert not is_transient(DuplicateKeyError("E11000 duplicate key", 11000))
    assert not is_transient(OperationFailure("bad query", 2))
    assert not is_transient(ValueError("not a driver error"))
    tasks = store.database["tasks"]
    await tasks.insert_one({"_id": "k", "tenant": "t"})
    with pytest.raises(DuplicateKeyError):  # a permanent error stays the driver's
        await tasks.insert_one({"_id": "k", "tenant": "t"})
    assert (await tasks.find_one({"_id": "k"}, {"_id": 1})) == {"_id": "k"}


async def test_a_read_that_fails_says_nothing_was_written(store: Store) -> None:
    await store.scoped("acme").tasks.create(task_id="T")
    plan = FaultPlan(Fault(0, "before", TRANSIENT_ERRORS["NetworkTimeout"]))
    with pytest.raises(Unavailable) as caught:
        await faulty(store, plan).scoped("acme").tasks.messages("T")
    assert caught.value.operation == "tasks.messages" and not caught.value.may_have_applied
    assert "nothing was written" in str(caught.value)


def test_the_cli_exits_75_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from mindstore.commands.common import run

    async def failing() -> None:
        raise Unavailable("backup", "find on tasks", may_have_applied=False, cause="x")

    with pytest.raises(typer.Exit) as caught:
        run(failing())
    assert caught.value.exit_code == 75
    err = capsys.readouterr().err
    assert err.startswith("error: backup: the database is unavailable") and err.count("\n") == 1
