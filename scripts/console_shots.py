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

sys.path.insert(0, str(Path(__file__).parent))
import console_conversations as conversations  # beside this script

TOKEN = "screenshots-token-0123456789"
CHROMIUM = os.environ.get("MINDSTORE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    store = await mindstore.connect("embedded")
    await load(store, generate(WorkloadSpec(tenants=3, owners_per_tenant=4, tasks=60)))
    # the workload gives the charts months of numbers; the conversations shown are written
    # like real ones, on top of it (the newest, so first in the tasks list)
    fork_node = await store.database[DIALOG_NODES].find_one({"parent_id": {"$ne": None}})
    tenant = fork_node["tenant"]
    written = await conversations.write(store.scoped(tenant))
    shown = written[conversations.CONVERSATIONS[0]["title"]]
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
                "task": f"/t/{tenant}/tasks/{shown}",
                "tree": f"/t/{tenant}/tree/{written['fork']}",
                "charts": f"/t/{tenant}/charts?period=week",
                "search": f"/t/{tenant}/search?q=churn",
            }
            for name, path in shots.items():
                await page.goto(f"{base}{path}")
                if name == "charts":  # the first figures are computed in the background
                    await page.wait_for_selector("#chart-tokens", timeout=120_000)
                await page.screenshot(path=out / f"{name}.png")
                print(f"{out / name}.png", file=sys.stderr)
            await browser.close()
    finally:
        server.should_exit = True
        await serving
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/console")))
