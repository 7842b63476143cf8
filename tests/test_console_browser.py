"""The console in a real browser: Debian's Chromium driven by Playwright (mindstore.console).

Every page loads against the demo workload with no console error and every response carries
the Content-Security-Policy; thirty stored XSS payloads leave `window` untouched and the DOM
without a script, handler or `javascript:` link they injected; the live feed shows a new
message without a reload; a tenant's credential reaches nothing of another tenant; the
search page, from the box to a hit's message, loads with no console error and leaves the
stored payloads inert in its hits.

One browser and one served console per module. The browser must be there: a missing
/usr/bin/chromium fails these tests (`.ci/run` installs it), it never skips them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, sync_playwright

from console_support import (
    ADMIN_TOKEN,
    T0_TOKEN,
    XSS_PAYLOADS,
    ServedConsole,
    demo,
)
from mindstore.console.security import CSP
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.store import Store

CHROMIUM = os.environ.get("MINDSTORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
NO_INJECTED_MARKUP = """() => {
    const handlers = [];
    for (const el of document.querySelectorAll("*")) {
        for (const a of el.attributes) {
            if (a.name.startsWith("on")) handlers.push(el.tagName + " " + a.name);
        }
    }
    return {
        xss: window.__xss === undefined ? null : String(window.__xss),
        scripts: Array.from(document.scripts).map(s => s.src),
        handlers: handlers,
        javascript: Array.from(document.querySelectorAll("[href],[src],[action],[data]"))
            .map(e => e.getAttribute("href") || e.getAttribute("src") || e.getAttribute("action")
                      || e.getAttribute("data") || "")
            .filter(v => /^\\s*(javascript|vbscript|data:text)/i.test(v)),
        embedded: document.querySelectorAll(
            "iframe,object,embed,base,meta[http-equiv],svg script,main style"
        ).length,
        images: Array.from(document.images).map(i => i.getAttribute("src").slice(0, 22)),
    };
}"""


@pytest.fixture(scope="module")
def served() -> Iterator[ServedConsole]:
    with ServedConsole(demo, feed_ms=250) as console:
        yield console


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"no browser at {CHROMIUM}: apt-get install chromium (.ci/run does), "
                    "or set MINDSTORE_CHROMIUM")  # fmt: skip
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Session:
    """A browser context logged in as one operator, recording console errors, uncaught
    exceptions, dialogs and every response's Content-Security-Policy."""

    def __init__(self, browser: Browser, served: ServedConsole, token: str | None) -> None:
        self.served = served
        self.context: BrowserContext = browser.new_context(viewport={"width": 1200, "height": 800})
        self.page: Page = self.context.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.responses: list[tuple[str, int, str | None]] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        self.page.on("dialog", self._dialog)
        self.page.on("response", lambda r: self.responses.append(
            (r.url, r.status, r.headers.get("content-security-policy"))))  # fmt: skip
        if token is not None:
            self.page.goto(f"{served.url}/login")
            self.page.fill("#token", token)
            self.page.click("button[type=submit]")
            self.page.wait_for_url(f"{served.url}/")

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, path: str) -> int:
        response = self.page.goto(f"{self.served.url}{path}")
        assert response is not None
        return response.status

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def admin(browser: Browser, served: ServedConsole) -> Iterator[Session]:
    session = Session(browser, served, ADMIN_TOKEN)
    yield session
    session.close()


def test_every_page_loads_with_no_console_error_and_every_response_has_the_policy(
    admin: Session, served: ServedConsole
) -> None:
    ids = served.ids
    page = admin.page
    assert admin.open("/") == 200
    assert page.locator("#tenants tbody tr").count() == 2
    assert admin.open("/t/tenant-0/") == 200
    assert page.locator("#tasks tbody tr").count() >= 4
    page.select_option("select[name=state]", "completed")
    page.click("form.filters button")
    page.wait_for_url(re.compile(r".*state=completed"))
    states = page.locator("#tasks tbody td:nth-child(4)").all_inner_texts()
    assert states and set(states) == {"completed"}
    assert admin.open(f"/t/tenant-0/tasks/{ids['nested']}") == 200
    assert page.locator(".message.depth-1").count() >= 1
    assert page.locator(".block.entry").count() >= 1 and page.locator(".block.exit").count() >= 1
    assert page.locator(".block.tool-call .block.tool-result").count() >= 1
    assert admin.open(f"/t/{ids['fork_tenant']}/tree/{ids['fork']}") == 200
    nodes = page.locator(".tree a.node")
    assert nodes.count() >= 2 and page.locator(".tree a.current").count() == 1
    nodes.first.click()
    page.wait_for_url(re.compile(rf".*/t/{ids['fork_tenant']}/tasks/"))
    assert admin.open("/t/tenant-0/charts?period=week") == 200
    assert page.locator("section.chart").count() == 5
    assert page.locator("svg polyline").count() >= 2 and page.locator("svg rect").count() >= 3
    page.locator("#chart-tools summary").click()
    assert page.locator("#chart-tools table tbody tr").first.is_visible()
    with page.expect_download() as download:
        page.click("#chart-tokens a.csv")
    saved = Path(download.value.path()).read_text(encoding="utf-8")
    assert saved.startswith("period,model,tokens_in")
    assert not admin.errors, admin.errors
    assert admin.responses
    assert all(csp == CSP for _, _, csp in admin.responses), admin.responses


