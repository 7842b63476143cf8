"""The store's description, as `mindstore doctor` prints it: where the data lives, where
recall by meaning ranks (the capability check of `Store.vector_path`, decided once per
store), whether the embedder answers with what it promises, and whether a keyring is
given. An operator asks this before trusting a deployment; a bug report quotes it.

Read-only: two commands to a server (`hello`, `buildInfo`), the vector path's check, and
one embedding of a fixed probe text when an embedder is given. Nothing is written.
"""

from __future__ import annotations

import importlib.metadata
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mindstore.errors import MindstoreError
from mindstore.search.embedder import embed_all
from mindstore.search.vector_server import ON_SERVER

if TYPE_CHECKING:
    from mindstore.store import Store

__all__ = ["NO_EMBEDDER", "PROBE", "Finding", "Status", "diagnose"]

Status = Literal["ok", "note", "fail"]
"""``ok``: works as configured; ``note``: works, with a limit worth knowing; ``fail``:
does not work (the doctor exits 1)."""

PROBE = "mindstore doctor: is this embedder answering?"
"""The one text the embedder is asked to embed (as a query)."""
NO_EMBEDDER = "none: lexical search only (give one with --embedder)"


@dataclass(frozen=True)
class Finding:
    """One check's outcome: what was checked, how it went, and in words what was seen."""

    check: str
    status: Status
    detail: str


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


async def _backend(store: Store) -> Finding:
    if store.backend.is_embedded:
        return Finding(
            "backend", "note",
            "embedded (in this process): data lasts as long as the process, or a --data "
            "snapshot; not for production",
        )  # fmt: skip
    try:
        hello = await store.database.command("hello")
        build = await store.database.command("buildInfo")
    except Exception as error:  # a refused command: say so, the other checks go on
        return Finding("backend", "fail", f"the server did not answer: {type(error).__name__}")
    topology = (
        "sharded (mongos)" if hello.get("msg") == "isdbgrid"
        else f"replica set {hello['setName']!r}" if hello.get("setName")
        else "standalone (no transactions, no change streams)"
    )  # fmt: skip
    status: Status = "note" if topology.startswith("standalone") else "ok"
    return Finding("backend", status, f"MongoDB {build.get('version', '?')}, {topology}")


async def _vectors(store: Store) -> Finding:
    path = await store.vector_path()
    return Finding("vector search", "ok" if path.path == ON_SERVER else "note",
                   f"{path.path}: {path.reason}")  # fmt: skip


async def _embedder(store: Store) -> Finding:
    embedder = store.embedder
    if embedder is None:
        return Finding("embedder", "note", NO_EMBEDDER)
    try:
        await embed_all(embedder, [PROBE], purpose="query")
    except MindstoreError as error:
        return Finding("embedder", "fail", f"{embedder.model}: {error}")
    except Exception as error:  # a provider's own error (network, key, quota): reported
        return Finding("embedder", "fail", f"{embedder.model}: {type(error).__name__}: {error}")
    answered = f"{embedder.model}, {embedder.dimensions} dimensions: answered the probe"
    return Finding("embedder", "ok", answered)


def _keyring(store: Store) -> Finding:
    if store.keyring is None:
        unsealed = "none: content is stored in the open; a sealed tenant cannot be read"
        return Finding("keyring", "note", unsealed)
    return Finding("keyring", "ok", "given: sealed tenants can be read (docs/encryption.md)")


async def diagnose(store: Store) -> list[Finding]:
    """Every check, in the order the doctor prints them."""
    versions = ", ".join(f"{name} {_version(name)}" for name in ("mindstore", "pymongo", "beanie"))
    return [
        Finding("versions", "ok", f"{versions}, Python {platform.python_version()}"),
        await _backend(store),
        await _vectors(store),
        await _embedder(store),
        _keyring(store),
    ]
