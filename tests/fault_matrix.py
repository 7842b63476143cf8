"""The fault matrix's machinery: write paths, deterministic draws, canonical dumps, one case.

A case is (write path, fault kind, command position, transient error). It runs the path's
operation three times on one tenant name:

* on a *twin* database, whole, through a cold store wrapped in a counting `FaultPlan`:
  the reference (what exactly one effect stores) and how many commands and writes the
  operation sends, so positions are generated, not listed;
* on the suite's database, through a cold store whose `FaultPlan` injects the fault
  (`mindstore.backends.faults`), with transient retries off, so the error reaches the
  caller; the case starts from a copy of the documents the twin's setup stored (checked
  equal in the canonical form), or, when the setup made more than documents (arguments, a
  folder, a key vault), from the setup run again;
* again, as the caller's retry of the same call: on the same store after a `before` or
  `after` fault (the same process), on a new store after a crash (the next process).

Ids and times are drawn from counters (`Draws`) reset to the same marks before each run,
so the twin and the subject store byte-identical documents when their effects are the
same; a retry in the same process gets the first attempt's draws back from the store
itself (`mindstore.draws`), a crashed one from the counters reset to where the call began
(the next process draws afresh; only the ids the caller named make its retry exactly-once,
which is why paths that name none are not asked to be, after a crash).

The stored state is compared in a canonical form: every document of the tenant in every
collection, except that a task document is taken logically: its whole history as the
store reads it (sealed pages and pending changes applied) instead of its open page, and
without the fields a seal or a fold changes (version, updated_at, the paging mark), which
are housekeeping any later write redoes. The physical form is checked by a backup of the
tenant and `verify`, which recomputes every header from the messages and checks the pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import itertools
import tempfile
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import bson
import pytest

import mindstore.clock
import mindstore.model.base
from mindstore import Store, TenantStore
from mindstore.backends.faults import TRANSIENT_ERRORS, Fault, FaultKind, FaultPlan
from mindstore.backup import backup, verify
from mindstore.backup.retention import erase_before
from mindstore.collection_names import DATA_KEYS
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.crypto.aead import blank, is_sealed, key_version
from mindstore.errors import KeyShredded, MindstoreError, Unavailable
from mindstore.model.messages import message_to_dict
from mindstore.operations import RetryPolicy

NO_RETRY = RetryPolicy.no_transient_retries()
PHYSICAL = frozenset({
    "messages", "version", "updated_at", "sealed", "pages", "sealed_bytes", "id_filter",
    "id_filter_words", "pending", "pending_at", "patched", "tail",
})  # fmt: skip
"""Task fields a seal or a fold rewrites: left out of the logical form."""

ERRORS = list(TRANSIENT_ERRORS)
TENANTS = itertools.count()

Setup = Callable[[TenantStore], Awaitable[dict[str, Any]]]
Call = Callable[[TenantStore, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class WritePath:
    """One write path: how to arrange the state it acts on, and the call."""

    name: str
    call: Call
    setup: Setup | None = None
    named: bool = True
    """The call names every id it writes: its retry from another process is exactly-once
    too. Paths that draw an id (an append without one, a create without a task id, a
    fork) are exactly-once when retried from the process that made them."""
    crash_answers: tuple[type[MindstoreError], ...] = ()
    """Typed answers a retry from another process may give when the first attempt had
    landed (a create of a used id: `Conflict`; a delete of a gone task: `NotFound`)."""
    crash_retry: bool = True
    """A retry from another process is meaningful (a stream's deltas are not: the next
    process streams again from its model)."""
    atomic: bool = True
    """One effect, stored whole or not at all. A batch (a cascade delete, an erase, a
    retention sweep, a restore) is not: after a fault every stored state must still be
    consistent (a backup verifies), and the retry finishes it."""
    commit: tuple[str, ...] = ()
    """The collections whose write makes the effect visible to its readers, written last
    (a dialog's tree node; a LangGraph checkpoint). Before it, what is written of the rest
    is the documented in-between: no reader of the dialog tree or of the thread sees it,
    and the retry (or `dialogs.repair()`, for a dialog) finishes it."""
    result: Callable[[Any], Any] | None = None
    """What of the call's result a retry must give back (default: all of it)."""
    keyring: bool = False
    """Run under a keyring over a key vault of its own per case (the twin has its own):
    content is sealed, and the keyring verbs (rotate, the re-encryption sweep, shred)
    are what the path calls (`store.keyring`)."""
    leftovers: bool = False
    """A retry from another process may leave what no reader sees of what the first
    attempt deleted (an owner's erase): `dialogs.repair()` and a retention sweep remove
    it, as the runbook says (docs/operations.md)."""


class Draws:
    """Deterministic ids and times: counters the cases reset to the same marks."""

    def __init__(self) -> None:
        self.ids = 0
        self.ticks = 0

    def mark(self) -> tuple[int, int]:
        return self.ids, self.ticks

    def reset(self, mark: tuple[int, int] = (0, 0)) -> None:
        self.ids, self.ticks = mark

    def new_id(self) -> str:
        return f"i{self.ids_next():020d}"  # 21 characters, as a drawn nanoid

    def ids_next(self) -> int:
        self.ids += 1
        return self.ids

    def _tick(self) -> float:
        self.ticks += 1
        return 1_700_000_000 + self.ticks / 1000

    def now_ts(self) -> float:
        return self._tick()

    def utcnow(self) -> datetime:
        return datetime.fromtimestamp(round(self._tick(), 3), UTC)


@contextlib.contextmanager
def deterministic(monkeypatch: pytest.MonkeyPatch) -> Iterator[Draws]:
    draws = Draws()
    monkeypatch.setattr(mindstore.model.base, "ID_SOURCE", draws.new_id)
    monkeypatch.setattr(mindstore.model.base, "CLOCK", draws.now_ts)
    monkeypatch.setattr(mindstore.clock, "_now", draws.utcnow)
    yield draws


def patch_adk(monkeypatch: pytest.MonkeyPatch, draws: Draws) -> None:
    """ADK's session service stamps with `time.time()` and names intents by `uuid4()`:
    drawn from `draws` too (only for the ADK paths: importing ADK takes seconds)."""
    for name in ("mindstore.integrations.adk", "mindstore.integrations.adk_state"):
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "time", SimpleNamespace(time=draws.now_ts))
        monkeypatch.setattr(module, "uuid", SimpleNamespace(
            uuid4=lambda: uuid.UUID(int=draws.ids_next())))  # fmt: skip


