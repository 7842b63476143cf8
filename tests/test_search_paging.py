"""Walking a search's pages while the tenant writes (docs/search.md, "Pages"): a message
that is a hit for the whole walk is returned exactly once, whatever is appended, redacted
or deleted between pages (sequential and concurrent writers); a cursor works only for the
tenant, owner scope, query and filters it came from; a forged cursor is a typed error."""

from __future__ import annotations

import asyncio
import base64
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from conftest import close_store, open_store
from mindstore import Store
from mindstore.errors import ValidationError

Between = Callable[[list[str]], Awaitable[None]]


async def _walk(
    view: mindstore.TenantStore, query: str, limit: int, between: Between | None = None
) -> list[list[str]]:
    """Every page of `query`, as message ids; `between(page)` runs after each page. At
    most 50 pages (a walk that keeps finding new hits would never end)."""
    pages: list[list[str]] = []
    cursor = None
    while len(pages) < 50:
        page = await view.search(query, limit=limit, cursor=cursor)
        pages.append([hit.message_id for hit in page.hits])
        if page.next_cursor is None:
            return pages
        if between is not None:
            await between(pages[-1])
        cursor = page.next_cursor
    raise AssertionError("the walk did not end in 50 pages")


async def _seed(acme: mindstore.TenantStore, count: int) -> tuple[str, list[str]]:
    """`count` messages holding "word", of varied lengths (so of varied scores)."""
    task = await acme.tasks.create(owner="alice")
    ids = []
    for n in range(count):
        text = "word " + " ".join(f"filler{k}" for k in range(n % 7))
        ids.append((await acme.tasks.add_human_message(task.id, text, message_id=f"m{n}")).id)
    return task.id, ids


def _duplicates(pages: list[list[str]]) -> int:
    return sum(n - 1 for n in Counter(i for page in pages for i in page).values())


async def test_appends_between_pages_repeat_no_hit_and_skip_none(acme: Any) -> None:
    """Shorter, newer messages rank above every seeded one, and the other appends move
    the tenant's statistics (every score of a fresh ranking): an offset walk repeated
    hits; a keyset walk under the first page's statistics does not."""
    task_id, seeded = await _seed(acme, 40)
    made = 0

    async def append(_page: list[str]) -> None:
        nonlocal made
        for _ in range(3):
            await acme.tasks.add_human_message(task_id, "word", message_id=f"new{made}")
            await acme.tasks.add_human_message(task_id, "other " * 12, message_id=f"x{made}")
            made += 1

    pages = await _walk(acme, "word", 4, append)
    seen = [i for page in pages for i in page]
    assert len(pages) >= 10 and _duplicates(pages) == 0
    assert Counter(i for i in seen if i in seeded) == Counter(seeded)  # each exactly once
    # the appended messages rank first, before the walk's position: none is returned
    assert not [i for i in seen if i.startswith("new")]
    assert (await acme.search("word", limit=1)).total == 40 + made


async def test_redacting_seen_hits_between_pages_skips_no_unseen_one(acme: Any) -> None:
    task_id, seeded = await _seed(acme, 30)

    async def redact(page: list[str]) -> None:
        for message_id in page[:2]:
            await acme.tasks.redact(task_id, message_id)

    pages = await _walk(acme, "word", 4, redact)
    seen = [i for page in pages for i in page]
    assert _duplicates(pages) == 0 and Counter(seen) == Counter(seeded)


async def test_a_phrase_walk_while_writing_repeats_and_skips_nothing(acme: Any) -> None:
    task = await acme.tasks.create()
    seeded = []
    for n in range(12):
        text = "hotel booking " + "x " * (n % 4) + ("" if n % 3 else "booking hotel")
        seeded.append((await acme.tasks.add_human_message(task.id, text, message_id=f"m{n}")).id)
    made = 0

    async def write(page: list[str]) -> None:
        nonlocal made
        for _ in range(2):
            await acme.tasks.add_human_message(task.id, "hotel booking", message_id=f"new{made}")
            made += 1
        await acme.tasks.redact(task.id, page[0])

    pages = await _walk(acme, '"hotel booking"', 3, write)
    seen = [i for page in pages for i in page]
    assert _duplicates(pages) == 0 and set(seeded) <= set(seen)


