"""The console's search page over HTTP (no browser): the credential and tenant check, paging
by the search's cursor (which cannot carry another tenant's hits), bad queries as a message
on the page, stored markup shown as text with highlights built from the snippet's spans,
encrypted and shredded tenants, and that it writes no conversation (mindstore.console)."""

from __future__ import annotations

import html
import os
import re
from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from console_support import ADMIN_TOKEN, OPERATORS, T0_TOKEN, T1_TOKEN, demo
from mindstore.backends.recorder import observe_all
from mindstore.collection_names import TASKS
from mindstore.console import app
from mindstore.console.hits import Piece, pieces
from mindstore.console.security import CSP
from mindstore.console.web import PAGE_HITS
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.portable import WRITE_COMMANDS
from mindstore.search import Snippet
from mindstore.store import Store

BASE = "http://console.test"
HIT = re.compile(r'class="hit-link" href="/t/([^/]+)/tasks/([^"?/]+)\?before=(\d+)#m(\d+)"')


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def hits_of(page: str) -> list[tuple[str, str, int]]:
    """(tenant, task id, message index) of every hit a results page links to."""
    found = []
    for tenant, task_id, before, anchor in HIT.findall(page):
        assert int(before) == int(anchor) + 1  # the task page that holds the message
        found.append((tenant, task_id, int(anchor)))
    return found


def following(page: str) -> str | None:
    more = re.search(r'class="next" href="([^"]+)"', page)
    return html.unescape(more.group(1)) if more else None


async def client_for(store: Store) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app(store, OPERATORS))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=BASE)


@pytest.fixture
async def ids(store: Store) -> dict[str, str]:
    return await demo(store)


