"""mindstore: an async persistence layer for AI-agent conversations on MongoDB."""

from mindstore.errors import (
    BackupError,
    ConfigurationError,
    Conflict,
    InvalidTransition,
    MindstoreError,
    NotFound,
    TaskTooLarge,
    ValidationError,
)
from mindstore.model.header import TaskState
from mindstore.model.task import Task
from mindstore.store import Store, TenantStore, connect

__version__ = "0.1.0"

__all__ = [
    "BackupError",
    "ConfigurationError",
    "Conflict",
    "InvalidTransition",
    "MindstoreError",
    "NotFound",
    "Store",
    "Task",
    "TaskState",
    "TaskTooLarge",
    "TenantStore",
    "ValidationError",
    "connect",
]
