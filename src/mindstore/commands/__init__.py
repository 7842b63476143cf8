"""CLI command groups; each module exposes `register(app)`."""

from __future__ import annotations

from types import ModuleType

from mindstore.commands import (
    backup,
    console,
    demo_data,
    doctor,
    export,
    imports,
    keys,
    lifecycle,
    mcp,
    search,
    stats,
    tasks,
)

COMMAND_MODULES: list[ModuleType] = [
    tasks, lifecycle, stats, demo_data, backup, export, imports, keys, console, search, mcp, doctor,
]  # fmt: skip
