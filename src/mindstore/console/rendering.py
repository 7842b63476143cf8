"""The console's pages rendered from its templates (`templates/`): the Jinja environment
(autoescaped, strict, every value a template writes shown with visible escapes) and
`page`, the one way a route answers with HTML.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from mindstore.console import conversation
from mindstore.console.handling import console_of, path_segment, root_of
from mindstore.console.hits import pieces
from mindstore.inert_text import visible
from mindstore.model.header import TaskState


def _shown(value: object) -> object:
    """Every value a template writes: stored text with its control and bidi characters as
    visible escapes (`\\u202e`), as the CLI shows them, so no line reads otherwise than it
    holds; markup the templates made themselves as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


def environment() -> Environment:
    pages = Environment(
        loader=PackageLoader("mindstore.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        finalize=_shown,
    )
    pages.filters["q"] = path_segment
    pages.filters["as_text"] = conversation.as_text  # JSON-like values as readable text
    pages.filters["pieces"] = pieces  # a snippet cut at its highlights, each piece escaped
    pages.globals["STATES"] = [state.value for state in TaskState]
    return pages


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A rendered template (autoescaped: stored content is only ever text)."""
    body = (
        console_of(request)
        .pages.get_template(template)
        .render(who=getattr(request.state, "operator", None), root=root_of(request), **context)
    )
    return HTMLResponse(body, status_code=status)