def test_thirty_stored_xss_payloads_do_nothing(admin: Session, served: ServedConsole) -> None:
    ids = served.ids
    for path in (f"/t/tenant-0/tasks/{ids['xss']}", "/t/tenant-0/",
                 f"/t/tenant-0/tree/{ids['xss']}", "/t/tenant-0/charts"):  # fmt: skip
        assert admin.open(path) == 200
        admin.page.wait_for_timeout(150)  # an onerror or onload would have fired by now
        found = admin.page.evaluate(NO_INJECTED_MARKUP)
        assert found["xss"] is None, (path, found)
        assert found["handlers"] == [] and found["javascript"] == [], (path, found)
        assert found["embedded"] == 0, (path, found)
        assert all(src.endswith("/static/feed.js") for src in found["scripts"]), found
        assert all(i.startswith("data:image/png") for i in found["images"]), found
    admin.open(f"/t/tenant-0/tasks/{ids['xss']}")
    shown = admin.page.inner_text("#conversation")
    for payload in XSS_PAYLOADS:  # shown as the text it is
        assert payload.strip("\u202e\u200b") in shown, payload
    assert admin.page.locator("img").count() == 1  # the PNG; the SVG with script is text
    assert admin.page.title().startswith(XSS_PAYLOADS[0])
    assert not admin.dialogs and not admin.errors, (admin.dialogs, admin.errors)


def test_the_search_box_leads_to_highlighted_hits_and_a_hit_to_its_message(
    admin: Session, served: ServedConsole
) -> None:
    page = admin.page
    assert admin.open("/t/tenant-0/charts") == 200
    page.fill("form.search-box input[name=q]", "replacement")
    page.click("form.search-box button")
    page.wait_for_url(re.compile(r".*/t/tenant-0/search\?q=replacement$"))
    first = page.locator("#hits li.hit").count()
    assert first == 20 and page.locator("#hits mark").count() >= first
    assert {m.lower() for m in page.locator("#hits mark").all_inner_texts()} == {"replacement"}
    page.click("a.next")
    page.wait_for_url(re.compile(r".*cursor="))
    assert page.locator("#hits li.hit").count() >= 1
    link = page.locator("#hits a.hit-link").first
    anchor = (link.get_attribute("href") or "").split("#")[1]
    link.click()
    page.wait_for_url(re.compile(rf".*/t/tenant-0/tasks/.*#{anchor}$"))
    assert page.locator(f"#{anchor}").is_visible()
    assert "replacement" in page.inner_text(f"#{anchor}").lower()
    assert not admin.errors, admin.errors
    # a refused query: its message on the page; the browser logs only the status
    assert admin.open("/t/tenant-0/search?q=%22a+b%22+-%22c+d%22") == 400
    assert "negated phrase" in page.inner_text("#search-error")
    assert admin.errors == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]
    assert all(csp == CSP for _, _, csp in admin.responses), admin.responses


def test_thirty_stored_xss_payloads_stay_inert_in_search_hits(
    admin: Session, served: ServedConsole
) -> None:
    shown = []
    path: str | None = "/t/tenant-0/search?q=xss"
    while path is not None:
        assert admin.open(path) == 200
        admin.page.wait_for_timeout(100)  # an onerror or onload would have fired by now
        found = admin.page.evaluate(NO_INJECTED_MARKUP)
        assert found["xss"] is None, (path, found)
        assert found["handlers"] == [] and found["javascript"] == [], (path, found)
        assert found["embedded"] == 0 and found["scripts"] == [], (path, found)
        assert found["images"] == [], (path, found)
        shown.append(admin.page.inner_text("#hits"))
        more = admin.page.locator("a.next")
        path = more.get_attribute("href") if more.count() else None
    assert len(shown) >= 2
    for payload in XSS_PAYLOADS:  # each is a hit, shown as the text it is
        assert payload.strip("\u202e\u200b") in "\n".join(shown), payload
    assert not admin.dialogs and not admin.errors, (admin.dialogs, admin.errors)


