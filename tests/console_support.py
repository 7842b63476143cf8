"""What the console's tests share: stored XSS payloads, a conversation that holds every kind
of row, operators, and a console served on a real socket from its own thread (for the
browser tests: the store lives on that thread's event loop)."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import uvicorn

import mindstore
from mindstore.console import app, operator
from mindstore.crypto import Keyring
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.parts import (
    ImagePart,
    MediaRef,
    ReasoningPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
)
from mindstore.store import Store, TenantStore
from mindstore.workload import WorkloadSpec, generate, load

T = TypeVar("T")
TEST_URI = os.environ.get("MINDSTORE_TEST_URI") or None
"""The suite's server, as in tests/conftest.py (embedded without it)."""

ADMIN_TOKEN = "admin-token-0123456789"
T0_TOKEN = "tenant0-token-0123456789"
T1_TOKEN = "tenant1-token-0123456789"
OPERATORS = [
    operator("admin", ADMIN_TOKEN, "*"),
    operator("ops-t0", T0_TOKEN, ["tenant-0"]),
    operator("ops-t1", T1_TOKEN, ["tenant-1"]),
]
SPEC = WorkloadSpec(tenants=2, owners_per_tenant=3, tasks=8, mean_messages=14, fork_every=4)
"""A small demo workload: two tenants, forks, sub-tasks, tool errors."""

XSS_PAYLOADS = [
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=2">',
    '<svg onload="window.__xss=3">',
    "<svg><script>window.__xss=4</script></svg>",
    '<a href="javascript:window.__xss=5">click</a>',
    "[click me](javascript:window.__xss=6)",
    "![pic](javascript:window.__xss=7)",
    '"><script>window.__xss=8</script>',
    "'><img src=x onerror=window.__xss=9>",
    "</textarea><script>window.__xss=10</script>",
    "</title><script>window.__xss=11</script>",
    '<iframe src="javascript:window.__xss=12"></iframe>',
    '<body onload="window.__xss=13">',
    '<details open ontoggle="window.__xss=14">',
    "<math><mtext><table><mglyph><style><img src=x onerror=window.__xss=15>",
    "<scr<script>ipt>window.__xss=16</script>",
    "\\u003cscript\\u003ewindow.__xss=17\\u003c/script\\u003e",
    "\uff1cscript\uff1ewindow.__xss=18\uff1c/script\uff1e",
    '<a href="jav&#x09;ascript:window.__xss=19">x</a>',
    '<object data="javascript:window.__xss=20"></object>',
    '<embed src="data:text/html,<script>parent.__xss=21</script>">',
    "<style>@import 'javascript:window.__xss=22';</style>",
    '<input autofocus onfocus="window.__xss=23">',
    '<video><source onerror="window.__xss=24"></video>',
    '<base href="javascript:window.__xss=25//">',
    '<meta http-equiv="refresh" content="0;url=javascript:window.__xss=26">',
    "{{7*7}}{% raw %}<script>window.__xss=27</script>",
    "\u202e<script>window.__xss=28</script>\u200b",
    '<div style="background:url(javascript:window.__xss=29)">x</div>',
    '<form action="javascript:window.__xss=30"><button>go</button></form>',
]
"""Thirty stored payloads: script tags, event handlers, `javascript:` URLs, SVG, markdown
links, template syntax and Unicode tricks. Each would set `window.__xss` if it ran."""
SVG_SCRIPT = base64.b64encode(
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__xss=99"><script>'
    b"window.__xss=98</script></svg>"
).decode()
PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


