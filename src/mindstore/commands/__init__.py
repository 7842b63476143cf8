"""CLI command groups; each module exposes `register(app)`."""

from __future__ import annotations

from types import ModuleType

from mindstore.commands import backup, demo_data, stats, tasks

COMMAND_MODULES: list[ModuleType] = [tasks, stats, demo_data, backup]
