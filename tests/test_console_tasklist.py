"""The console's task list (issue 46, round two): its total, newer and older links both
ways across inserts, oldest first, the title filter, the owner prefix, the `until` bound,
the model and error columns, "tree" only where a dialog has forks, and hostile filters
(a 400 naming the field, nothing interpreted)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from console_support import ADMIN_TOKEN, OPERATORS
from mindstore.console import app
from mindstore.console.web import PAGE_TASKS
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.model.parts import TaskConfigPart
from mindstore.store import Store

BASE = "http://console.test"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
LINK = re.compile(r'href="/t/acme/tasks/([^"?/]+)"')


@pytest.fixture
async def client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app(store, OPERATORS))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as opened:
        yield opened


async def listed(client: httpx.AsyncClient, url: str = "/t/acme/", **params: str) -> str:
    response = await client.get(url, params=params or None, headers=AUTH)
    assert response.status_code == 200, response.text
    return response.text


def link(page: str, kind: str) -> str | None:
    found = re.search(rf'class="{kind}" href="([^"]+)"', page)
    return found.group(1).replace("&amp;", "&") if found else None


def total(page: str) -> str:
    found = re.search(r'<p id="total">([^<]*)</p>', page)
    assert found, page
    return found.group(1)


async def test_newer_and_older_links_page_both_ways_across_inserts(
    client: httpx.AsyncClient, store: Store
) -> None:
    acme = store.scoped("acme")
    for number in range(PAGE_TASKS + 5):
        await acme.tasks.create(owner="o", title=f"task {number}")
    stored = [t.id for t in (await acme.tasks.list(limit=1000)).items]
    first = await listed(client)
    assert total(first) == f"{PAGE_TASKS + 5} tasks match."
    assert LINK.findall(first) == stored[:PAGE_TASKS] and link(first, "previous") is None
    older = link(first, "next")
    assert older is not None
    await acme.tasks.create(owner="o", title="newest")  # lands above both pages
    second = await listed(client, older)
    assert LINK.findall(second) == stored[PAGE_TASKS:]
    assert link(second, "next") is None and total(second) == f"{PAGE_TASKS + 6} tasks match."
    newer = link(second, "previous")
    assert newer is not None and "back=" in newer
    back = await listed(client, newer)
    assert LINK.findall(back) == stored[:PAGE_TASKS]  # the same page, not the new task
    assert link(back, "previous") is not None  # the new task is newer still
    assert link(back, "next") is not None
    oldest = await listed(client, order="oldest")
    assert LINK.findall(oldest)[:5] == stored[::-1][:5]
    assert ">Newer tasks<" in oldest and "order=oldest" in (link(oldest, "next") or "")


async def test_back_at_the_start_shows_the_first_page_whole(
    client: httpx.AsyncClient, store: Store
) -> None:
    acme = store.scoped("acme")
    for _ in range(PAGE_TASKS + 2):
        await acme.tasks.create(owner="o")
    stored = [t.id for t in (await acme.tasks.list(limit=1000)).items]
    second = await listed(client, link(await listed(client), "next") or "")
    assert LINK.findall(second) == stored[PAGE_TASKS:]
    for _ in range(3):  # three newer tasks: going back reads them and fills a page
        await acme.tasks.create(owner="o")
    back = await listed(client, link(second, "previous") or "")
    assert len(LINK.findall(back)) == PAGE_TASKS


async def test_filters_title_owner_prefix_and_until_are_literal(
    client: httpx.AsyncClient, store: Store
) -> None:
    acme = store.scoped("acme")
    plan = await acme.tasks.create(owner="team.a", title="Plan (draft) .* $ne")
    other = await acme.tasks.create(owner="teamxa", title="PLAN two")
    third = await acme.tasks.create(owner="team.ab", title="unrelated")
    order = [t.id for t in (await acme.tasks.list()).items]  # ties at a millisecond: by id

    def newest_first(*ids: str) -> list[str]:
        return [i for i in order if i in ids]

    assert LINK.findall(await listed(client, title="plan")) == newest_first(other.id, plan.id)
    for text in (".*", "(", "$ne", '{"$ne": 1}'[:4]):
        page = await listed(client, title=text)
        assert LINK.findall(page) == ([plan.id] if text != '{"$n' else []), text
    assert LINK.findall(await listed(client, owner="team.")) == newest_first(third.id, plan.id)
    assert LINK.findall(await listed(client, owner=".*")) == []
    assert total(await listed(client, owner="team.")) == "2 tasks match."
    assert total(await listed(client, until="2000-01-01")) == "0 tasks match."
    assert LINK.findall(await listed(client, until="2000-01-01")) == []
    bounded = await listed(client, since="2000-01-01", until="2999-01-01")
    assert total(bounded) == "3 tasks match." and len(LINK.findall(bounded)) == 3
    bad = await client.get("/t/acme/", params={"since": "2030-01-01", "until": "2020-01-01"},
                           headers=AUTH)  # fmt: skip
    assert bad.status_code == 400 and "until" in bad.text


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("owner=%24ne", "owner"),
        ("owner=" + "x" * 10_000, "owner"),
        ("title=" + "x" * 10_000, "title"),
        ("title=%ED%A0%80", "title"),  # a lone surrogate's bytes
        ("owner=a%ED%A0%80", "owner"),
        ("order=%24ne", "order"),
        ("until=%24ne", "until"),
        ("cursor=x&back=y", "back"),
        ("back=not-a-cursor", "cursor"),
    ],
)
async def test_a_hostile_filter_is_a_400_naming_the_field(
    client: httpx.AsyncClient, store: Store, query: str, field: str
) -> None:
    await store.scoped("acme").tasks.create(owner="o", title="t")
    response = await client.get(f"/t/acme/?{query}", headers=AUTH)
    assert response.status_code == 400
    assert field in response.text


async def test_model_error_and_tree_columns(client: httpx.AsyncClient, store: Store) -> None:
    acme = store.scoped("acme")
    configured = await acme.tasks.create(owner="o", config=TaskConfigPart(model_name="m-<1>"))
    failed = await acme.tasks.create(owner="o", state="failed")
    parent = await acme.tasks.create(owner="o")
    await acme.tasks.add_human_message(parent.id, "hi")
    child = await acme.dialogs.fork(parent.id, owner="o")
    page = await listed(client)
    rows = {LINK.findall(row)[0]: row for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
            if LINK.findall(row)}  # fmt: skip
    assert "m-&lt;1&gt;" in rows[configured.id]
    assert ">error<" in rows[failed.id] and ">error<" not in rows[configured.id]
    trees = set(re.findall(r'href="/t/acme/tree/([^"]+)"', page))
    assert trees == {parent.id, child.id}
    assert "encrypted store seals its titles" in page  # what the title filter cannot do


async def test_a_title_filter_on_an_encrypted_store_is_refused_by_name(
    store: Store, tmp_path: Path
) -> None:
    await store.scoped("acme").tasks.create(owner="o", title="plain")
    vault = LocalKeyVault(tmp_path / "vault", LocalMasterKey(bytes(range(32))))
    sealed = Store(store.backend, keyring=Keyring(vault))
    transport = httpx.ASGITransport(app=app(sealed, OPERATORS))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        refused = await client.get("/t/acme/", params={"title": "plain"}, headers=AUTH)
        assert refused.status_code == 400 and "title" in refused.text
        assert total(await listed(client, owner="o")) == "1 task match."