async def xss_task(tasks: Any) -> str:
    """A task whose every stored text field carries the payloads: title, owner, texts,
    reasoning, tool names, arguments and results, error, image alt text, an SVG image with
    script, a `javascript:` media URL and a real PNG."""
    record = await tasks.create(
        owner="<b>owner</b><script>window.__xss=31</script>",
        title=XSS_PAYLOADS[0] + XSS_PAYLOADS[1],
        config=TaskConfigPart(model_name="<img src=x onerror=window.__xss=32>"),
    )
    tid = record.id
    for number, payload in enumerate(XSS_PAYLOADS):
        await tasks.add_message(tid, UserMessage(content=[TextPart(text=payload)]))
        if number % 5 == 0:
            call = ToolCallPart(tool_call_id=f"c{number}", tool_name=payload[:60],
                                args={"q": payload})  # fmt: skip
            await tasks.add_message(tid, AssistantMessage(
                status="completed", model_id=payload[:40],
                content=[ReasoningPart(reasoning=payload), TextPart(text=payload), call],
                error_message=payload,
            ))  # fmt: skip
            await tasks.answer_tool_call(tid, f"c{number}", {"html": payload}, is_error=True,
                                         error_message=payload)  # fmt: skip
    await tasks.add_message(tid, UserMessage(content=[
        ImagePart(image=SVG_SCRIPT, mime_type="image/svg+xml", alt_text=XSS_PAYLOADS[2]),
        ImagePart(media=MediaRef(kind="url", url="javascript:window.__xss=97")),
        ImagePart(image=PNG, mime_type="image/png", alt_text='" onerror="window.__xss=96'),
    ]))  # fmt: skip
    return tid


async def demo(store: Store) -> dict[str, str]:
    """The small demo workload, a task with every payload in tenant-0, and a task of
    tenant-1's; returns their ids (`xss`, `other`), a fork (`fork`, of `fork_tenant`) and a task
    of tenant-0 with a sub-task entered and exited (`nested`)."""
    workload = generate(SPEC)
    fork, fork_tenant = next((n["_id"].split("/")[-1], n["tenant"]) for n in workload.nodes
                             if n.get("parent_id"))  # fmt: skip
    entered_and_exited = {"taskentry", "taskexit"}
    nested = next(t["_id"].split("/")[-1] for t in workload.tasks if t["tenant"] == "tenant-0"
                  and entered_and_exited <= {m.get("role") for m in t["messages"]})  # fmt: skip
    await load(store, workload)
    xss = await xss_task(store.scoped("tenant-0").tasks)
    other = await store.scoped("tenant-1").tasks.create(owner="bob", title="tenant one secret")
    await store.scoped("tenant-1").tasks.add_human_message(other.id, "only tenant-1 sees this")
    return {
        "xss": xss,
        "other": other.id,
        "fork": fork,
        "fork_tenant": fork_tenant,
        "nested": nested,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ServedConsole:
    """The console on 127.0.0.1:<port>, served by uvicorn on a thread of its own, over a
    store of its own (the suite's backend) that `setup` fills on that thread's loop (so
    the store and the server share one event loop, as under `mindstore console`); with
    `keyring`, the store encrypts its tenants."""

    def __init__(
        self,
        setup: Callable[[Store], Awaitable[dict[str, str]]],
        keyring: Keyring | None = None,
        **options: Any,
    ):
        self._setup = setup
        self._keyring = keyring
        self._options = options
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ids: dict[str, str] = {}
        self.database = f"mindstore_test_console_{uuid.uuid4().hex[:12]}"
        self.store: Store | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._server: uvicorn.Server | None = None
        self._thread = threading.Thread(target=self._run, name="console", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        try:
            self.store = await mindstore.connect(
                TEST_URI or "embedded", database=self.database, keyring=self._keyring
            )
            self.ids = await self._setup(self.store)
            served = app(self.store, OPERATORS, **self._options)
            config = uvicorn.Config(served, host="127.0.0.1", port=self.port,
                                    log_level="warning", lifespan="off")  # fmt: skip
            self._server = uvicorn.Server(config)
            serving = asyncio.ensure_future(self._server.serve())
            while not self._server.started and not serving.done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # uvicorn offers no event to wait on
        except BaseException as error:  # reported to the test thread
            self._failed = error
            self._ready.set()
            return
        self._ready.set()
        await serving
        if TEST_URI:
            await self.store.backend.client.drop_database(self.database)
        await self.store.close()

    def __enter__(self) -> ServedConsole:
        self._thread.start()
        self._ready.wait(120)
        if self._failed is not None:
            raise self._failed
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(30)

    def call(self, work: Callable[[Store], Coroutine[Any, Any, T]]) -> T:
        """Run `work(store)` on the server's loop (to write while a page is open)."""
        assert self.store is not None
        return asyncio.run_coroutine_threadsafe(work(self.store), self._loop).result(60)


def scoped(store: Store, tenant: str) -> TenantStore:
    return store.scoped(tenant)
