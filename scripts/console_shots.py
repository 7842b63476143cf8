"""Screenshots of the console's pages for docs/console.md (run by scripts/console-shots).

The console is served by uvicorn on the same event loop as an embedded store holding the
demo workload; Playwright's async API drives Debian's Chromium through the pages as an
operator who sees every tenant, and saves one 1200x800 PNG per page.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import uvicorn
from playwright.async_api import async_playwright

import mindstore
from mindstore.collection_names import DIALOG_NODES
from mindstore.console import app, operator
from mindstore.workload import WorkloadSpec, generate, load

TOKEN = "screenshots-token-0123456789"
CHROMIUM = os.environ.get("MINDSTORE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    store = await mindstore.connect("embedded")
    await load(store, generate(WorkloadSpec(tenants=3, owners_per_tenant=4, tasks=60)))
    fork = await store.database[DIALOG_NODES].find_one({"parent_id": {"$ne": None}})
    tenant = fork["tenant"]
    listed = await store.scoped(tenant).tasks.list(limit=200)
    nested = next(r for r in listed.items if r.level == 0 and r.seq > 30)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    asgi = app(store, [operator("operator", TOKEN, "*")])
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))  # fmt: skip
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    base = f"http://127.0.0.1:{port}"
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = await browser.new_page(viewport={"width": 1200, "height": 800})
            await page.goto(f"{base}/login")
            await page.screenshot(path=out / "login.png")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_url(f"{base}/")
            shots = {
                "tenants": "/",
                "tasks": f"/t/{tenant}/",
                "task": f"/t/{tenant}/tasks/{nested.id}",
                "tree": f"/t/{tenant}/tree/{fork['_id'].split('/')[-1]}",
                "charts": f"/t/{tenant}/charts?period=week",
                "search": f"/t/{tenant}/search?q=hotel+ticket",
            }
            for name, path in shots.items():
                await page.goto(f"{base}{path}")
                if name == "task":  # the last messages, where the page opens them
                    await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
                await page.screenshot(path=out / f"{name}.png")
                print(f"{out / name}.png", file=sys.stderr)
            await browser.close()
    finally:
        server.should_exit = True
        await serving
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/console")))
