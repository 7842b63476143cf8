"""Moving conversations out of mindstore (docs/import-export.md).

`export_lines(view, fmt, owner=..., task_ids=...)` yields one JSON object per conversation
in a chosen format (`ExportFormat`: jsonl, mind-map, openai-chat, openai-responses,
anthropic, gemini); `export_subject(store, tenant, owner, folder)` writes everything the
store holds about one owner into a folder with a manifest. Pure: `lines` (a conversation
as a line). I/O: `reader` (the conversations a view holds), `subject`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from mindstore.errors import ValidationError
from mindstore.exports.lines import ExportFormat, conversation_line
from mindstore.exports.reader import conversations, messages_of
from mindstore.exports.subject import SubjectExport, export_subject
from mindstore.store import TenantStore

__all__ = ["ExportFormat", "SubjectExport", "conversation_line", "export_lines", "export_subject"]


async def export_lines(
    view: TenantStore,
    fmt: ExportFormat | str = ExportFormat.jsonl,
    *,
    owner: str | None = None,
    task_ids: Sequence[str] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Each conversation of `view` (one owner's, or the named tasks) as an export line,
    oldest first, read a page of tasks and a window of messages at a time.

    Raises:
        ValidationError: An unknown format (named), a bad owner or task id.
        NotFound: A named task the view does not hold.
        KeyShredded: The tenant's keys were destroyed.
    """
    try:
        chosen = ExportFormat(fmt)
    except ValueError:
        choices = ", ".join(f.value for f in ExportFormat)
        raise ValidationError(f"format: {str(fmt)[:40]!r} is not one of {choices}") from None
    async for record in conversations(view, owner=owner, task_ids=task_ids):
        yield conversation_line(record, await messages_of(view, record), chosen)
