"""`tasks.list` and `tasks.count` filters: an owner prefix, a title substring, an `until`
bound, oldest first and `previous_cursor` (paging back): every filter a literal, every bad
one a `ValidationError` naming its argument, nothing stored changed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import close_store, open_store
from mindstore.errors import ValidationError
from mindstore.model.parts import TaskConfigPart
from mindstore.repositories.records import Page, TaskRecord
from mindstore.store import Store, TenantStore


async def titled(acme: TenantStore) -> dict[str, str]:
    """Tasks whose titles and owners hold regex and operator characters."""
    made = {}
    named = [("a.b", "Plan (draft)"), ("a.bc", "a.*b literally"), ("axb", "$ne and friends"),
             ("b", "PLAN final"), ("a.b", None)]  # fmt: skip
    for owner, title in named:
        record = await acme.tasks.create(owner=owner, title=title)
        made[title or "untitled"] = record.id
    return made


async def ids(page: Page[TaskRecord]) -> list[str]:
    return [t.id for t in page.items]


async def test_an_owner_prefix_is_literal_and_anchored(store: Store) -> None:
    acme = store.scoped("acme")
    await titled(acme)
    owners = sorted(t.owner or "" for t in (await acme.tasks.list(owner_prefix="a.")).items)
    assert owners == ["a.b", "a.b", "a.bc"]  # "axb" does not match: the dot is a dot
    assert await acme.tasks.count(owner_prefix="a.") == 3
    assert (await acme.tasks.list(owner_prefix="b")).items[0].owner == "b"  # not "a.b"
    assert await acme.tasks.count(owner_prefix=".*") == 0
    assert (await store.scoped("acme", owner="a.bc").tasks.list(owner_prefix="a.b")).items
    assert not (await store.scoped("acme", owner="a.bc").tasks.list(owner_prefix="b")).items


async def test_a_title_filter_is_a_literal_substring_ignoring_case(store: Store) -> None:
    acme = store.scoped("acme")
    made = await titled(acme)
    plan = await acme.tasks.list(title="plan")
    assert sorted(t.title or "" for t in plan.items) == ["PLAN final", "Plan (draft)"]
    for text, expected in [(".*", "a.*b literally"), ("(", "Plan (draft)"),
                           ("$ne", "$ne and friends")]:  # fmt: skip
        found = (await acme.tasks.list(title=text)).items
        assert [t.id for t in found] == [made[expected]], text
        assert await acme.tasks.count(title=text) == 1
    assert await acme.tasks.count(title="^plan") == 0


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"owner_prefix": "$ne"}, "owner_prefix"),
        ({"owner_prefix": "x" * 10_000}, "owner_prefix"),
        ({"owner_prefix": {"$ne": 1}}, "owner_prefix"),
        ({"owner_prefix": "a", "owner": "a.b"}, "owner_prefix"),
        ({"title": "x" * 10_000}, "title"),
        ({"title": "\ud800"}, "title"),
        ({"title": ""}, "title"),
        ({"title": {"$regex": "."}}, "title"),
        ({"updated_before": "yesterday"}, "updated_before"),
        ({"oldest_first": "yes"}, "oldest_first"),
    ],
)
async def test_a_bad_filter_names_its_argument(
    store: Store, arguments: dict[str, object], named: str
) -> None:
    acme = store.scoped("acme")
    await titled(acme)
    before = await store.database["tasks"].find({}).to_list(None)
    with pytest.raises(ValidationError) as raised:
        await acme.tasks.list(**arguments)  # type: ignore[arg-type]
    assert named in str(raised.value)
    count_arguments = {k: v for k, v in arguments.items() if k != "oldest_first"}
    if count_arguments:
        with pytest.raises(ValidationError):
            await acme.tasks.count(**count_arguments)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="at_most"):
        await acme.tasks.count(at_most=0)
    assert await store.database["tasks"].find({}).to_list(None) == before


async def test_until_bounds_the_listing_and_the_count(store: Store) -> None:
    acme = store.scoped("acme")
    await titled(acme)
    newest = (await acme.tasks.list(limit=1)).items[0]
    everything = await acme.tasks.count()
    assert everything == 5
    before = await acme.tasks.list(updated_before=newest.updated_at)
    assert newest.id not in await ids(before)
    assert await acme.tasks.count(updated_before=newest.updated_at) == len(before.items)
    later = newest.updated_at + timedelta(seconds=1)
    assert await acme.tasks.count(updated_after=datetime(2000, 1, 1, tzinfo=UTC),
                                  updated_before=later) == everything  # fmt: skip
    assert await acme.tasks.count(at_most=2) == 2


async def test_paging_both_ways_in_both_orders_across_inserts(store: Store) -> None:
    acme = store.scoped("acme")
    for _ in range(7):
        await acme.tasks.create(owner="o")
    for oldest in (False, True):
        whole = await ids(await acme.tasks.list(limit=100, oldest_first=oldest))
        first = await acme.tasks.list(limit=3, oldest_first=oldest)
        second = await acme.tasks.list(limit=3, oldest_first=oldest, cursor=first.next_cursor)
        assert await ids(first) + await ids(second) == whole[:6]
        await acme.tasks.create(owner="o")  # a new task: the newest, outside both pages
        assert second.previous_cursor is not None
        back = await acme.tasks.list(limit=3, oldest_first=not oldest,
                                     cursor=second.previous_cursor)  # fmt: skip
        assert (await ids(back))[::-1] == await ids(first)
        # newest first, the new task lies beyond the first page; oldest first, nothing does
        assert (back.next_cursor is None) == oldest
        again = await acme.tasks.list(limit=3, oldest_first=oldest, cursor=first.next_cursor)
        assert await ids(again) == await ids(second)


async def test_the_record_names_its_model(store: Store) -> None:
    acme = store.scoped("acme")
    record = await acme.tasks.create(owner="o", config=TaskConfigPart(model_name="m-1"))
    await acme.tasks.create(owner="o")
    models = {t.id: t.model for t in (await acme.tasks.list()).items}
    assert models[record.id] == "m-1"
    assert set(models.values()) == {"m-1", None}
    assert (await acme.tasks.get(record.id)).model == "m-1"


async def test_forked_names_the_forks_and_their_parents(store: Store) -> None:
    acme = store.scoped("acme")
    parent = await acme.tasks.create(owner="o")
    await acme.tasks.add_human_message(parent.id, "hi")
    lone = await acme.dialogs.create(owner="o")
    child = await acme.dialogs.fork(parent.id, owner="o")
    plain = await acme.tasks.create(owner="o")
    found = await acme.dialogs.forked([parent.id, lone.id, child.id, plain.id])
    assert found == {parent.id, child.id}
    assert await store.scoped("acme", owner="x").dialogs.forked([parent.id]) == set()
    with pytest.raises(ValidationError, match="dialog"):
        await acme.dialogs.forked(["$ne"])


TEXT = st.text(alphabet="aAbB.*+?()[]{}^$\\|-#~ ", min_size=1, max_size=6)


async def literal_matches(titles: list[str], owners: list[str], title: str, prefix: str) -> None:
    store = await open_store()
    try:
        acme = store.scoped("acme")
        for owner, stored_title in zip(owners, titles, strict=True):
            await acme.tasks.create(owner=owner, title=stored_title)
        by_title = (await acme.tasks.list(title=title, limit=1000)).items
        expected = sorted(t for t in titles if title.lower() in t.lower())
        assert sorted(t.title or "" for t in by_title) == expected
        by_owner = (await acme.tasks.list(owner_prefix=prefix, limit=1000)).items
        assert sorted(t.owner or "" for t in by_owner) == sorted(
            o for o in owners if o.startswith(prefix)
        )
        assert await acme.tasks.count(owner_prefix=prefix) == len(by_owner)
    finally:
        await close_store(store)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    titles=st.lists(TEXT, min_size=1, max_size=4),
    title=TEXT,
    prefix=TEXT.filter(lambda t: not t.startswith(("$", " ")) and t.strip() == t),
    data=st.data(),
)
def test_filters_match_exactly_what_the_text_says_whatever_its_characters(
    titles: list[str], title: str, prefix: str, data: st.DataObject
) -> None:
    """Title: a substring ignoring (ASCII) case; owner: a prefix; never a pattern."""
    owners = [
        data.draw(st.sampled_from([prefix + suffix, suffix + prefix, "o" + suffix]))
        for suffix in data.draw(st.lists(st.sampled_from(["", "x", ".", "*"]),
                                         min_size=len(titles), max_size=len(titles)))
    ]  # fmt: skip
    asyncio.run(literal_matches(titles, owners, title.strip() or "a", prefix))
