"""The MCP server's tools: each a name, a description, its arguments' model and one
coroutine over `ConversationReads`.

`TOOLS` is the registry the server lists and calls; adding a tool is one `ToolSpec` here
(and, when it needs a read the others do not, one method of `ConversationReads`). A tool
returns a JSON object (the result's structured content, and its text); what a refused
call becomes is `mindstore.mcp.serving`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Generic, Protocol, TypeVar

from mindstore.mcp.arguments import (
    ArgumentError,
    Arguments,
    ListArguments,
    MemoryArguments,
    ReadArguments,
    SearchArguments,
    parse,
    schema,
)
from mindstore.mcp.reads import ConversationReads
from mindstore.model.messages import AnyMessage
from mindstore.protocols import TaskRecord
from mindstore.search.stopwords import is_stop_word
from mindstore.search.text import searchable
from mindstore.search.tokenize import terms

JSONObject = dict[str, object]
MAX_PAGE_CHARS: Final = 256 * 1024
"""A page of messages stops before the message that would take its text past this many
characters (it holds at least one message), so one call's answer stays bounded."""

A = TypeVar("A", bound=Arguments)


class Tool(Protocol):
    """What the server needs of a tool: its listing and a call on raw arguments."""

    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def blamed(self) -> str: ...
    def input_schema(self) -> JSONObject: ...
    async def call(self, reads: ConversationReads, arguments: object) -> JSONObject: ...


@dataclass(frozen=True)
class ToolSpec(Generic[A]):
    """A tool: its arguments are checked (`mindstore.mcp.arguments`) before `run` reads.
    `blamed` is the argument an error of the store names when its message does not start
    with one (a `NotFound` of `read_conversation` is its `task_id`)."""

    name: str
    title: str
    description: str
    arguments: type[A]
    run: Callable[[ConversationReads, A], Awaitable[JSONObject]]
    blamed: str

    def input_schema(self) -> JSONObject:
        return dict(schema(self.arguments))

    async def call(self, reads: ConversationReads, arguments: object) -> JSONObject:
        return await self.run(reads, parse(self.arguments, arguments))


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


async def search_conversations(reads: ConversationReads, args: SearchArguments) -> JSONObject:
    page = await reads.search(
        args.query, mode=args.mode, match=args.match, owner=args.owner, roles=args.roles,
        since=args.since, until=args.until, limit=args.limit, cursor=args.cursor,
    )  # fmt: skip
    hits: list[JSONObject] = [
        {
            "task_id": hit.task_id,
            "message_id": hit.message_id,
            "index": hit.index,
            "role": hit.role,
            "owner": hit.owner,
            "time": _time(hit.time),
            "score": round(hit.score, 6),
            "snippet": hit.snippet.text,
        }
        for hit in page.hits
    ]
    return {"hits": hits, "total": page.total, "next_cursor": page.next_cursor}


WINDOW: Final = re.compile(r"([0-9]{1,10}):([0-9]{1,10})")
"""A `read_conversation` cursor: the next message's index and the window's end."""


def _window(args: ReadArguments, total: int) -> tuple[int, int]:
    """The messages `[start, stop)` this call pages through."""
    if args.cursor is not None:
        found = WINDOW.fullmatch(args.cursor)
        if found is None or int(found[1]) > int(found[2]):
            raise ArgumentError("cursor", "not a cursor this tool returned")
        return int(found[1]), int(found[2])
    if args.last is not None:
        if args.start is not None or args.stop is not None:
            raise ArgumentError("last", "give last, or start and stop, not both")
        return max(0, total - args.last), total
    start = args.start or 0
    stop = total if args.stop is None else min(args.stop, total)
    if args.stop is not None and start > args.stop:
        raise ArgumentError("start", f"after stop ({args.stop})")
    return min(start, stop), stop


