"""The console over HTTP (no browser): credentials, tenant scoping by any URL, the headers
every response carries, the session cookie, paging, the live feed's endpoint, encrypted
and shredded tenants, and that it never writes (mindstore.console)."""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import AsyncIterator
from datetime import datetime

import httpx
import pytest

from console_support import ADMIN_TOKEN, OPERATORS, T0_TOKEN, demo
from mindstore.backends.recorder import observe_all
from mindstore.console import app
from mindstore.console.security import COOKIE, CSP
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TextPart
from mindstore.portable import WRITE_COMMANDS
from mindstore.store import Store

BASE = "http://console.test"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def client_for(store: Store, **options: object) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app(store, OPERATORS, **options))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=BASE)


@pytest.fixture
async def ids(store: Store) -> dict[str, str]:
    return await demo(store)


@pytest.fixture
async def client(store: Store, ids: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(store) as opened:
        yield opened


async def first_task(client: httpx.AsyncClient, tenant: str, token: str) -> str:
    listing = await client.get(f"/t/{tenant}/", headers=bearer(token))
    found = re.findall(rf'href="/t/{tenant}/tasks/([^"?/]+)"', listing.text)
    assert found, listing.text
    return found[0]


def urls(tenant: str, task_id: str) -> list[str]:
    """Every page and data route of one tenant, for one of its tasks."""
    return [
        f"/t/{tenant}/", f"/t/{tenant}/tasks/{task_id}", f"/t/{tenant}/tasks/{task_id}?before=2",
        f"/t/{tenant}/tasks/{task_id}/feed?after=0", f"/t/{tenant}/tree/{task_id}",
        f"/t/{tenant}/charts", f"/t/{tenant}/charts/tokens.csv", f"/t/{tenant}/charts/owners.csv",
    ]  # fmt: skip


async def test_no_page_or_data_without_a_credential(
    client: httpx.AsyncClient, ids: dict[str, str]
) -> None:
    task_id = await first_task(client, "tenant-0", ADMIN_TOKEN)
    for url in ["/", *urls("tenant-0", task_id)]:
        for headers in ({}, bearer("not-a-token-of-anyone"), bearer(""),
                        {"Cookie": f"{COOKIE}=forged-session"}):  # fmt: skip
            response = await client.get(url, headers=headers)
            if url.endswith((".csv",)) or "/feed" in url:
                assert response.status_code == 401, url
            else:
                assert response.status_code == 303, url
                assert response.headers["location"] == "/login"
            assert "tenant-0" not in response.text, url
    assert (await client.get("/login")).status_code == 200


async def test_a_tenants_credential_reaches_nothing_of_another_tenant(
    client: httpx.AsyncClient, ids: dict[str, str]
) -> None:
    other = ids["other"]  # tenant-1's task
    own = await first_task(client, "tenant-0", T0_TOKEN)
    # another tenant answers exactly as a tenant that does not exist
    missing = await client.get("/t/no-such-tenant/", headers=bearer(T0_TOKEN))
    swapped = await client.get("/t/tenant-1/", headers=bearer(T0_TOKEN))
    assert missing.status_code == swapped.status_code == 404
    assert missing.text == swapped.text
    attempts = [
        *urls("tenant-1", other),  # the other tenant, by its real task id
        *urls("tenant-1", own),  # tenant swapped, own task id
        *[u for u in urls("tenant-0", other) if other in u],  # own tenant, the other's task
        "/t/tenant-0/../tenant-1/", "/t/tenant-0/%2E%2E/tenant-1/", "/t/%74enant-1/",
        "/t/tenant-1%2F/", f"/t/tenant-0/tasks/..%2F..%2Ftenant-1%2Ftasks%2F{other}",
        f"/t/tenant-0/tasks/{other}%00", "/t/TENANT-1/", "/t/tenant-1 /", "/t/*/",
        f"/t/tenant-0/tree/{other}", "/t/tenant-1/charts?period=week",
    ]  # fmt: skip
    for url in attempts:
        response = await client.get(url, headers=bearer(T0_TOKEN))
        assert response.status_code in (400, 404), (url, response.status_code)
        assert "tenant one secret" not in response.text and "only tenant-1" not in response.text
        assert other not in response.text or response.status_code == 400, url
    # the tenants page lists only its own tenant; the admin sees both
    mine = await client.get("/", headers=bearer(T0_TOKEN))
    assert "/t/tenant-0/" in mine.text and "/t/tenant-1/" not in mine.text
    every = await client.get("/", headers=bearer(ADMIN_TOKEN))
    assert "/t/tenant-0/" in every.text and "/t/tenant-1/" in every.text
    page = await client.get(f"/t/tenant-1/tasks/{other}", headers=bearer(ADMIN_TOKEN))
    assert page.status_code == 200 and "only tenant-1 sees this" in page.text


async def test_every_response_carries_the_policy_and_headers(
    client: httpx.AsyncClient, ids: dict[str, str]
) -> None:
    task_id = await first_task(client, "tenant-0", ADMIN_TOKEN)
    cases = [("/login", {}), ("/static/console.css", {}), ("/static/feed.js", {}),
             ("/static/missing.js", {}), ("/", {}), ("/nowhere", bearer(ADMIN_TOKEN)),
             ("/t/tenant-1/", bearer(T0_TOKEN))]  # fmt: skip
    cases += [(url, bearer(ADMIN_TOKEN)) for url in ["/", *urls("tenant-0", task_id)]]
    for url, headers in cases:
        response = await client.get(url, headers=headers)
        assert response.headers["content-security-policy"] == CSP, url
        assert response.headers["x-content-type-options"] == "nosniff", url
        assert response.headers["x-frame-options"] == "DENY", url
    posted = await client.post("/login", content=b"token=wrong")
    assert posted.status_code == 401 and posted.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP and "unsafe-inline" not in CSP


async def test_login_opens_a_strict_httponly_session_and_logout_ends_it(
    client: httpx.AsyncClient,
) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    response = await client.post("/login", content=f"token={T0_TOKEN}".encode(), headers=form)
    assert response.status_code == 303
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and T0_TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    session = cookie.split(";")[0].split("=", 1)[1]
    signed = {"Cookie": f"{COOKIE}={session}"}
    assert "/t/tenant-0/" in (await client.get("/", headers=signed)).text
    await client.post("/logout", headers=signed)
    assert (await client.get("/", headers=signed)).status_code == 303


async def test_a_login_or_logout_posted_from_another_site_is_refused(
    client: httpx.AsyncClient,
) -> None:
    body = f"token={ADMIN_TOKEN}".encode()
    for origin in ("https://evil.example", "null", "http://console.test.evil.example"):
        refused = await client.post("/login", content=body, headers={"Origin": origin})
        assert refused.status_code == 403 and "set-cookie" not in refused.headers, origin
        assert (await client.post("/logout", headers={"Origin": origin})).status_code == 403
    same = await client.post("/login", content=body, headers={"Origin": BASE})
    assert same.status_code == 303 and "set-cookie" in same.headers


async def test_secure_cookies_when_served_over_https(store: Store) -> None:
    async with await client_for(store, secure_cookies=True) as secure:
        response = await secure.post("/login", content=f"token={ADMIN_TOKEN}".encode())
        assert "Secure" in response.headers["set-cookie"]


async def test_a_task_page_shows_its_last_messages_and_pages_back(store: Store) -> None:
    tasks = store.scoped("acme").tasks
    record = await tasks.create(title="long", messages=[
        UserMessage(content=[TextPart(text=f"message number {i}")]) for i in range(25)
    ])  # fmt: skip
    async with await client_for(store, page_messages=10) as client:
        base = f"/t/acme/tasks/{record.id}"
        shown = []
        url: str | None = base
        while url is not None:
            page = (await client.get(url, headers=bearer(ADMIN_TOKEN))).text
            numbers = [int(n) for n in re.findall(r"message number (\d+)<", page)]
            assert numbers == sorted(numbers) and len(numbers) <= 10
            shown.append(numbers)
            older = re.search(r'class="older" href="([^"]+)"', page)
            url = older.group(1) if older else None
        assert shown == [list(range(15, 25)), list(range(5, 15)), list(range(5))]
        assert 'data-feed="' in (await client.get(base, headers=bearer(ADMIN_TOKEN))).text
        bad = await client.get(f"{base}?before=-1", headers=bearer(ADMIN_TOKEN))
        assert bad.status_code == 400


async def test_the_feed_returns_the_messages_after_an_index(store: Store) -> None:
    tasks = store.scoped("acme").tasks
    record = await tasks.create(messages=[UserMessage(content=[TextPart(text="one")])])
    async with await client_for(store) as client:
        url = f"/t/acme/tasks/{record.id}/feed"
        empty = (await client.get(f"{url}?after=1", headers=bearer(ADMIN_TOKEN))).json()
        assert empty == {"count": 1, "reload": False, "rows": []}
        await tasks.add_human_message(record.id, "<b>two</b>")
        fresh = (await client.get(f"{url}?after=1", headers=bearer(ADMIN_TOKEN))).json()
        assert [row["index"] for row in fresh["rows"]] == [1]
        assert fresh["rows"][0]["blocks"][0]["text"] == "<b>two</b>"
        behind = (await client.get(f"{url}?after=9", headers=bearer(ADMIN_TOKEN))).json()
        assert behind["reload"] is True
        refused = await client.get(f"{url}?after=x", headers=bearer(ADMIN_TOKEN))
        assert refused.status_code == 400


async def test_encrypted_tenants_open_and_a_shredded_one_says_so(
    store_factory: object, tmp_path: object
) -> None:
    keyring = Keyring(LocalMasterKey(os.urandom(32)))
    opened: Store = await store_factory(keyring=keyring)  # type: ignore[operator]
    for tenant in ("vault", "gone"):
        tasks = opened.scoped(tenant).tasks
        record = await tasks.create(title=f"{tenant} title", owner="ann")
        await tasks.add_human_message(record.id, f"{tenant} secret words")
    gone = (await opened.scoped("gone").tasks.list(limit=1)).items[0].id
    vault = (await opened.scoped("vault").tasks.list(limit=1)).items[0].id
    assert await opened.keyring.shred("gone") >= 1  # type: ignore[union-attr]
    async with await client_for(opened) as client:
        page = await client.get(f"/t/vault/tasks/{vault}", headers=bearer(ADMIN_TOKEN))
        assert page.status_code == 200 and "vault secret words" in page.text
        for url in (f"/t/gone/tasks/{gone}", "/t/gone/"):
            shredded = await client.get(url, headers=bearer(ADMIN_TOKEN))
            assert shredded.status_code == 200, url
            assert "was shredded" in shredded.text and "gone secret" not in shredded.text
        charts = await client.get("/t/gone/charts", headers=bearer(ADMIN_TOKEN))
        assert charts.status_code == 200
        listing = await client.get("/", headers=bearer(ADMIN_TOKEN))
        assert "/t/gone/" in listing.text and "/t/vault/" in listing.text
    # the same database, served without the keyring: it says so, and shows no ciphertext
    async with await client_for(Store(opened.backend)) as blind:
        page = await blind.get(f"/t/vault/tasks/{vault}", headers=bearer(ADMIN_TOKEN))
        assert page.status_code == 200 and "without its keyring" in page.text
        assert "vault secret words" not in page.text


async def test_the_console_never_writes(client: httpx.AsyncClient, ids: dict[str, str]) -> None:
    task_id = await first_task(client, "tenant-0", ADMIN_TOKEN)
    with observe_all() as log:
        for url in ["/", *urls("tenant-0", task_id), f"/t/tenant-0/tasks/{ids['xss']}"]:
            assert (await client.get(url, headers=bearer(ADMIN_TOKEN))).status_code == 200, url
    assert log, "the pages read nothing"
    assert not [c.name for c in log if c.name.lower() in WRITE_COMMANDS]


async def test_the_tasks_list_filters_by_owner_and_state_and_pages_by_keyset(
    client: httpx.AsyncClient, store: Store
) -> None:
    everything = []
    url: str | None = "/t/tenant-0/"
    while url is not None:
        page = (await client.get(url, headers=bearer(ADMIN_TOKEN))).text
        everything += re.findall(r'href="/t/tenant-0/tasks/([^"?/]+)"', page)
        following = re.search(r'class="next" href="([^"]+)"', page)
        url = following.group(1).replace("&amp;", "&") if following else None
    stored = []
    listed = await store.scoped("tenant-0").tasks.list(limit=1000)
    stored = [record.id for record in listed.items]
    assert everything == stored
    owner = listed.items[0].owner
    assert owner is not None
    mine = (await client.get("/t/tenant-0/", params={"owner": owner},
                             headers=bearer(ADMIN_TOKEN))).text  # fmt: skip
    expected = [r.id for r in listed.items if r.owner == owner]
    assert re.findall(r'href="/t/tenant-0/tasks/([^"?/]+)"', mine) == expected
    state = (await client.get("/t/tenant-0/", params={"state": "completed"},
                              headers=bearer(ADMIN_TOKEN))).text  # fmt: skip
    done = [r.id for r in listed.items if r.state == "completed"]
    assert re.findall(r'href="/t/tenant-0/tasks/([^"?/]+)"', state) == done
    bad = await client.get("/t/tenant-0/", params={"state": "exploded"},
                           headers=bearer(ADMIN_TOKEN))  # fmt: skip
    assert bad.status_code == 400 and "state" in bad.text


async def test_a_task_page_reads_only_its_last_messages_however_long_the_task(
    store: Store,
) -> None:
    """The page of a 3,000-message task receives about the bytes of a 300-message one's:
    the last page of messages and the header, never the history (a 100,000-message task's
    render time is measured by benchmarks/bench_console.py)."""
    tasks = store.scoped("acme").tasks
    received = {}
    async with await client_for(store) as client:
        for size in (300, 3000):
            history = [UserMessage(content=[TextPart(text=f"m{i} " + "w" * 40)])
                       for i in range(size)]  # fmt: skip
            record = await tasks.create(messages=history, replay=True)
            with observe_all() as log:
                page = await client.get(f"/t/acme/tasks/{record.id}", headers=bearer(ADMIN_TOKEN))
            assert page.status_code == 200 and f"m{size - 1} " in page.text
            assert f"m{size - 101} " not in page.text
            received[size] = sum(c.bytes_received for c in log)
    assert received[3000] < received[300] * 1.3 + 4096, received


async def test_mounted_under_a_prefix_every_link_and_redirect_keeps_it(
    store: Store, ids: dict[str, str]
) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    platform = Starlette(routes=[Mount("/ops/console", app=app(store, OPERATORS))])
    transport = httpx.ASGITransport(app=platform)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        assert (await client.get("/ops/console/")).headers["location"] == "/ops/console/login"
        login = await client.post("/ops/console/login", content=f"token={ADMIN_TOKEN}".encode())
        assert login.headers["location"] == "/ops/console/"
        assert "Path=/ops/console/" in login.headers["set-cookie"]
        page = await client.get(f"/ops/console/t/tenant-0/tasks/{ids['xss']}",
                                headers=bearer(ADMIN_TOKEN))  # fmt: skip
        links = re.findall(r'(?:href|src|action|data-feed)="([^"]*)"', page.text)
        local = [link for link in links if not link.startswith(("data:", "#"))]
        assert local and all(link.startswith("/ops/console/") for link in local), local
        for link in local:
            if link.endswith((".css", ".js")) or "/feed" in link:
                fetched = await client.get(link, headers=bearer(ADMIN_TOKEN))
                assert fetched.status_code == 200, link


async def test_the_tasks_list_filters_by_last_update(
    client: httpx.AsyncClient, store: Store
) -> None:
    listed = (await store.scoped("tenant-0").tasks.list(limit=1000)).items
    middle = sorted(r.updated_at for r in listed)[len(listed) // 2]
    page = await client.get("/t/tenant-0/", params={"since": middle.isoformat()},
                            headers=bearer(ADMIN_TOKEN))  # fmt: skip
    shown = re.findall(r'href="/t/tenant-0/tasks/([^"?/]+)"', page.text)
    assert shown == [r.id for r in listed if r.updated_at > middle] and shown
    bad = await client.get("/t/tenant-0/", params={"since": "yesterday"},
                           headers=bearer(ADMIN_TOKEN))  # fmt: skip
    assert bad.status_code == 400 and "since" in bad.text


async def test_each_chart_csv_holds_the_reports_numbers(
    client: httpx.AsyncClient, store: Store
) -> None:
    analytics = store.scoped("tenant-0").analytics
    tools = (await client.get("/t/tenant-0/charts/tools.csv", headers=bearer(ADMIN_TOKEN))).text
    header, *table = list(csv.reader(io.StringIO(tools)))
    assert header == ["tool", "calls", "results", "errors", "error_rate"]
    expected = await analytics.tools()
    assert sorted(int(row[1]) for row in table) == sorted(r.calls for r in expected)
    assert {row[0].lstrip("'") for row in table} == {r.tool for r in expected}
    usage = await analytics.usage(group_by=("period", "model"), period="week")
    cost = await client.get("/t/tenant-0/charts/cost.csv", params={"period": "week"},
                            headers=bearer(ADMIN_TOKEN))  # fmt: skip
    rows = list(csv.reader(io.StringIO(cost.text)))[1:]
    assert sorted((r[0], r[1]) for r in rows) == sorted((u.period, u.model) for u in usage)
    assert sum(float(r[2]) for r in rows) == pytest.approx(sum(u.cost for u in usage), abs=1e-4)
    missing = await client.get("/t/tenant-0/charts/secrets.csv", headers=bearer(ADMIN_TOKEN))
    assert missing.status_code == 404


async def test_the_tenants_page_sums_each_tenants_owners_over_the_period(
    client: httpx.AsyncClient, store: Store
) -> None:
    since, until = "2026-10-01", "2026-10-05"
    page = await client.get("/", params={"since": since, "until": until},
                            headers=bearer(ADMIN_TOKEN))  # fmt: skip
    row = re.search(r'<td><a href="/t/tenant-1/">tenant-1</a></td>(.*?)</tr>', page.text, re.S)
    assert row is not None
    cells = [c.replace(",", "") for c in re.findall(r"<td>([^<]*)</td>", row.group(1))]
    # the tasks active in the period (created before its end, updated after its start),
    # their owners, and what their headers count
    low = datetime.fromisoformat(f"{since}T00:00:00+00:00")
    high = datetime.fromisoformat(f"{until}T00:00:00+00:00")
    listed = await store.scoped("tenant-1").tasks.list(limit=1000)
    active = [t for t in listed.items if t.updated_at >= low and t.created_at < high]
    assert 0 < len(active) < len(listed.items)
    expected = [
        str(len({t.owner for t in active if t.owner is not None})), str(len(active)),
        str(sum(t.seq for t in active)),
        str(sum(t.usage.tokens_in + t.usage.tokens_out for t in active)),
        f"{sum(t.usage.cost for t in active):.4f}",
    ]  # fmt: skip
    assert cells == expected
    everything = await client.get("/", headers=bearer(ADMIN_TOKEN))
    assert everything.text != page.text  # the period changes the figures


async def test_the_tree_shows_each_nodes_title_state_times_and_tokens(
    client: httpx.AsyncClient, store: Store, ids: dict[str, str]
) -> None:
    tenant, fork = ids["fork_tenant"], ids["fork"]
    page = (await client.get(f"/t/{tenant}/tree/{fork}", headers=bearer(ADMIN_TOKEN))).text
    view = store.scoped(tenant)
    root = await view.dialogs.root(fork)
    for task_id in (root, fork):
        record = await view.tasks.get(task_id)
        tokens = record.usage.tokens_in + record.usage.tokens_out
        assert record.title and f">{record.title}</a>" in page, task_id
        assert f"{task_id} · {record.state}" in page
        assert f"updated {record.updated_at.strftime('%Y-%m-%d %H:%M')}" in page
        assert f"{tokens:,} tokens" in page


async def test_the_charts_filter_by_model_and_owner(
    client: httpx.AsyncClient, store: Store
) -> None:
    analytics = store.scoped("tenant-0").analytics
    model, owner = "openai/gpt-4o", "tenant-0-user-2"
    for query, by in ((f"model={model}", {"model": model}), (f"owner={owner}", {"owner": owner})):
        text = (await client.get(f"/t/tenant-0/charts/tokens.csv?period=week&{query}",
                                 headers=bearer(ADMIN_TOKEN))).text  # fmt: skip
        table = list(csv.reader(io.StringIO(text)))[1:]
        rows = await analytics.usage(group_by=("period", "model"), period="week", **by)
        assert table, query
        assert table == [[r.period, r.model, str(r.tokens_in), str(r.tokens_out), str(r.messages)]
                         for r in rows], query  # fmt: skip
    page = await client.get(f"/t/tenant-0/charts?model={model}", headers=bearer(ADMIN_TOKEN))
    assert f'value="{model}"' in page.text
    assert "tokens.csv?model=openai%2Fgpt-4o" in page.text


async def test_the_task_header_names_its_id_owner_model_and_times(store: Store) -> None:
    tasks = store.scoped("acme").tasks
    record = await tasks.create(owner="ann", title="the header", metadata={"ticket": "T-42"})
    await tasks.add_message(record.id, UserMessage(content=[TextPart(text="hello")]))
    from mindstore.model.messages import AssistantMessage

    await tasks.add_message(record.id, AssistantMessage(
        status="completed", model_id="openai/gpt-4o", content=[TextPart(text="hi")]))  # fmt: skip
    record = await tasks.get(record.id)
    async with await client_for(store) as client:
        page = (await client.get(f"/t/acme/tasks/{record.id}", headers=bearer(ADMIN_TOKEN))).text
    header = re.search(r'<p class="meta" id="task-header">(.*?)</p>', page, re.S)
    assert header is not None
    for shown in (f"id {record.id}", "owner ann", "model openai/gpt-4o",
                  f"created {record.created_at:%Y-%m-%d %H:%M:%S}",
                  f"updated {record.updated_at:%Y-%m-%d %H:%M:%S}"):  # fmt: skip
        assert shown in header.group(1), shown
    assert "T-42" in page  # its metadata
