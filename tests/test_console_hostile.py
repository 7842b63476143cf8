"""The console's unhappy paths (mindstore.console): every bad request is a 4xx page naming
the field, a store's typed error is its own page, a login body is refused before it is
read, and the figures and links that were wrong: the tenants page counts every task and
owner, the live feed of a shredded tenant answers JSON, an operators file with one token
twice stops before serving, and ids `.` and `..` open from their links."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from console_support import ADMIN_TOKEN, OPERATORS
from mindstore.analytics.service import Analytics
from mindstore.cli import app as cli
from mindstore.console import app
from mindstore.console.access import LoginThrottle, Sessions
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.errors import Unavailable
from mindstore.store import Store
from mindstore.workload import WorkloadSpec, generate, load

BASE = "http://console.test"
BAD_BOUNDS = ["since=0001-01-01T00:00:00%2B14:00", "until=9999-12-31T23:59:59-14:00"]
NOT_ASCII_DIGITS = ["²", "①", "٣"]


def bearer(token: str = ADMIN_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client_for(store: Store) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app(store, OPERATORS))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=BASE)


async def _task(store: Store, tenant: str = "acme", owner: str | None = "ann") -> str:
    tasks = store.scoped(tenant).tasks
    record = await tasks.create(owner=owner, title=f"{tenant} task")
    await tasks.add_human_message(record.id, "hello")
    return record.id


async def test_a_time_out_of_range_is_a_400_naming_the_field(store: Store) -> None:
    await _task(store)
    async with client_for(store) as client:
        for path in ("/", "/t/acme/", "/t/acme/charts", "/t/acme/charts/tokens.csv"):
            for query in BAD_BOUNDS[:1] if path == "/t/acme/" else BAD_BOUNDS:
                response = await client.get(f"{path}?{query}", headers=bearer())
                field = query.split("=")[0]
                assert response.status_code == 400, (path, query)
                assert f"{field} is out of range" in response.text, (path, query)


async def test_an_index_of_unicode_digits_is_a_400_naming_the_field(store: Store) -> None:
    task_id = await _task(store)
    async with client_for(store) as client:
        for digits in NOT_ASCII_DIGITS:
            page = await client.get(f"/t/acme/tasks/{task_id}?before={digits}", headers=bearer())
            assert page.status_code == 400 and "before: expected" in page.text
            assert '<nav class="crumbs">' in page.text  # the tenant's navigation stays
            feed = await client.get(f"/t/acme/tasks/{task_id}/feed?after={digits}",
                                    headers=bearer())  # fmt: skip
            assert feed.status_code == 400 and "after: expected" in feed.text


async def test_a_login_form_of_too_many_fields_is_a_400(store: Store) -> None:
    async with client_for(store) as client:
        response = await client.post(
            "/login", content="a=1&b=2&c=3&d=4&e=5&token=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
    assert response.status_code == 400 and "more than 4 fields" in response.text


async def test_a_large_login_body_is_refused_before_it_is_read(store: Store) -> None:
    """A 64 MiB body announced by its length is refused before a byte of it is read; one
    with no length (chunked) is read no further than the cap."""
    served = app(store, OPERATORS)

    async def post(headers: list[tuple[bytes, bytes]]) -> tuple[int, int]:
        sent: list[dict[str, object]] = []
        pulled = 0

        async def receive() -> dict[str, object]:
            nonlocal pulled
            pulled += 1
            return {"type": "http.request", "body": b"x" * 65536, "more_body": pulled < 1024}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/login", "raw_path": b"/login",
                 "root_path": "", "query_string": b"", "http_version": "1.1", "scheme": "http",
                 "server": ("console.test", 80), "client": ("127.0.0.1", 5000),
                 "headers": [(b"host", b"console.test"), *headers]}  # fmt: skip
        await served(scope, receive, send)  # type: ignore[arg-type]
        return int(sent[0]["status"]), pulled  # type: ignore[call-overload]

    form = (b"content-type", b"application/x-www-form-urlencoded")
    assert await post([form, (b"content-length", str(64 << 20).encode())]) == (413, 0)
    status, pulled = await post([form])
    assert status == 413 and pulled == 1  # the first 64 KiB chunk is past the 4 KiB cap


async def test_a_vault_problem_is_the_typed_errors_page(store: Store, tmp_path: Path) -> None:
    master = LocalMasterKey(os.urandom(32))
    vault = tmp_path / "vault"
    opened = Store(store.backend, keyring=Keyring(LocalKeyVault(vault, master)))
    task_id = await _task(opened, "sealed")
    vault.chmod(0o755)
    reopened = Store(store.backend, keyring=Keyring(LocalKeyVault(vault, master)))
    async with client_for(reopened) as client:
        for path in ("/t/sealed/search?q=hello", f"/t/sealed/tasks/{task_id}"):
            response = await client.get(path, headers=bearer())
            assert response.status_code == 500, path
            assert "VaultError" in response.text and "chmod 700" in response.text, path
            assert response.headers["content-type"].startswith("text/html")


async def test_the_tenants_page_counts_every_task_and_owner(store: Store) -> None:
    """Tasks with no model usage are tasks too: three owners, five tasks, one with usage."""
    for owner in ("ann", "bob", "cy", "cy", None):
        await _task(store, "acme", owner)
    async with client_for(store) as client:
        page = await client.get("/", headers=bearer())
    row = re.search(r'<a href="/t/acme/">acme</a></td>\s*<td>(\d+)</td><td>(\d+)</td>', page.text)
    assert row is not None, page.text
    assert (int(row.group(1)), int(row.group(2))) == (3, 5)


async def test_the_feed_of_a_shredded_tenant_answers_json(store_factory: object) -> None:
    keyring = Keyring(LocalMasterKey(os.urandom(32)))
    opened: Store = await store_factory(keyring=keyring)  # type: ignore[operator]
    task_id = await _task(opened, "gone")
    assert await opened.keyring.shred("gone") >= 1  # type: ignore[union-attr]
    async with client_for(opened) as client:
        feed = await client.get(f"/t/gone/tasks/{task_id}/feed?after=0", headers=bearer())
        assert feed.status_code == 410 and feed.headers["content-type"] == "application/json"
        assert "shredded" in feed.json()["error"]
    async with client_for(Store(opened.backend)) as blind:
        feed = await blind.get(f"/t/gone/tasks/{task_id}/feed?after=0", headers=bearer())
        assert feed.status_code in (410, 503)
        assert feed.headers["content-type"] == "application/json"


@pytest.mark.parametrize("dots", [".", ".."])
async def test_ids_made_of_dots_open_from_their_links(store: Store, dots: str) -> None:
    """`.` and `..` are valid tenant and task ids; a browser resolves them away in a path
    (even as `%2E`), so their links write them `~.` and `~..`."""
    tasks = store.scoped(dots).tasks
    record = await tasks.create(task_id=dots, owner="ann", title="dotted")
    await tasks.add_human_message(record.id, "dotted words")
    async with client_for(store) as client:
        landing = await client.get("/", headers=bearer())
        link = re.search(r'href="(/t/[^"/]+/)"', landing.text)
        assert link is not None and link.group(1) == f"/t/~{dots}/"
        listing = await client.get(link.group(1), headers=bearer())
        task = re.search(r'href="(/t/[^"/]+/tasks/[^"/]+)"', listing.text)
        assert task is not None and task.group(1) == f"/t/~{dots}/tasks/~{dots}"
        page = await client.get(str(httpx.URL(BASE + task.group(1)).path), headers=bearer())
        assert page.status_code == 200 and "dotted words" in page.text


def test_two_operators_with_one_token_stop_before_serving(tmp_path: Path) -> None:
    ops = tmp_path / "ops.json"
    token = "the-same-token-0123456789"
    ops.write_text(json.dumps([{"name": "a", "token": token, "tenants": "*"},
                               {"name": "b", "token": token, "tenants": ["x"]}]))  # fmt: skip
    result = CliRunner().invoke(cli, ["console", "--operators", str(ops), "--port", "1"])
    assert result.exit_code == 40, result.output
    assert "same token" in result.output and "http://" not in result.output


async def test_a_cold_chart_does_not_hold_the_other_pages(store: Store) -> None:
    """The first charts of a tenant read every message; other requests are served between
    its batches (real concurrent requests on one loop): the tasks page asked after the
    CSV answers before it. Until the figures are there, the charts page says so at once."""
    await load(store, generate(WorkloadSpec(tenants=1, tasks=60, mean_messages=8)))
    served = app(store, OPERATORS, charts_wait=0)
    transport = httpx.ASGITransport(app=served)  # type: ignore[arg-type]
    answered: list[str] = []
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:

        async def fetch(name: str, url: str, after: int) -> httpx.Response:
            for _ in range(after):
                await asyncio.sleep(0)  # the CSV starts first
            response = await client.get(url, headers=bearer())
            answered.append(name)
            return response

        csv, tasks, pending = await asyncio.gather(
            fetch("csv", "/t/tenant-0/charts/tokens.csv", 0),
            fetch("tasks", "/t/tenant-0/", 3),
            fetch("charts", "/t/tenant-0/charts", 3),
        )
        assert answered[-1] == "csv", answered
        assert csv.status_code == tasks.status_code == pending.status_code == 200
        assert "being computed" in pending.text and 'id="chart-tokens"' not in pending.text
        ready = await client.get("/t/tenant-0/charts", headers=bearer())
        assert 'id="chart-tokens"' in ready.text and "being computed" not in ready.text


# ------------------------------------------------------------------------------ hardening
def test_sessions_expire_when_idle_and_at_their_age() -> None:
    now = [0.0]
    sessions = Sessions(idle=60, max_age=300, clock=lambda: now[0])
    who = OPERATORS[0]
    idle, busy = sessions.open(who), sessions.open(who)
    for moment in (50, 100, 150, 200, 250, 299):
        now[0] = moment
        assert sessions.get(busy) is who  # used every 50 s: alive until its age
    assert sessions.get(idle) is None  # unused for 60 s
    now[0] = 301
    assert sessions.get(busy) is None and sessions.get(busy) is None


def test_failed_logins_are_throttled_per_client() -> None:
    now = [0.0]
    throttle = LoginThrottle(attempts=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.wait("10.0.0.1") == 0
        throttle.failed("10.0.0.1")
    assert throttle.wait("10.0.0.1") == 60 and throttle.wait("10.0.0.2") == 0
    now[0] = 60
    assert throttle.wait("10.0.0.1") == 0


async def test_the_login_form_answers_429_after_ten_failures(store: Store) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    async with client_for(store) as client:
        statuses = [(await client.post("/login", content="token=wrong-token-0123456789",
                                       headers=form)).status_code for _ in range(11)]  # fmt: skip
        right = await client.post("/login", content=f"token={ADMIN_TOKEN}", headers=form)
    assert statuses == [401] * 10 + [429]
    assert right.status_code == 429 and right.headers["retry-after"]


@pytest.mark.parametrize(
    ("origin", "refused"),
    [("http://console.test", False), ("https://console.test", True),
     ("http://console.test:8080", True), ("http://console.test:80", False),
     ("http://evil.test", True), ("null", True), ("http://console.test.evil.test", True)],
)  # fmt: skip
async def test_the_cross_site_check_compares_scheme_host_and_port(
    store: Store, origin: str, refused: bool
) -> None:
    async with client_for(store) as client:
        response = await client.post("/logout", headers={"Origin": origin})
    assert (response.status_code == 403) is refused


async def test_only_allowed_hosts_are_answered_and_hsts_with_secure_cookies(store: Store) -> None:
    served = app(store, OPERATORS, allowed_hosts=["console.test"], secure_cookies=True)
    transport = httpx.ASGITransport(app=served)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        rebound = await client.get("/login", headers={"Host": "attacker.test"})
        own = await client.get("/")
    assert rebound.status_code == 400 and "attacker.test" not in rebound.text
    assert own.status_code == 303 and own.headers["location"] == "/login"  # no host in it
    assert own.headers["strict-transport-security"] == "max-age=31536000"


async def test_stored_bidi_and_control_characters_show_as_escapes(store: Store) -> None:
    tasks = store.scoped("acme").tasks
    record = await tasks.create(owner="ann", title="invoice \u202egnp.exe")
    await tasks.add_human_message(record.id, "pay \u202e01$ \x1b[31mnow")
    async with client_for(store) as client:
        page = await client.get(f"/t/acme/tasks/{record.id}", headers=bearer())
        feed = await client.get(f"/t/acme/tasks/{record.id}/feed?after=0", headers=bearer())
    assert "\u202e" not in page.text and "\x1b" not in page.text
    assert "invoice \\u202egnp.exe" in page.text and "pay \\u202e01$ \\x1b[31mnow" in page.text
    assert "\\u202e01$" in feed.json()["rows"][0]["blocks"][0]["text"]


def test_a_wildcard_address_needs_its_host_names(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["console", "--host", "0.0.0.0", "--allow-remote"])
    assert result.exit_code == 2 and "--allowed-host" in result.output


async def test_a_failed_first_computation_of_the_charts_is_the_errors_page(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _task(store)

    async def away(self: Analytics, report: str, keys: object) -> list[dict[str, object]]:
        raise Unavailable("analytics.day_groups", "aggregate on tasks", may_have_applied=False)

    monkeypatch.setattr(Analytics, "day_groups", away)
    async with client_for(store) as client:
        page = await client.get("/t/acme/charts", headers=bearer())
        csv = await client.get("/t/acme/charts/tokens.csv", headers=bearer())
    assert page.status_code == csv.status_code == 503
    assert "Unavailable" in page.text and '<nav class="crumbs">' in page.text
