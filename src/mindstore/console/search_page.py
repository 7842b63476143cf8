"""The console's search page: the tenant's messages matching a query, best first, grouped
by task, a page at a time, with the API's filters (owner, role, since, until, task) and
its choices (mode, match). docs/console.md ("Pages").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from mindstore.console.handling import query_param, signed_in, tenant_view, time_bounds
from mindstore.console.rendering import page
from mindstore.errors import NotFound, ValidationError
from mindstore.model.messages import MessageRole
from mindstore.search import SearchPage
from mindstore.search.modes import MATCHES, MODES, NoEmbedder, check_match, check_mode

PAGE_HITS: Final = 20
"""Search hits per results page."""
SEARCH_FILTERS: Final = ("owner", "role", "since", "until", "task", "mode", "match")
"""The search page's filters and choices beside the query (the API's `search` takes them),
kept in the next page's link (a cursor is bound to them)."""
SEARCH_ROLES: Final = tuple(sorted(role.value for role in MessageRole))
"""The roles the role filter offers (a search takes no other)."""


@signed_in
async def search(request: Request) -> Response:
    """The tenant's messages matching `?q=`, best first, a page at a time (`?cursor=`).

    A query the search refuses (too long, a control character, nothing to find), a mode
    or match it does not know, a mode the store cannot serve (no embedder) or a cursor of
    another query shows the search's message on the page, with status 400. An encrypted
    tenant without the keyring, or a shredded one, answers as its other pages.
    """
    view = tenant_view(request)
    text = request.query_params.get("q", "")
    filters = {name: query_param(request, name) or "" for name in SEARCH_FILTERS}

    def results(
        status: int = 200,
        error: str | None = None,
        found: SearchPage | None = None,
        titles: dict[str, str | None] | None = None,
    ) -> Response:
        following = None
        if found is not None and found.next_cursor:
            kept = {k: v for k, v in filters.items() if v}
            following = urlencode({"q": text, **kept, "cursor": found.next_cursor})
        hits = found.hits if found else []
        groups: dict[str, list[Any]] = {}
        for hit in hits:  # by task, in the order of each task's best hit
            groups.setdefault(hit.task_id, []).append(hit)
        return page(request, "search.html", status, tenant=view.tenant, q=text, error=error,
                    hits=hits, groups=list(groups.items()), titles=titles or {},
                    filters=filters, roles=SEARCH_ROLES, modes=MODES, matches=MATCHES,
                    total=found.total if found else None, following=following)  # fmt: skip

    if not text.strip():
        return results()
    try:
        since, until = time_bounds(request)
        role = filters["role"]
        if role and role not in SEARCH_ROLES:
            raise ValidationError(f"role: expected one of {', '.join(SEARCH_ROLES)}")
        found = await view.search(
            text,
            limit=PAGE_HITS,
            cursor=query_param(request, "cursor"),
            owner=filters["owner"] or None,
            roles=(role,) if role else None,
            since=None if since is None else datetime.fromtimestamp(since, UTC),
            until=None if until is None else datetime.fromtimestamp(until, UTC),
            task_ids=(filters["task"],) if filters["task"] else None,
            mode=check_mode(filters["mode"] or None),
            match=check_match(filters["match"] or "any"),
        )
    except (ValidationError, NoEmbedder) as error:
        return results(400, str(error))
    titles: dict[str, str | None] = {}
    for task_id in dict.fromkeys(hit.task_id for hit in found.hits):
        try:
            titles[task_id] = (await view.get_task(task_id)).title
        except NotFound:  # deleted since it was indexed
            titles[task_id] = None
    return results(found=found, titles=titles)