async def _beside_a_writer(
    acme: Any, redacting: bool
) -> tuple[list[list[str]], list[str], set[str]]:
    """A walk of "word" (3 hits a page) and a writer as concurrent coroutines on one
    store: the writer appends (a matching message, a filler) and, when `redacting`,
    redacts a seeded message each round, until the walk ends or after 30 rounds (a writer
    that outpaces the walk would add hits below its position forever)."""
    task_id, seeded = await _seed(acme, 24)
    redacted: set[str] = set()
    walking = True

    async def writer() -> None:
        n = 0
        while walking and n < 30:
            await acme.tasks.add_human_message(task_id, "word " * (n % 3 + 1), message_id=f"w{n}")
            await acme.tasks.add_human_message(task_id, "filler " * (n % 5 + 1))
            if redacting and f"m{n}" in seeded:
                await acme.tasks.redact(task_id, f"m{n}")
                redacted.add(f"m{n}")
            n += 1
            await asyncio.sleep(0)

    async def walker() -> list[list[str]]:
        nonlocal walking
        try:
            return await _walk(acme, "word", 3)
        finally:
            walking = False

    pages, _ = await asyncio.gather(walker(), writer())
    return pages, seeded, redacted


async def test_a_walk_beside_a_concurrent_appender(acme: Any) -> None:
    pages, seeded, _ = await _beside_a_writer(acme, redacting=False)
    assert _duplicates(pages) == 0 and len(pages) >= 8
    assert Counter(i for page in pages for i in page if i in seeded) == Counter(seeded)


async def test_a_walk_beside_a_concurrent_redactor(acme: Any) -> None:
    pages, seeded, redacted = await _beside_a_writer(acme, redacting=True)
    seen = [i for page in pages for i in page]
    assert _duplicates(pages) == 0
    assert set(seeded) - redacted <= set(seen)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "filler", "redact_seen", "redact_unseen"]),
                  st.integers(0, 6)),
        min_size=1, max_size=12,
    ),
    st.integers(2, 5),
)  # fmt: skip
def test_any_writes_between_pages_keep_the_walk_exact(
    writes: list[tuple[str, int]], limit: int
) -> None:
    """Random appends (matching or not) and redactions (of returned or pending hits)
    between pages: no message twice; every seeded message never redacted, once."""

    async def run() -> None:
        store = await open_store()
        try:
            acme = store.scoped("acme")
            task_id, seeded = await _seed(acme, 14)
            redacted: set[str] = set()
            returned: list[str] = []
            steps = iter(writes)

            async def between(page: list[str]) -> None:
                returned.extend(page)
                kind, n = next(steps, ("none", 0))
                if kind == "append":
                    await acme.tasks.add_human_message(task_id, "word " * (n + 1))
                elif kind == "filler":
                    await acme.tasks.add_human_message(task_id, "filler " * (n + 1))
                else:
                    pool = [i for i in seeded if i not in redacted]
                    pool = [i for i in pool if (i in returned) == (kind == "redact_seen")]
                    if pool:
                        await acme.tasks.redact(task_id, pool[n % len(pool)])
                        redacted.add(pool[n % len(pool)])

            pages = await _walk(acme, "word", limit, between)
            seen = [i for page in pages for i in page]
            assert _duplicates(pages) == 0
            assert set(seeded) - redacted <= set(seen)
        finally:
            await close_store(store)

    asyncio.run(run())


# ------------------------------------------------------------------ a cursor's binding
async def _cursor_of(view: mindstore.TenantStore, query: str = "plan", **options: Any) -> str:
    page = await view.search(query, limit=1, **options)
    assert page.next_cursor is not None
    return page.next_cursor


