"""The console's pages over a tenant's tasks: the tenants, a tenant's task list, a task's
conversation (and its live feed, as JSON), a dialog tree. Each reads through the tenant's
read-only view (`tenant_view`).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Final
from urllib.parse import parse_qs, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mindstore.console import conversation
from mindstore.console.access import Operator
from mindstore.console.error_pages import sealed_message, sealed_status
from mindstore.console.figures import warm
from mindstore.console.handling import (
    console_of,
    message_index,
    path_id,
    query_param,
    signed_in,
    tenant_view,
    time_bounds,
)
from mindstore.console.readonly import TaskFilters
from mindstore.console.rendering import page
from mindstore.errors import KeyringRequired, KeyShredded, NotFound, ValidationError
from mindstore.protocols import TaskRecord

PAGE_MESSAGES: Final = 100
"""Messages a task page shows: the last ones first, older ones a link away."""
PAGE_TASKS: Final = 50
TASKS_COUNTED: Final = 10_000
"""Where the task list's total stops counting ("10,000 or more"): one bounded count."""
TASK_ORDERS: Final = ("newest", "oldest")
FEED_MS: Final = 2000
"""How often (milliseconds) an open task page polls for new messages."""
FEED_MAX: Final = 200
"""The most messages one live-feed poll returns (a client far behind reloads instead)."""
TREE_DETAILS: Final = 200
"""Nodes of a dialog tree shown with their task's title, state, times and tokens (one
header read each); further nodes show their id and counts."""


@signed_in
async def tenants(request: Request) -> Response:
    """The tenants this operator may see: each one's tasks, owners, messages, tokens and
    cost, from the task headers alone (tasks active in the period, with `since`/`until`).
    Opening it starts computing each tenant's charts in the background."""
    console = console_of(request)
    who: Operator = request.state.operator
    since, until = time_bounds(request)
    names = who.visible(await console.store.tenants() if who.tenants is None else ())
    summaries = []
    for name in names:
        try:
            view = console.store.tenant(name)
        except ValidationError:
            continue
        summaries.append(await console.store.totals(name, since, until))
        warm(console, view)
    return page(request, "tenants.html", tenants=summaries,
                since=query_param(request, "since") or "",
                until=query_param(request, "until") or "")  # fmt: skip


def _text(request: Request, name: str) -> str | None:
    """A free-text `?{name}=` as sent: bytes that are not UTF-8 (a lone surrogate's) are a
    `ValidationError` naming the field, where the parsed query would have replaced them."""
    raw = request.scope.get("query_string", b"").decode("latin-1")
    sent = parse_qs(raw, encoding="utf-8", errors="surrogateescape").get(name)
    value = sent[-1].strip() if sent else ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{name}: not valid UTF-8 text") from None
    return value or None


def _ordering(request: Request) -> bool:
    """`?order=`: newest first (the default) or `oldest` first."""
    order = query_param(request, "order") or "newest"
    if order not in TASK_ORDERS:
        raise ValidationError(f"order: expected one of {', '.join(TASK_ORDERS)}")
    return order == "oldest"


