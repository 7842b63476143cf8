"""Compression and context windows: the compression document's framework (pluggable
strategies, checkpoints, the Compressor), the dialog document's context managers (and
their registry and configuration) and the agent-graph format's reducers.

Pure planning (`strategies`, `builtin`, `checkpoint`, `checkpoint_view`, `managers`,
`model_context_sizes`, `reducers`, `toolpairs`, `tokens`) is kept apart from the one
module that reads and writes a level (`compressor`), and from the context entry point
behind `tasks.context(...)` (`context`).
"""

from mindstore.compression.base import (
    AnyCompressionConfig,
    BaseCompressionConfig,
    CompressionStrategy,
    LevelSnapshot,
)
from mindstore.compression.builtin import (
    CompactSummarization,
    ToolCompression,
    TruncateAndSummarize,
)
from mindstore.compression.checkpoint import (
    CompressionCheckpoint,
    checkpoints_in,
    merge_round,
)
from mindstore.compression.checkpoint_view import apply_checkpoint
from mindstore.compression.compressor import (
    Compressor,
    LevelSource,
    MemoryLevel,
    StoredLevel,
)
from mindstore.compression.context import ContextWindow, LeftOut, build_context
from mindstore.compression.manager_config import (
    ContextConfig,
    ContextManagerRegistry,
    register_context_manager,
)
from mindstore.compression.managers import (
    ContextManager,
    DefaultContextManager,
    MessageContextManager,
)
from mindstore.compression.model_context_sizes import context_window, register_context_window
from mindstore.compression.outcome import CompressionOutcome
from mindstore.compression.reducers import (
    add_messages,
    append_items,
    remove_tool_messages,
    replace_messages,
)
from mindstore.compression.registry import (
    StrategyRegistry,
    register_compression_strategy,
    resolve_strategy,
)
from mindstore.compression.strategies import CompressionPlan, plan_compression
from mindstore.compression.summarizer import ExtractiveSummarizer, Summarizer
from mindstore.compression.tokens import TokenCounter, count_tokens, estimate_tokens
from mindstore.compression.window import model_view

__all__ = [
    "AnyCompressionConfig",
    "BaseCompressionConfig",
    "CompactSummarization",
    "CompressionCheckpoint",
    "CompressionOutcome",
    "CompressionPlan",
    "CompressionStrategy",
    "Compressor",
    "ContextConfig",
    "ContextManager",
    "ContextManagerRegistry",
    "ContextWindow",
    "DefaultContextManager",
    "ExtractiveSummarizer",
    "LeftOut",
    "LevelSnapshot",
    "LevelSource",
    "MemoryLevel",
    "MessageContextManager",
    "StoredLevel",
    "StrategyRegistry",
    "Summarizer",
    "TokenCounter",
    "ToolCompression",
    "TruncateAndSummarize",
    "add_messages",
    "append_items",
    "apply_checkpoint",
    "build_context",
    "checkpoints_in",
    "context_window",
    "count_tokens",
    "estimate_tokens",
    "merge_round",
    "model_view",
    "plan_compression",
    "register_compression_strategy",
    "register_context_manager",
    "register_context_window",
    "remove_tool_messages",
    "replace_messages",
    "resolve_strategy",
]  # fmt: skip