def cold(store: Store, plan: FaultPlan | None = None) -> Store:
    """A new process on `store`'s database (its own cache, locks and ledger), its commands
    through `plan`; transient retries off, so an error reaches the caller."""
    backend = store.backend
    if plan is not None:
        backend = dataclasses.replace(backend, database=plan.wrap(backend.database))
    return Store(backend, retry=NO_RETRY, page_policy=store.page_policy,
                 offload_threshold=store.offload_threshold, keyring=store.keyring)  # fmt: skip


def with_vault(store: Store) -> Store:
    """`store`'s database under a keyring whose tenant keys are in a new key vault (a
    shred destroys a tenant's key there: each case needs its own)."""
    vault = LocalKeyVault(tempfile.mkdtemp(), LocalMasterKey(bytes(range(32))))
    return Store(store.backend, retry=NO_RETRY, page_policy=store.page_policy,
                 offload_threshold=store.offload_threshold, keyring=Keyring(vault))  # fmt: skip


KEY_HOUSEKEEPING = frozenset({"wrapped", "created_at", "shredded_at"})
"""Fields of a key document that differ between two runs of one effect: a wrap's random
nonce, the times the keyring stamps from the system clock."""


def _logical(value: Any) -> Any:
    """`value` with every ciphertext replaced by what it is sealed as and the key version
    sealing it (a nonce is random: two runs of one effect store different bytes)."""
    if is_sealed(value):
        return {"sealed": blank(value), "key": key_version(value)}
    if isinstance(value, dict):
        return {k: _logical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_logical(v) for v in value]
    return value