def test_the_live_feed_shows_new_messages_without_a_reload(
    admin: Session, served: ServedConsole
) -> None:
    async def create(store: Store) -> str:
        record = await store.scoped("tenant-0").tasks.create(title="live", owner="ann")
        await store.scoped("tenant-0").tasks.add_human_message(record.id, "first")
        return record.id

    task_id = served.call(create)
    assert admin.open(f"/t/tenant-0/tasks/{task_id}") == 200
    admin.page.evaluate("() => { window.__marker = 'same document'; }")

    async def append(store: Store) -> None:
        tasks = store.scoped("tenant-0").tasks
        await tasks.add_human_message(task_id, "a new message arrives")
        await tasks.add_human_message(task_id, XSS_PAYLOADS[1] + XSS_PAYLOADS[0])

    served.call(append)
    admin.page.wait_for_selector("#m2", timeout=10_000)
    assert admin.page.inner_text("#m1 .body") == "a new message arrives"
    assert admin.page.inner_text("#m2 .body") == XSS_PAYLOADS[1] + XSS_PAYLOADS[0]
    assert admin.page.inner_text("#count") == "3"
    assert admin.page.evaluate("() => window.__marker") == "same document"  # no reload
    assert admin.page.evaluate(NO_INJECTED_MARKUP)["xss"] is None
    assert admin.page.evaluate(NO_INJECTED_MARKUP)["handlers"] == []
    assert not admin.errors, admin.errors


def test_a_tenants_credential_reaches_no_page_of_another_tenant(
    browser: Browser, served: ServedConsole
) -> None:
    ids = served.ids
    anonymous = Session(browser, served, None)
    try:
        assert anonymous.open(f"/t/tenant-0/tasks/{ids['xss']}") == 200  # the login form
        assert anonymous.page.url == f"{served.url}/login"
        assert anonymous.page.locator("#token").count() == 1
        cookies = anonymous.context.cookies()
        assert cookies == []
    finally:
        anonymous.close()
    t0 = Session(browser, served, T0_TOKEN)
    try:
        (cookie,) = t0.context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert t0.page.evaluate("() => document.cookie") == ""
        for path in (f"/t/tenant-1/tasks/{ids['other']}", "/t/tenant-1/",
                     f"/t/tenant-0/tasks/{ids['other']}", f"/t/tenant-1/tree/{ids['other']}",
                     "/t/tenant-1/charts", "/t/tenant-1/charts/cost.csv",
                     "/t/tenant-1/search?q=secret",
                     f"/t/tenant-0/../tenant-1/tasks/{ids['other']}",
                     f"/t/tenant-0/tasks/{ids['other']}/feed?after=0"):  # fmt: skip
            status = t0.open(path)
            assert status == 404, (path, status)
            body = t0.page.content()
            assert "only tenant-1" not in body and "tenant one secret" not in body, path
        # the feed's fetch, from the page's own script context, is refused too
        t0.open("/")
        fetched = t0.page.evaluate(
            "async (u) => (await fetch(u)).status", f"/t/tenant-1/tasks/{ids['other']}/feed"
        )
        assert fetched == 404
        assert t0.open("/") == 200
        assert t0.page.locator("#tenants tbody tr").count() == 1
        t0.page.click("form.logout button")
        t0.page.wait_for_url(f"{served.url}/login")
        assert t0.context.cookies() == []
        t0.open("/")
        assert t0.page.url == f"{served.url}/login"
    finally:
        t0.close()


def test_a_live_page_opens_at_its_newest_message(admin: Session, served: ServedConsole) -> None:
    assert admin.open(f"/t/tenant-0/tasks/{served.ids['xss']}") == 200
    last = admin.page.locator("#conversation article").last
    admin.page.wait_for_function("() => window.scrollY > 0", timeout=5000)
    assert last.is_visible() and admin.page.evaluate(
        "() => document.querySelector('#conversation').lastElementChild"
        ".getBoundingClientRect().bottom <= window.innerHeight + 1"
    )
    assert admin.page.locator("a.oldest").count() == 0  # 100 a page: all of it is shown


def test_a_page_open_before_a_shred_says_so(browser: Browser) -> None:
    """The tenant is shredded while its task page is open: the live feed answers JSON
    saying so, the page shows it and stops asking (on main it got HTML it could not read)."""

    async def setup(store: Store) -> dict[str, str]:
        tasks = store.scoped("gone").tasks
        record = await tasks.create(owner="ann", title="to be shredded")
        await tasks.add_human_message(record.id, "soon unreadable")
        return {"task": record.id}

    keyring = Keyring(LocalMasterKey(os.urandom(32)))
    with ServedConsole(setup, keyring=keyring, feed_ms=200) as served:
        session = Session(browser, served, ADMIN_TOKEN)
        try:
            assert session.open(f"/t/gone/tasks/{served.ids['task']}") == 200
            assert "soon unreadable" in session.page.inner_text("#conversation")

            async def shred(store: Store) -> int:
                assert store.keyring is not None
                return await store.keyring.shred("gone")

            assert served.call(shred) >= 1
            notice = session.page.wait_for_selector("#feed-notice", timeout=10_000)
            assert notice is not None and "shredded" in notice.inner_text()
            assert not [e for e in session.errors if "410" not in e], session.errors
        finally:
            session.close()