@signed_in
async def tasks(request: Request) -> Response:
    """A tenant's tasks, newest (or oldest) first, filtered by owner prefix, state, title
    and last update (`since`, `until`), one keyset page at a time either way, with their
    total (counted up to `TASKS_COUNTED`)."""
    view = tenant_view(request)
    owner, title = _text(request, "owner"), _text(request, "title")
    state = query_param(request, "state")
    cursor, back = query_param(request, "cursor"), query_param(request, "back")
    if cursor and back:
        raise ValidationError("back: give cursor or back, not both")
    oldest = _ordering(request)
    since, until = time_bounds(request)
    filters = TaskFilters(
        state=state,
        owner_prefix=owner,
        title=title,
        updated_after=None if since is None else datetime.fromtimestamp(since, UTC),
        updated_before=None if until is None else datetime.fromtimestamp(until, UTC),
    )
    if back:  # the tasks before this page, read the other way round, nearest first
        listed = await view.list_tasks(
            filters, cursor=back, limit=PAGE_TASKS, oldest_first=not oldest
        )
        items = listed.items[::-1]
        earlier = listed.next_cursor
        later = listed.previous_cursor
        if earlier is None:  # back at the start: the first page, whole
            back = None
    if not back:
        listed = await view.list_tasks(
            filters, cursor=cursor, limit=PAGE_TASKS, oldest_first=oldest
        )
        items = listed.items
        earlier = listed.previous_cursor if cursor else None
        later = listed.next_cursor
    total = await view.count_tasks(filters, at_most=TASKS_COUNTED)
    forked = await view.forked([t.id for t in items])
    kept = {name: value for name in ("owner", "state", "title", "since", "until", "order")
            if (value := query_param(request, name))}  # fmt: skip
    return page(
        request,
        "tasks.html",
        tenant=view.tenant,
        tasks=items,
        forked=forked,
        total=total,
        total_capped=total >= TASKS_COUNTED,
        owner=owner or "",
        state=state or "",
        title=title or "",
        since=query_param(request, "since") or "",
        until=query_param(request, "until") or "",
        oldest=oldest,
        following=urlencode({**kept, "cursor": later}) if later else None,
        preceding=urlencode({**kept, "back": earlier}) if earlier else None,
    )


@signed_in
async def task(request: Request) -> Response:
    """A task's conversation: its last messages (or those before `?before=N`), by role."""
    view = tenant_view(request)
    task_id = path_id(request, "task_id")
    size = console_of(request).page_messages
    record = await view.get_task(task_id)
    before = message_index(request, "before")
    # the record's count fixes the indices: messages [start, stop) of an append-only array
    # (a range read touches only the pages it overlaps; newer messages come by the feed)
    count = record.seq
    stop = count if before is None else min(before, count)
    start = max(0, stop - size)
    messages = await view.read_range(task_id, start, stop) if stop > start else []
    shown = conversation.rows(messages, start)
    # the model of the newest answer shown (the header keeps no model of its own)
    models = (getattr(m, "model_id", None) for m in reversed(messages))
    model = next((m for m in models if isinstance(m, str) and m), None)
    return page(
        request,
        "task.html",
        tenant=view.tenant,
        task=record,
        rows=shown,
        count=count,
        start=start,
        older=start if start > 0 else None,
        first_page=min(size, count),
        model=model,
        live=before is None,
        feed_ms=console_of(request).feed_ms,
    )


@signed_in
async def feed(request: Request) -> Response:
    """The messages after index `?after=N`, as JSON, for the live feed's script."""
    view = tenant_view(request)
    task_id = path_id(request, "task_id")
    after = message_index(request, "after", "0") or 0
    try:
        count = (await view.get_task(task_id)).seq
    except (KeyShredded, KeyringRequired) as error:
        # the script expects JSON, and says so on the page (a page open before a shred)
        return JSONResponse({"error": sealed_message(error)}, status_code=sealed_status(error))
    if count < after or count - after > FEED_MAX:
        return JSONResponse({"count": count, "reload": True, "rows": []})
    messages = await view.read_range(task_id, after, count) if count > after else []
    rows = [row.to_json() for row in conversation.rows(messages, after)]
    return JSONResponse({"count": count, "reload": False, "rows": rows})


@signed_in
async def tree(request: Request) -> Response:
    """The dialog tree a task belongs to, from its root, each node linking to its task."""
    view = tenant_view(request)
    task_id = path_id(request, "task_id")
    top = await view.tree(task_id)
    records: dict[str, TaskRecord] = {}
    waiting = [top] if top else []
    while waiting and len(records) < TREE_DETAILS:  # breadth first: the root's side first
        node = waiting.pop(0)
        with contextlib.suppress(NotFound):  # a node whose task went since the tree was read
            records[node["dialog_id"]] = await view.get_task(node["dialog_id"])
        waiting += node.get("children") or []
    return page(request, "tree.html", tenant=view.tenant, top=top, current=task_id,
                records=records)  # fmt: skip
