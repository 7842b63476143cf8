"""The `RetryPolicy`: a retry-safe operation rides out transient errors itself, bounded,
with backoff; one that is not retry-safe surfaces `Unavailable` at once. No test sleeps:
the policy's `sleep` is a recorder.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindstore import Store
from mindstore.backends.faults import TRANSIENT_ERRORS, Fault, FaultPlan
from mindstore.errors import Unavailable
from mindstore.model.messages import message_to_dict
from mindstore.model.parts import TaskConfigPart, TextPart
from mindstore.operations import InDoubt, RetryPolicy


class Sleeps:
    """The policy's `sleep`: records each pause instead of waiting."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)


def faulty(store: Store, plan: FaultPlan, policy: RetryPolicy) -> Store:
    backend = dataclasses.replace(store.backend, database=plan.wrap(store.backend.database))
    return Store(backend, retry=policy, page_policy=store.page_policy)


async def history(store: Store, tenant: str, task_id: str) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in await store.scoped(tenant).tasks.messages(task_id)]


@pytest.mark.parametrize("kind", ["before", "after"])
@pytest.mark.parametrize("named", [True, False], ids=["message_id", "no id"])
async def test_a_lost_write_is_retried_by_the_policy_into_exactly_one_effect(
    store: Store, kind: str, named: bool
) -> None:
    acme = store.scoped("acme")
    await acme.tasks.create(task_id="T", config=TaskConfigPart(model_name="m"))
    await acme.tasks.add_human_message("T", "first", message_id="u1")
    before = await history(store, "acme", "T")
    sleeps = Sleeps()
    plan = FaultPlan(Fault(0, kind, TRANSIENT_ERRORS["NotPrimaryError"], writes_only=True))  # type: ignore[arg-type]
    view = faulty(store, plan, RetryPolicy(sleep=sleeps)).scoped("acme")
    stored = await view.tasks.add_human_message("T", "second", message_id="u2" if named else None)
    assert plan.fired and len(sleeps.pauses) == 1  # one failure, one pause, one more attempt
    after = await history(store, "acme", "T")
    ids = [m["id"] for m in after]
    assert ids[: len(before)] == [m["id"] for m in before] and len(ids) == len(before) + 1
    assert after[-1] == message_to_dict(stored)
    assert after[-1]["content"] == [{"type": "text", "text": "second"}]


async def test_a_task_verb_on_a_sealed_message_rides_out_a_failover(store: Store) -> None:
    """A failover of several commands in a row: each attempt meets one, the policy keeps
    going, the answer is stored once."""
    acme = store.scoped("acme")
    await acme.tasks.create(task_id="T", config=TaskConfigPart(model_name="m"))
    reply = await acme.tasks.add_assistant_message("T", message_id="a1")
    await acme.tasks.add_text_part("T", reply.id, "searching")
    sleeps = Sleeps()
    down = {"left": 3}

    class Failover(FaultPlan):
        async def _around(self, command: Any, call: Any) -> Any:  # the first three fail
            if down["left"] and not command.continued:
                down["left"] -= 1
                raise TRANSIENT_ERRORS["PrimarySteppedDown"](command.describe())
            return await call()

    view = faulty(store, Failover(), RetryPolicy(sleep=sleeps)).scoped("acme")
    await view.tasks.add_text_part("T", "a1", " found two")
    texts = [p["text"] for p in (await history(store, "acme", "T"))[-1]["content"]]
    assert texts == ["searching", " found two"]
    assert len(sleeps.pauses) == 3 and sleeps.pauses == sorted(sleeps.pauses)  # backing off


async def test_the_policy_gives_up_after_its_attempts_and_the_caller_can_retry(
    store: Store,
) -> None:
    acme = store.scoped("acme")
    await acme.tasks.create(task_id="T")
    sleeps = Sleeps()

    class Down(FaultPlan):
        async def _around(self, command: Any, call: Any) -> Any:
            self.count += 1
            if self.fired:  # the primary is gone: nothing answers any more
                raise TRANSIENT_ERRORS["ServerSelectionTimeoutError"](command.describe())
            if command.write:  # the write landed, its reply was lost
                self.fired = True
                await call()
                raise TRANSIENT_ERRORS["NetworkTimeout"](command.describe())
            return await call()

    faulty_store = faulty(store, Down(), RetryPolicy(transient_attempts=3, sleep=sleeps))
    with pytest.raises(Unavailable) as caught:
        await faulty_store.scoped("acme").tasks.add_human_message("T", "hello")
    assert len(sleeps.pauses) == 2 and caught.value.may_have_applied
    assert [m["content"] for m in await history(store, "acme", "T")] == [
        [{"type": "text", "text": "hello"}]
    ]
    # the same call again from the same process, the primary back: still one message
    healed = Store(store.backend, retry=RetryPolicy(sleep=sleeps))
    healed.in_doubt = faulty_store.in_doubt  # the process's ledger of calls in doubt
    again = await healed.scoped("acme").tasks.add_human_message("T", "hello")
    stored = await history(store, "acme", "T")
    assert len(stored) == 1 and stored[0] == message_to_dict(again)


