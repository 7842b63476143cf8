"""What mindstore shows of itself: lazy imports, logging, the recorder's footprint, pymongo
event listeners, an existing client, `--version`."""

from __future__ import annotations

import subprocess
import sys


EMBEDDED_MODULES = "[m for m in sys.modules if 'mongomock' in m or 'motor' in m]"


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# --------------------------------------------------------------------------- lazy imports


def test_importing_mindstore_loads_no_embedded_backend() -> None:
    """A user of a real server never loads mongomock, mongomock-motor or motor: not by
    importing the package or its CLI, not by connecting to (or failing to reach) a server;
    opening the embedded backend does load them (so the check is not vacuous)."""
    code = f"""
import asyncio, sys
import mindstore, mindstore.backends, mindstore.cli
print(sorted({EMBEDDED_MODULES}))
try:
    asyncio.run(mindstore.connect("mongodb://127.0.0.1:1/db?serverSelectionTimeoutMS=50"))
except mindstore.ConfigurationError:
    pass
print(sorted({EMBEDDED_MODULES}))
asyncio.run(mindstore.connect("embedded"))
print("mongomock" in sys.modules and "mongomock_motor" in sys.modules)
"""
    imported, after_server, after_embedded = _python(code).splitlines()
    assert imported == "[]"
    assert after_server == "[]"
    assert after_embedded == "True"


def test_embedded_names_stay_importable_from_both_places() -> None:
    import mindstore.backends as backends
    import mindstore.backends.embedded as embedded

    for name in embedded.__all__:
        if name in backends.__all__:
            assert getattr(backends, name) is getattr(embedded, name)
    assert backends.load_snapshot.__module__ == "mindstore.backends.snapshot"
