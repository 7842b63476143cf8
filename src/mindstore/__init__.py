"""mindstore: an async persistence layer for AI-agent conversations on MongoDB.

Logging: every module logs under the ``mindstore`` logger (connections at INFO with the
password masked, slow commands at INFO, lost races and conflicts at DEBUG). As a library,
mindstore adds only a `logging.NullHandler`: nothing is shown until the application
configures logging.
"""

import logging

from mindstore.backends.connection import InMemoryStoreWarning
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
from mindstore.model.paging import PagePolicy
from mindstore.model.task import Task
from mindstore.store import Store, TenantStore, connect
from mindstore.version import __version__ as __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "BackupError",
    "ConfigurationError",
    "Conflict",
    "InMemoryStoreWarning",
    "InvalidTransition",
    "MindstoreError",
    "NotFound",
    "PagePolicy",
    "Store",
    "Task",
    "TaskState",
    "TaskTooLarge",
    "TenantStore",
    "ValidationError",
    "connect",
]
