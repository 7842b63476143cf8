"""The console's task page on a long conversation, beside the API's `tail`.

For tasks of 1,000 and 100,000 messages (a realistic mix of every common role,
`workload_small.mixed_message_dicts`, stored with one bulk `create`, which writes the
sealed pages first), on the embedded backend with the default page size:

1. `tail(task, 100)`: the API read of the last 100 messages (the console's page size);
2. the console's task page in-process (an ASGI request: the header read, a range read of
   the last 100 messages, the rows, the template): time and the bytes it received from the
   database;
3. in a browser, when Playwright and Debian's Chromium (/usr/bin/chromium) are there: the
   console served by uvicorn, the time from `page.goto` until the last message's element is
   in the page (`#m<last>`), i.e. until the operator sees the last messages. The goal of the
   operator-console issue is under 1 s at 100,000 messages.

Each figure is the median of `repeats` runs (after one warm-up). `--quick`: 1,000 and
10,000 messages.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import sys
import time
from typing import Any

import httpx

import mindstore
from mindstore.console import app, operator
from mindstore.model.messages import parse_messages
from mindstore.workload_small import mixed_message_dicts

TOKEN = "bench-console-token-0123"
CHROMIUM = os.environ.get("MINDSTORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


async def _browser_ms(asgi: Any, paths: dict[int, tuple[str, int]], repeats: int) -> dict[str, Any]:
    """Time to the last message on screen, per size, in Chromium (None when unavailable)."""
    try:
        import uvicorn
        from playwright.async_api import async_playwright
    except ImportError as error:
        return {"skipped": f"needs {error.name}"}
    if not os.path.exists(CHROMIUM):
        return {"skipped": f"no browser at {CHROMIUM}"}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))  # fmt: skip
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    found: dict[str, Any] = {}
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = await browser.new_context(
                viewport={"width": 1200, "height": 800},
                extra_http_headers={"Authorization": f"Bearer {TOKEN}"},
            )
            page = await context.new_page()
            for size, (path, last) in paths.items():
                samples = []
                for attempt in range(repeats + 1):
                    start = time.perf_counter()
                    await page.goto(f"http://127.0.0.1:{port}{path}", wait_until="commit")
                    await page.wait_for_selector(f"#m{last}", state="attached")
                    if attempt:
                        samples.append(time.perf_counter() - start)
                found[str(size)] = {"last_message_visible_ms": _median_ms(samples)}
            await browser.close()
    finally:
        server.should_exit = True
        await serving
    return found


async def run(results: dict[str, Any], *, sizes: tuple[int, ...] = (1_000, 100_000),
              repeats: int = 7) -> None:  # fmt: skip
    store = await mindstore.connect("embedded")
    try:
        acme = store.scoped("bench")
        asgi = app(store, [operator("bench", TOKEN, "*")])
        transport = httpx.ASGITransport(app=asgi)  # type: ignore[arg-type]
        paths: dict[int, tuple[str, int]] = {}
        by_size: dict[str, Any] = {}
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
            for size in sizes:
                start = time.perf_counter()
                messages = parse_messages(mixed_message_dicts(size, seed=size))
                for message in messages:
                    message.id = f"{message.id}-{size}"
                    message.task_id = ""
                record = await acme.tasks.create(owner="agent", messages=messages, replay=True)
                built = round(time.perf_counter() - start, 1)
                path = f"/t/bench/tasks/{record.id}"
                paths[size] = (path, record.seq - 1)
                tail, page, received = [], [], 0
                for attempt in range(repeats + 1):
                    began = time.perf_counter()
                    await acme.tasks.tail(record.id, 100)
                    took = time.perf_counter() - began
                    with store.backend.recorder.capture() as log:
                        began = time.perf_counter()
                        response = await client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
                        shown = time.perf_counter() - began
                    assert response.status_code == 200 and f'id="m{record.seq - 1}"' in response.text
                    received = log.bytes_received
                    if attempt:
                        tail.append(took)
                        page.append(shown)
                by_size[str(size)] = {
                    "build_seconds": built,
                    "api_tail_100_ms": _median_ms(tail),
                    "console_page_ms": _median_ms(page),
                    "console_page_bytes_received": received,
                    "page_html_bytes": len(response.content),
                }
                print(f"  console {size}: {by_size[str(size)]}", file=sys.stderr, flush=True)
        browser = await _browser_ms(asgi, paths, repeats)
        for size, figures in browser.items():
            if size in by_size:
                by_size[size].update(figures)
        results["console"] = {
            "backend": store.kind,
            "page_policy": str(store.page_policy),
            "sizes": by_size,
            "browser": browser if "skipped" in browser else "measured",
            "goal": "the last messages of a 100,000-message task visible in under 1 s",
        }
    finally:
        await store.close()