async def canonical(store: Store, tenant: str) -> dict[str, list[bytes]]:
    """The tenant's stored state in the canonical form (module docstring)."""
    database = store.backend.database
    view = cold(store).scoped(tenant)
    out: dict[str, list[bytes]] = {}
    for name in sorted(await database.list_collection_names()):
        if name == "task_pages":
            continue
        documents = await database[name].find({"tenant": tenant}).sort("_id", 1).to_list(None)
        if name == "tasks":
            logical = []
            for document in documents:
                task_id = str(document["_id"]).rpartition("/")[2]
                kept = {k: v for k, v in document.items() if k not in PHYSICAL}
                try:
                    read = await view.tasks.messages(task_id)
                    kept["history"] = [message_to_dict(m) for m in read]
                except KeyShredded:
                    kept["history"] = "shredded"
                logical.append(kept)
            documents = logical
        if name == DATA_KEYS:
            documents = [{k: v for k, v in d.items() if k not in KEY_HOUSEKEEPING}
                         for d in documents]  # fmt: skip
        if documents:
            out[name] = [bson.encode(_logical(d)) for d in documents]
    return out


async def orphan_pages(store: Store, tenant: str) -> list[str]:
    """Sealed pages of the tenant whose task is gone (what a delete cut short leaves)."""
    database = store.backend.database
    pages = await database["task_pages"].find({"tenant": tenant}, {"task": 1}).to_list(None)
    keys = {page["task"] for page in pages}
    present = {d["_id"] for d in await database["tasks"].find(
        {"tenant": tenant, "_id": {"$in": sorted(keys)}}, {"_id": 1}).to_list(None)}  # fmt: skip
    return [page["_id"] for page in pages if page["task"] not in present]


