"""The operator console: a read-only web view of the store (`mindstore console`).

`mindstore.console.app(store, operators)` is an ASGI app (Starlette, Jinja2 templates, a
stylesheet and one small script shipped in the wheel) that shows the tenants, a tenant's
tasks, a task's conversation with its live feed, dialog trees, charts and a search of its
conversations. It needs the
`console` extra (``pip install 'mindstore[console]'``). docs/console.md describes it.

Modules: `access` (operators, tokens, sessions; pure), `readonly` (the store view with no
write verb), `conversation` (messages -> rows of text; pure), `charts` (SVG geometry;
pure), `reports` (analytics rows -> charts; pure), `hits`
(search hits -> highlighted pieces; pure), `security` (CSP and headers), `web`
(routes and pages).
"""

from __future__ import annotations

from mindstore.console.access import Credentials, Operator, operator, operators_from_json
from mindstore.console.web import app, new_token

__all__ = ["Credentials", "Operator", "app", "new_token", "operator", "operators_from_json"]