@pytest.fixture
async def client(store: Store, ids: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(store) as opened:
        yield opened


async def every_page(client: httpx.AsyncClient, url: str, token: str) -> list[str]:
    pages = []
    at: str | None = url
    while at is not None:
        response = await client.get(at, headers=bearer(token))
        assert response.status_code == 200, (at, response.text)
        pages.append(response.text)
        at = following(response.text)
    return pages


async def test_the_search_page_needs_a_credential_and_the_tenant(
    client: httpx.AsyncClient,
) -> None:
    url = "/t/tenant-0/search?q=replacement"
    for headers in ({}, bearer("not-a-token-of-anyone"), {"Cookie": "mindstore_console=x"}):
        response = await client.get(url, headers=headers)
        assert response.status_code == 303 and response.headers["location"] == "/login"
        assert "error" not in response.text
    missing = await client.get("/t/no-such-tenant/search?q=replacement", headers=bearer(T0_TOKEN))
    swapped = await client.get("/t/tenant-1/search?q=replacement", headers=bearer(T0_TOKEN))
    assert missing.status_code == swapped.status_code == 404
    assert missing.text == swapped.text
    for target in (url, "/t/tenant-0/search", "/t/tenant-0/search?q=%22open"):
        response = await client.get(target, headers=bearer(ADMIN_TOKEN))
        assert response.headers["content-security-policy"] == CSP, target
        assert response.headers["x-frame-options"] == "DENY", target
    # the box is on every page of a tenant, a GET form to the results page
    for target in ("/t/tenant-0/", "/t/tenant-0/charts", url):
        page = (await client.get(target, headers=bearer(ADMIN_TOKEN))).text
        assert 'class="search-box" method="get" action="/t/tenant-0/search"' in page, target


async def test_hits_page_by_the_cursor_as_the_search_api_returns_them(
    client: httpx.AsyncClient, store: Store
) -> None:
    view = store.scoped("tenant-0")
    expected = []
    cursor = None
    while True:
        found = await view.search("replacement", limit=PAGE_HITS, cursor=cursor)
        # a page groups its hits by task, in the order of each task's best hit
        order = list(dict.fromkeys(h.task_id for h in found.hits))
        ranked = sorted(found.hits, key=lambda h: order.index(h.task_id))
        expected += [("tenant-0", h.task_id, h.index) for h in ranked]
        if found.next_cursor is None:
            break
        cursor = found.next_cursor
    assert len(expected) > PAGE_HITS  # more than one page
    pages = await every_page(client, "/t/tenant-0/search?q=replacement", ADMIN_TOKEN)
    assert len(pages) == -(-len(expected) // PAGE_HITS)
    assert [hit for page in pages for hit in hits_of(page)] == expected
    assert f"{len(expected)} messages match." in pages[0]
    # a hit's link opens the task page that holds its message, under its anchor
    _, task_id, index = expected[-1]
    link = f"/t/tenant-0/tasks/{task_id}?before={index + 1}"
    task_page = (await client.get(link, headers=bearer(ADMIN_TOKEN))).text
    assert f'id="m{index}"' in task_page
    empty = (await client.get("/t/tenant-0/search?q=", headers=bearer(ADMIN_TOKEN))).text
    assert 'name="q"' in empty and 'id="hits"' not in empty
    none = (await client.get("/t/tenant-0/search?q=zyzzyva", headers=bearer(ADMIN_TOKEN))).text
    assert "0 messages match." in none and "No message matches." in none


async def test_a_tenants_credential_finds_nothing_of_another_tenant(
    client: httpx.AsyncClient, store: Store, ids: dict[str, str]
) -> None:
    # tenant-1's words, searched from tenant-0: nothing of tenant-1 comes back
    for query in ("only", "tenant", "secret", "sees"):
        page = await client.get(f"/t/tenant-0/search?q={query}", headers=bearer(T0_TOKEN))
        assert page.status_code == 200
        assert "only tenant-1" not in page.text and ids["other"] not in page.text
    # a cursor of tenant-1's search, used on tenant-0's page: refused (a cursor is bound
    # to its tenant), nothing of either tenant shown; on tenant-1's page: 404
    query = "charge+replacement"  # either word (match="any"): more than a page of tenant-1's
    first = (await client.get(f"/t/tenant-1/search?q={query}", headers=bearer(T1_TOKEN))).text
    theirs = following(first)
    assert theirs is not None and hits_of(first)
    cursor = theirs.split("cursor=")[1]
    swapped = await client.get(f"/t/tenant-0/search?q={query}&cursor={cursor}",
                               headers=bearer(T0_TOKEN))  # fmt: skip
    assert swapped.status_code == 400 and "cursor: from another" in swapped.text
    assert hits_of(swapped.text) == []
    refused = await client.get(f"/t/tenant-1/search?q={query}&cursor={cursor}",
                               headers=bearer(T0_TOKEN))  # fmt: skip
    assert refused.status_code == 404 and "tenant-1" not in hits_of(refused.text)


@pytest.mark.parametrize(
    ("query", "cursor", "named"),
    [
        ("role:robot error", None, "query: role:robot is not a role"),
        ('-"two words" error', None, "query: a negated phrase is not supported"),
        ("x" * 1025, None, "query: at most 1024 characters"),
        ("find\x00this", None, "control character (U+0000)"),
        ("-only", None, "query: nothing to find"),
        ("replacement", "not-a-cursor", "cursor"),
        (
            "error",
            "eyJ2IjoxLCJmIjoiQUFBQUFBQUFBQUFBQUFBQUFBQUFBQSIsIngiOlsyLG51bGxdLCJuIjozLCJs"
            "Ijo5LCJkIjpbM10sInMiOjEuNSwidCI6MC4wLCJpIjoidGVuYW50LTAvdC8wIn0",
            "cursor: from another query",
        ),
    ],
)
async def test_a_bad_query_is_a_message_on_the_page_and_changes_nothing(
    client: httpx.AsyncClient, store: Store, query: str, cursor: str | None, named: str
) -> None:
    before = await store.database[TASKS].find({}).sort("_id", 1).to_list(None)
    params = {"q": query} | ({"cursor": cursor} if cursor else {})
    response = await client.get("/t/tenant-0/search", params=params, headers=bearer(T0_TOKEN))
    assert response.status_code == 400
    problem = re.search(r'<p class="problem" id="search-error">([^<]*)</p>', response.text)
    assert problem is not None and named in html.unescape(problem.group(1)), response.text
    assert 'name="q" type="search"' in response.text  # the box, to correct the query
    assert 'id="hits"' not in response.text
    assert await store.database[TASKS].find({}).sort("_id", 1).to_list(None) == before


async def test_an_unbalanced_quote_runs_to_the_end_as_the_search_reads_it(
    client: httpx.AsyncClient,
) -> None:
    """The query language reads an unclosed quote as a phrase to the end of the query (the
    API and the CLI too): the page shows that phrase's hits, not an error."""
    open_quote = await client.get("/t/tenant-0/search", params={"q": '"window.__xss=1'},
                                  headers=bearer(ADMIN_TOKEN))  # fmt: skip
    closed = await client.get("/t/tenant-0/search", params={"q": '"window.__xss=1"'},
                              headers=bearer(ADMIN_TOKEN))  # fmt: skip
    assert open_quote.status_code == closed.status_code == 200
    assert hits_of(open_quote.text) == hits_of(closed.text) != []


async def test_stored_markup_in_hits_is_text_and_only_query_words_are_marked(
    client: httpx.AsyncClient, store: Store
) -> None:
    tasks = store.scoped("tenant-0").tasks
    record = await tasks.create(title="markup")
    await tasks.add_human_message(record.id, "<mark>fake</mark> quokka <b>bold</b> & done")
    pages = await every_page(client, "/t/tenant-0/search?q=script", ADMIN_TOKEN)
    body = "".join(pages)
    assert hits_of(body)
    assert "<script>" not in body.split("</header>", 1)[1]  # no stored tag survives
    assert "&lt;<mark>script</mark>&gt;window.__xss=1&lt;/<mark>script</mark>&gt;" in body
    marked = re.findall(r"<mark>(.*?)</mark>", body)
    assert marked and {m.lower() for m in marked} == {"script"}
    page = (await client.get("/t/tenant-0/search?q=quokka", headers=bearer(ADMIN_TOKEN))).text
    snippet = re.search(r'<p class="snippet">(.*?)</p>', page, re.S)
    assert snippet is not None
    assert snippet.group(1) == (
        "&lt;mark&gt;fake&lt;/mark&gt; <mark>quokka</mark> &lt;b&gt;bold&lt;/b&gt; &amp; done"
    )


async def test_encrypted_and_shredded_tenants_answer_as_their_other_pages(
    store_factory: Any,
) -> None:
    opened: Store = await store_factory(keyring=Keyring(LocalMasterKey(os.urandom(32))))
    for tenant in ("vault", "gone"):
        tasks = opened.scoped(tenant).tasks
        record = await tasks.create(title=f"{tenant} title", owner="ann")
        await tasks.add_human_message(record.id, f"{tenant} secret words")
    assert await opened.keyring.shred("gone") >= 1  # type: ignore[union-attr]
    async with await client_for(opened) as client:
        page = await client.get("/t/vault/search?q=secret", headers=bearer(ADMIN_TOKEN))
        assert page.status_code == 200 and "vault <mark>secret</mark> words" in page.text
        gone = await client.get("/t/gone/search?q=secret", headers=bearer(ADMIN_TOKEN))
        other = await client.get("/t/gone/", headers=bearer(ADMIN_TOKEN))
        assert gone.status_code == other.status_code == 200
        assert "was shredded" in gone.text and gone.text == other.text
    async with await client_for(Store(opened.backend)) as blind:
        page = await blind.get("/t/vault/search?q=secret", headers=bearer(ADMIN_TOKEN))
        listing = await blind.get("/t/vault/", headers=bearer(ADMIN_TOKEN))
        assert page.status_code == listing.status_code == 200
        assert "without its keyring" in page.text and page.text == listing.text
        assert "secret words" not in page.text


async def test_searching_writes_no_conversation(client: httpx.AsyncClient) -> None:
    with observe_all() as log:
        for url in ("/t/tenant-0/search?q=replacement", "/t/tenant-0/search?q=%22bad",
                    "/t/tenant-1/search?q=secret"):  # fmt: skip
            await client.get(url, headers=bearer(ADMIN_TOKEN))
    writes = {c.collection for c in log if c.name.lower() in WRITE_COMMANDS}
    assert log and all(str(name).startswith("search_") for name in writes), writes


# ------------------------------------------------------------------------------ pieces
@given(
    text=st.text(max_size=40),
    spans=st.lists(st.tuples(st.integers(-5, 50), st.integers(-5, 50)), max_size=6),
)
@example(text="00", spans=[(1, 2), (2, 0), (0, 1)])  # an empty span between two out of order
def test_pieces_keep_the_text_and_mark_only_the_spans(
    text: str, spans: list[tuple[int, int]]
) -> None:
    cut = pieces(Snippet(text, tuple(spans)))
    assert "".join(p.text for p in cut) == text
    assert all(p.text for p in cut)
    covered: set[int] = set()
    for start, end in spans:
        covered |= set(range(max(start, 0), min(end, len(text))))
    marked: set[int] = set()
    at = 0
    for piece in cut:
        if piece.marked:
            marked |= set(range(at, at + len(piece.text)))
        at += len(piece.text)
    assert marked <= covered
    real = [(start, end) for start, end in spans if start < end]  # an empty span is none
    ordered = all(a[1] <= b[0] for a, b in pairwise(real))
    if ordered:  # as snippets make them: every highlighted character marked
        assert marked == covered


def test_pieces_of_ordered_spans() -> None:
    snippet = Snippet("<b>a</b> word and word", ((9, 13), (18, 22)))
    assert pieces(snippet) == (
        Piece("<b>a</b> ", False), Piece("word", True), Piece(" and ", False),
        Piece("word", True),
    )  # fmt: skip
    assert pieces(Snippet("", ())) == ()


async def test_hits_show_their_tasks_title_and_the_filters_narrow_them(
    client: httpx.AsyncClient, store: Store
) -> None:
    view = store.scoped("tenant-0")
    found = await view.search("replacement", limit=PAGE_HITS)
    task_id = found.hits[0].task_id
    title = (await view.tasks.get(task_id)).title
    page = (await client.get("/t/tenant-0/search?q=replacement", headers=bearer(ADMIN_TOKEN))).text
    assert title and f">{title}</a>" in page
    for query, expected in [
        (f"task={task_id}", await view.search("replacement", limit=PAGE_HITS, task_ids=[task_id])),
        ("role=tool", await view.search("replacement", limit=PAGE_HITS, roles=["tool"])),
        ("owner=tenant-0-user-1",
         await view.search("replacement", limit=PAGE_HITS, owner="tenant-0-user-1")),
    ]:  # fmt: skip
        narrowed = await client.get(f"/t/tenant-0/search?q=replacement&{query}",
                                    headers=bearer(ADMIN_TOKEN))  # fmt: skip
        assert f"{expected.total} message" in narrowed.text, query
        assert expected.total < found.total, query
    robot = "/t/tenant-0/search?q=replacement&role=robot"
    refused = await client.get(robot, headers=bearer(ADMIN_TOKEN))
    assert refused.status_code == 400 and "role: expected" in refused.text