def _message(index: int, message: AnyMessage) -> JSONObject:
    text = searchable(message)
    row: JSONObject = {
        "index": index,
        "message_id": message.id,
        "role": message.role,
        "time": _time(datetime.fromtimestamp(message.started_ts, UTC)),
        "text": text.text,
    }
    if text.tools:
        row["tools"] = list(text.tools)
    if text.cut:
        row["cut"] = True
    return row


async def read_conversation(reads: ConversationReads, args: ReadArguments) -> JSONObject:
    record = await reads.task(args.task_id)
    start, stop = _window(args, record.seq)
    end = min(start + args.limit, stop)
    messages = await reads.read_range(args.task_id, start, end) if end > start else []
    rows: list[JSONObject] = []
    chars = 0
    for offset, message in enumerate(messages):
        row = _message(start + offset, message)
        size = len(str(row["text"]))
        if rows and chars + size > MAX_PAGE_CHARS:
            break
        rows.append(row)
        chars += size
    following = start + len(rows)
    return {
        **_conversation(record),
        "messages": rows,
        "next_cursor": f"{following}:{stop}" if rows and following < stop else None,
    }


def _conversation(record: TaskRecord) -> JSONObject:
    return {
        "task_id": record.id,
        "owner": record.owner,
        "title": record.title,
        "state": record.state,
        "messages_total": record.seq,
        "created": _time(record.created_at),
        "updated": _time(record.updated_at),
    }


async def list_conversations(reads: ConversationReads, args: ListArguments) -> JSONObject:
    page = await reads.list_tasks(
        owner=args.owner, since=args.since, until=args.until, oldest_first=args.oldest_first,
        limit=args.limit, cursor=args.cursor,
    )  # fmt: skip
    return {
        "conversations": [_conversation(record) for record in page.items],
        "next_cursor": page.next_cursor,
    }


async def search_memories(reads: ConversationReads, args: MemoryArguments) -> JSONObject:
    words = [w for w in terms(args.query or "") if not is_stop_word(w)] or terms(args.query or "")
    found = await reads.memories(args.namespace, words, limit=args.limit, offset=args.offset)
    return {
        "memories": [
            {
                "namespace": list(item.namespace),
                "key": item.key,
                "value": item.value,
                "created": _time(item.created_at),
                "updated": _time(item.updated_at),
            }
            for item in found
        ]
    }


TOOLS: Final[Sequence[Tool]] = (
    ToolSpec(
        name="search_conversations",
        title="Search conversations",
        description=(
            "Find messages in this tenant's conversations, best first: each hit with its "
            "conversation (task_id), message id and index, role, owner, time, score and a "
            "snippet. Pass next_cursor back as cursor for the next page."
        ),
        arguments=SearchArguments,
        run=search_conversations,
        blamed="query",
    ),
    ToolSpec(
        name="read_conversation",
        title="Read a conversation",
        description=(
            "Read a conversation's messages by index: the last N (last), or a range (start, "
            "stop), a page at a time (limit; pass next_cursor back as cursor). Each message "
            "with its index, id, role, time and text (reasoning and media left out)."
        ),
        arguments=ReadArguments,
        run=read_conversation,
        blamed="task_id",
    ),
    ToolSpec(
        name="list_conversations",
        title="List conversations",
        description=(
            "List this tenant's conversations, most recently updated first (or oldest first), "
            "by owner and time: id, owner, title, state, message count, created and updated."
        ),
        arguments=ListArguments,
        run=list_conversations,
        blamed="cursor",
    ),
    ToolSpec(
        name="search_memories",
        title="Search memories",
        description=(
            "Search the long-term memories agents keep in a LangGraph-store namespace (and "
            "the namespaces under it): with a query, those whose value holds any of its "
            "words, most words first; without one, newest first. Each with its namespace, "
            "key, value and times."
        ),
        arguments=MemoryArguments,
        run=search_memories,
        blamed="namespace",
    ),
)
"""The server's tools, in the order `tools/list` shows them."""