def answer(value: Any, path: WritePath | None = None) -> Any:
    """A call's result in a comparable form."""
    if path is not None and path.result is not None:
        value = path.result(value)
    if isinstance(value, (list, tuple)):
        return [answer(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


async def verified(store: Store, tenant: str) -> None:
    """A backup of the tenant passes `verify` (pages continuous, headers recomputed)."""
    with tempfile.TemporaryDirectory() as folder:
        await backup(store, Path(folder) / "b", tenant=tenant)
        await verify(Path(folder) / "b")


@dataclass
class Tally:
    """What the cases of a matrix saw."""

    cases: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fail(self, case: str, what: str) -> None:
        self.outcomes[what] += 1
        self.failures.append(f"{case}: {what}")


@dataclass(frozen=True)
class Reference:
    """The twin's run: the state before and after one whole effect, what it returned, and
    what it sent."""

    mark: tuple[int, int]
    context: dict[str, Any]
    stored: dict[str, list[dict[str, Any]]] | None
    """What the setup stored (every document of the tenants `wipe` empties, by collection,
    in stored order), when a case may start from a copy of it instead of running the setup
    again (`replayable`); None: each case runs the setup."""
    before: dict[str, list[bytes]]
    after: dict[str, list[bytes]]
    result: Any
    commands: int
    writes: int


def replayable(path: WritePath, context: dict[str, Any]) -> bool:
    """A case may start from a copy of what the setup stored: the setup made nothing but
    documents (no arguments, folders or backups in its context) and no key vault holds
    part of the state (a keyring path's vault is each case's own)."""
    return path.setup is not None and not context and not path.keyring


async def stored_state(store: Store, tenant: str) -> dict[str, list[dict[str, Any]]]:
    """Every document of the tenants `wipe` empties, by collection, in stored order."""
    database = store.backend.database
    return {name: await database[name].find(_tenants(tenant)).to_list(None)
            for name in sorted(await database.list_collection_names())}  # fmt: skip


async def restore_state(store: Store, stored: dict[str, list[dict[str, Any]]]) -> None:
    """Insert a `stored_state` copy (into a store `wipe` emptied of those tenants)."""
    database = store.backend.database
    for name, documents in stored.items():
        if documents:
            await database[name].insert_many([dict(d) for d in documents])


async def reference(path: WritePath, twin: Store, tenant: str, draws: Draws) -> Reference:
    draws.reset()
    context = await path.setup(twin.scoped(tenant)) if path.setup else {}
    mark = draws.mark()
    stored = await stored_state(twin, tenant) if replayable(path, context) else None
    before = await canonical(twin, tenant)
    draws.reset(mark)
    plan = FaultPlan()
    result = await path.call(cold(twin, plan).scoped(tenant), context)
    after = await canonical(twin, tenant)
    return Reference(mark, context, stored, before, after, answer(result, path), plan.count,
                     plan.writes)  # fmt: skip


def cases(ref: Reference) -> Iterator[tuple[FaultKind, int, bool]]:
    """(kind, position, numbered by writes only) for every fault worth injecting: a refusal
    at every command, a lost reply at every write, a crash before the first write and
    after every write (a crash before a read leaves what a crash after the write before
    it leaves)."""
    for at in range(ref.commands):
        yield "before", at, False
    for at in range(ref.writes):
        yield "after", at, True
    if ref.writes:
        yield "crash_before", 0, True
    for at in range(ref.writes):
        yield "crash_after", at, True


def _tenants(tenant: str) -> dict[str, Any]:
    """The tenant of the cases and the one a restore reads from."""
    return {"tenant": {"$in": [tenant, tenant + "src"]}}


async def wipe(store: Store, tenant: str) -> None:
    """Remove everything of `tenant`, so the next case starts from nothing."""
    database = store.backend.database
    for name in await database.list_collection_names():
        await database[name].delete_many(_tenants(tenant))


async def run_case(
    path: WritePath, store: Store, ref: Reference, tenant: str, draws: Draws, tally: Tally,
    kind: FaultKind, at: int, writes_only: bool, error: str,
) -> None:  # fmt: skip
    case = f"{path.name} [{kind} #{at}{' write' if writes_only else ''}, {error}]"
    tally.cases += 1
    await wipe(store, tenant)
    draws.reset()
    if ref.stored is not None:  # the setup's documents, copied (the same bytes: checked)
        await restore_state(store, ref.stored)
        draws.reset(ref.mark)
        context: dict[str, Any] = {}
    else:
        context = await path.setup(cold(store).scoped(tenant)) if path.setup else {}
    assert draws.mark() == ref.mark, f"{case}: the setup drew differently on the twin"
    before = await canonical(store, tenant)
    assert before == ref.before, f"{case}: the setup stored differently on the twin"
    draws.reset(ref.mark)
    plan = FaultPlan(Fault(at, kind, TRANSIENT_ERRORS[error], writes_only=writes_only))
    subject = cold(store, plan)
    raised: BaseException | None = None
    result: Any = None
    crashed = kind.startswith("crash")
    running = asyncio.ensure_future(path.call(subject.scoped(tenant), context))
    try:
        if crashed:
            stopped = asyncio.ensure_future(plan.crashed.wait())
            await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if running.done():
                result = running.result()
        else:
            try:
                result = await running
            except Unavailable as error:
                raised = error
            except Exception as error:
                tally.fail(case, f"untyped error {type(error).__name__}: {error}")
                return
        if not plan.fired:
            tally.fail(case, "the fault was never reached")
            return
        after = await canonical(store, tenant)
        if after not in (before, ref.after):
            between = _between(path, before, after, ref.after)
            if between is None:
                tally.fail(case, "half-applied")
                return
            if between == "batch part-way":
                await verified(store, tenant)  # consistent, whatever part of it is done
            tally.outcomes[between] += 1
        if raised is not None:
            problem = _check_error(raised, path, after != before)
            if problem:
                tally.fail(case, problem)
        if not crashed and raised is None:
            if after != ref.after:
                tally.fail(case, "succeeded without its effect")
            elif answer(result, path) != ref.result:
                tally.fail(case, "succeeded with another result")
            else:
                tally.outcomes["fault absorbed (housekeeping a later write redoes)"] += 1
            return
        landed = after != before
        if crashed and (not path.crash_retry or (not path.named and landed)):
            tally.outcomes["crash: not retried (no caller id, or a stream)"] += 1
            return
        # the caller's retry of the same call: the next process after a crash (its draws
        # start afresh, where the call began), else this one (which replays what the
        # first attempt drew, if it sent a write)
        if crashed or not (isinstance(raised, Unavailable) and raised.may_have_applied):
            draws.reset(ref.mark)
        retry_store = cold(store) if crashed else subject
        answered = None
        try:
            again = await path.call(retry_store.scoped(tenant), context)
        except Exception as error:
            if not (crashed and isinstance(error, path.crash_answers) and landed):
                tally.fail(case, f"retry raised {type(error).__name__}: {error}")
                return
            answered, again = type(error).__name__, None
            if "dialog_nodes" in path.commit:  # what a crashed dialog write leaves, repair
                await cold(store).scoped(tenant).dialogs.repair()  # finishes
        if crashed and path.leftovers:  # the runbook after a crashed erase
            await cold(store).scoped(tenant).dialogs.repair(grace=timedelta(0))
            await erase_before(cold(store), tenant, before=datetime(1971, 1, 1, tzinfo=UTC))
        final = await canonical(store, tenant)
        if final != ref.after and not (
            answered and path.commit and _between(path, before, final, ref.after)
        ):
            tally.fail(case, "duplicated after retry" if final != before else "lost after retry")
            return
        if again is not None and answer(again, path) != ref.result and (path.atomic or not crashed):
            tally.fail(case, "retry returned another result")
            return
        if not crashed and await orphan_pages(store, tenant):  # the canonical form reads
            tally.fail(case, "sealed pages left that no task counts")  # pages through tasks
            return
        if landed:  # a fault that stored nothing leaves a plain first call to retry
            await verified(store, tenant)
        if answered:
            tally.outcomes[f"crash: retried, answered {answered} (one effect)"] += 1
        else:
            tally.outcomes[f"{'crash' if crashed else 'fault'}: retried, one effect"] += 1
    finally:
        if not running.done():
            running.cancel()
            with contextlib.suppress(BaseException):
                await running


def _between(path: WritePath, before: Any, after: Any, whole: Any) -> str | None:
    """Which documented in-between state `after` is, if any (`WritePath`)."""
    names = set(before) | set(after) | set(whole)
    if (
        path.commit
        and all(before.get(c) == after.get(c) for c in path.commit)
        and all(after.get(name) in (before.get(name), whole.get(name)) for name in names)
    ):
        return f"written up to its commit point ({', '.join(path.commit)}), not yet visible"
    if not path.atomic:
        return "batch part-way"
    return None


def _check_error(error: Unavailable, path: WritePath, applied: bool) -> str | None:
    """What is wrong with the typed error the caller got, if anything."""
    if not isinstance(error.__cause__, Exception) or type(error.__cause__).__module__ != (
        "pymongo.errors"
    ):
        return "Unavailable without the driver's error as its cause"
    if not error.operation or error.operation == "a database command":
        return "Unavailable naming no operation"
    if applied and not error.may_have_applied:
        return "Unavailable said nothing was written, but it was"
    if not path.named and "exactly-once" not in str(error):
        return "Unavailable of a call without ids says nothing about its retry"
    return None


async def run_matrix(path: WritePath, store: Store, twin: Store, draws: Draws) -> Tally:
    """Every case of one write path, on one tenant name (emptied before each case)."""
    tally = Tally()
    tenant = f"f{next(TENANTS)}"
    ref = await reference(path, with_vault(twin) if path.keyring else twin, tenant, draws)
    errors = itertools.cycle(ERRORS)
    for kind, at, writes_only in cases(ref):
        subject = with_vault(store) if path.keyring else store
        await run_case(path, subject, ref, tenant, draws, tally, kind, at, writes_only,
                       next(errors))  # fmt: skip
    return tally