async def test_a_cursor_is_refused_by_another_tenant_owner_scope_or_query(store: Store) -> None:
    for tenant in ("acme", "globex"):
        for owner in ("alice", "bob"):
            view = store.scoped(tenant)
            task = await view.tasks.create(owner=owner)
            for n in range(3):
                await view.tasks.add_human_message(task.id, f"plan {n}")
    acme, globex = store.scoped("acme"), store.scoped("globex")
    alice, bob = store.scoped("acme", owner="alice"), store.scoped("acme", owner="bob")
    cursor = await _cursor_of(acme)
    assert len((await acme.search("plan", limit=1, cursor=cursor)).hits) == 1  # its own
    owned = await _cursor_of(alice)
    refused = [
        (globex, "plan", cursor, {}),  # another tenant, the same query
        (alice, "plan", cursor, {}),  # the tenant's cursor in an owner's view
        (bob, "plan", owned, {}),  # another owner's
        (acme, "plan", owned, {"owner": "alice"}),  # the same hits, another scope
        (acme, "plans", cursor, {}),  # another query
        (acme, "plan", cursor, {"roles": ["user"]}),  # other filters
    ]
    for view, query, given_cursor, options in refused:
        refusal = pytest.raises(ValidationError, match="cursor")
        with view.store.backend.recorder.capture() as log, refusal:
            await view.search(query, limit=1, cursor=given_cursor, **options)
        assert [c.name for c in log] == []  # refused before any I/O


async def test_a_cursor_made_under_other_stemming_is_refused(acme: Any) -> None:
    task = await acme.tasks.create()
    for n in range(3):
        await acme.tasks.add_human_message(task.id, f"running {n}")
    cursor = await _cursor_of(acme, "running")
    await acme.search_index.rebuild(stemming="english")
    with pytest.raises(ValidationError, match="cursor: the index's terms changed"):
        await acme.search("running", limit=1, cursor=cursor)


def _forged(cursor: str, **changes: Any) -> str:
    data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    data.update(changes)
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


async def test_a_forged_cursor_is_a_typed_error(acme: Any) -> None:
    from mindstore.search.service import MAX_CURSOR_CHARS

    task = await acme.tasks.create(owner="alice")
    for n in range(3):
        await acme.tasks.add_human_message(task.id, f"plan {n}")
    cursor = await _cursor_of(acme)
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    nan = base64.urlsafe_b64encode(raw.replace(b'"s":', b'"s":NaN,"z":')).decode()
    forged = [
        "garbage", "é" * 10, "x" * (MAX_CURSOR_CHARS + 1), 42, nan,
        _forged(cursor, s=float("inf")), _forged(cursor, s="1"), _forged(cursor, n=-1),
        _forged(cursor, n=True), _forged(cursor, d=[1] * 40), _forged(cursor, d=[1, 2]),
        _forged(cursor, i=""), _forged(cursor, i="x" * 600), _forged(cursor, x=[1]),
        _forged(cursor, x=[99, None]), _forged(cursor, l=10**40), _forged(cursor, v=2),
        base64.urlsafe_b64encode(b"[" * 3000).decode(),
    ]  # fmt: skip
    for bad in forged:
        with pytest.raises(ValidationError, match="cursor"):
            await acme.search("plan", limit=1, cursor=bad)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | st.binary(max_size=300).map(
    lambda raw: base64.urlsafe_b64encode(raw).decode()))  # fmt: skip
def test_any_text_is_a_position_or_a_typed_error(cursor: str) -> None:
    from mindstore.search.modes import Recall
    from mindstore.search.service import _fingerprint, _position, check_filters

    filters = check_filters(None, None, None, None, None, None)
    fingerprint = _fingerprint("acme", None, "plan", Recall("lexical", "any"), filters)
    try:
        position = _position(cursor, fingerprint)
    except ValidationError as error:
        assert "cursor" in str(error)
        return
    assert position is not None