async def test_an_operation_that_is_not_retry_safe_is_not_retried(store: Store) -> None:
    """`agents.apply` runs the caller's change on the stored state: applied twice it is not
    the same change, so a lost reply reaches the caller at once."""
    acme = store.scoped("acme")
    dialog = await acme.dialogs.create("planner", "You plan.")
    sleeps = Sleeps()
    plan = FaultPlan(Fault(0, "after", TRANSIENT_ERRORS["AutoReconnect"], writes_only=True))
    view = faulty(store, plan, RetryPolicy(sleep=sleeps)).scoped("acme")
    with pytest.raises(Unavailable) as caught:
        await view.agents.apply("planner", lambda state: state.with_dialog("main", dialog.id))
    assert sleeps.pauses == [] and caught.value.operation == "agents.apply"
    assert not caught.value.exactly_once and "may apply it twice" in str(caught.value)
    assert (await acme.agents.state("planner")).dialogs == {"main": dialog.id}  # it landed


async def test_reads_are_retried_and_nothing_is_when_retries_are_off(store: Store) -> None:
    acme = store.scoped("acme")
    await acme.tasks.create(task_id="T")
    await acme.tasks.add_message("T", {"role": "user", "content": [TextPart(text="hi")]})
    sleeps = Sleeps()
    plan = FaultPlan(Fault(0, "before", TRANSIENT_ERRORS["ServerSelectionTimeoutError"]))
    assert len(await faulty(store, plan, RetryPolicy(sleep=sleeps)).scoped("acme").tasks.messages(
        "T")) == 1  # fmt: skip
    assert len(sleeps.pauses) == 1
    plan = FaultPlan(Fault(0, "before", TRANSIENT_ERRORS["ServerSelectionTimeoutError"]))
    off = RetryPolicy.no_transient_retries(sleep=sleeps)
    with pytest.raises(Unavailable):
        await faulty(store, plan, off).scoped("acme").tasks.messages("T")
    assert len(sleeps.pauses) == 1


async def test_an_analytics_report_rides_out_a_failover_and_names_itself_when_it_cannot(
    store: Store,
) -> None:
    acme = store.scoped("acme")
    await acme.tasks.create(task_id="T", owner="ann", config=TaskConfigPart(model_name="m"))
    await acme.tasks.add_human_message("T", "hi", message_id="u1")
    expected = await acme.analytics.top_owners()
    sleeps = Sleeps()
    plan = FaultPlan(Fault(0, "before", TRANSIENT_ERRORS["NotPrimaryError"]))
    assert await faulty(store, plan, RetryPolicy(sleep=sleeps)).scoped("acme").analytics.top_owners(
        ) == expected  # fmt: skip
    assert plan.fired and len(sleeps.pauses) == 1
    plan = FaultPlan(Fault(0, "before", TRANSIENT_ERRORS["NotPrimaryError"]))
    off = RetryPolicy.no_transient_retries(sleep=sleeps)
    with pytest.raises(Unavailable) as raised:
        await faulty(store, plan, off).scoped("acme").analytics.top_owners()
    assert raised.value.operation == "analytics.top_owners" and len(sleeps.pauses) == 1


@given(attempt=st.integers(0, 40))
def test_the_backoff_doubles_is_bounded_and_half_of_it_is_jitter(attempt: int) -> None:
    policy = RetryPolicy()
    ceiling = min(policy.transient_max_delay, policy.transient_base_delay * 2**attempt)
    pause = policy.transient_delay(attempt)
    assert ceiling / 2 <= pause <= ceiling <= policy.transient_max_delay


def test_the_default_policy_waits_a_few_seconds_in_all() -> None:
    """Five attempts: four pauses, at least 1.9 s and at most 3.75 s in all (on top of the
    driver's own wait for a primary in each attempt): a failover of a few seconds."""
    policy = RetryPolicy()
    floors = [min(policy.transient_max_delay, policy.transient_base_delay * 2**a) / 2
              for a in range(policy.transient_attempts - 1)]  # fmt: skip
    assert sum(floors) > 1.8 and sum(f * 2 for f in floors) < 4


async def test_the_same_call_long_after_its_failure_is_a_new_call(store: Store) -> None:
    """The ledger keeps a call in doubt for `ttl` seconds: a retry comes soon; the same
    words said again later are a new message, not a retry swallowed."""
    now = [0.0]
    ledger = InDoubt(ttl=300, clock=lambda: now[0])
    await store.scoped("acme").tasks.create(task_id="T")
    plan = FaultPlan(Fault(0, "after", TRANSIENT_ERRORS["AutoReconnect"], writes_only=True))
    lossy = faulty(store, plan, RetryPolicy.no_transient_retries())
    lossy.in_doubt = ledger
    with pytest.raises(Unavailable):
        await lossy.scoped("acme").tasks.add_human_message("T", "ok")
    assert ledger.holds("tasks.add_human_message")
    now[0] += 301
    later = Store(store.backend, retry=RetryPolicy.no_transient_retries())
    later.in_doubt = ledger
    await later.scoped("acme").tasks.add_human_message("T", "ok")
    said = [m["content"] for m in await history(store, "acme", "T")]
    assert said == [[{"type": "text", "text": "ok"}]] * 2
    assert not ledger.holds("tasks.add_human_message")
