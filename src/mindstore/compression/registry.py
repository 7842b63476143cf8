"""Compression strategies by type: so a config (or a `strategy="..."` argument) can name one.

A registered entry is a strategy class (built per use, given the caller's `summarizer`
and `token_counter` when its constructor takes them) or a ready strategy object (used as
is). `resolve_strategy` turns whatever a caller passed (an object, a type, or nothing,
meaning "the one the config names") into a strategy object.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from enum import Enum
from typing import Any

from mindstore.compression.base import (
    AnyCompressionConfig,
    CompressionStrategy,
    strategy_name,
)
from mindstore.compression.builtin import BUILTIN_STRATEGIES
from mindstore.compression.summarizer import Summarizer
from mindstore.compression.tokens import TokenCounter, estimate_tokens
from mindstore.errors import ValidationError

StrategyEntry = CompressionStrategy | type[CompressionStrategy]
StrategyArgument = CompressionStrategy | str | Enum | None


def _accepted(factory: Callable[..., Any], offered: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments among `offered` that `factory` accepts."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # builtins without a signature: offer nothing
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(offered)
    return {name: value for name, value in offered.items() if name in parameters}


def _type_of(entry: StrategyEntry) -> str:
    """The key of an entry: its `strategy_type` (a class attribute, or read from an instance)."""
    if isinstance(entry, CompressionStrategy):
        return strategy_name(entry.strategy_type)
    declared = inspect.getattr_static(entry, "strategy_type", None)
    if isinstance(declared, (str, Enum)):
        return strategy_name(declared)
    kind = getattr(entry, "kind", None)
    if kind is not None:  # the built-ins declare it as `kind`
        return strategy_name(kind)
    try:
        return strategy_name(entry().strategy_type)
    except TypeError as exc:
        raise ValidationError(
            f"cannot read strategy_type of {entry.__name__}: pass strategy_type=... to register it"
        ) from exc


class StrategyRegistry:
    """Strategy types -> strategy classes or objects."""

    def __init__(self, entries: tuple[StrategyEntry, ...] = ()) -> None:
        self._entries: dict[str, StrategyEntry] = {}
        for entry in entries:
            self.register(entry)

    def register(
        self, strategy: StrategyEntry, *, strategy_type: str | Enum | None = None
    ) -> StrategyEntry:
        """Register a strategy class or object under its `strategy_type` (or the one given).

        Returns `strategy`, so a class can be registered with a decorator. Registering a
        type again replaces the entry (the application's choice wins over a built-in).
        """
        valid = isinstance(strategy, CompressionStrategy) or (
            isinstance(strategy, type) and issubclass(strategy, CompressionStrategy)
        )
        if not valid:
            raise ValidationError(
                f"strategy must be a CompressionStrategy subclass or instance, got {strategy!r}"
            )
        key = strategy_name(strategy_type) if strategy_type is not None else _type_of(strategy)
        if not key:
            raise ValidationError("strategy_type must be a non-empty string")
        self._entries[key] = strategy
        return strategy

    def unregister(self, strategy_type: str | Enum) -> None:
        """Forget a type (NotFound-free: forgetting an unknown type is a no-op)."""
        self._entries.pop(strategy_name(strategy_type), None)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, strategy_type: object) -> bool:
        return (
            isinstance(strategy_type, (str, Enum)) and strategy_name(strategy_type) in self._entries
        )

    def create(
        self,
        strategy_type: str | Enum,
        *,
        summarizer: Summarizer | None = None,
        token_counter: TokenCounter = estimate_tokens,
    ) -> CompressionStrategy:
        """The strategy registered as `strategy_type`; a ValidationError lists the known ones."""
        key = strategy_name(strategy_type)
        entry = self._entries.get(key)
        if entry is None:
            raise ValidationError(
                f"unknown compression strategy {key!r} (known: {', '.join(self.names())})"
            )
        if isinstance(entry, CompressionStrategy):
            return entry
        offered = {"summarizer": summarizer, "token_counter": token_counter}
        return entry(**{k: v for k, v in _accepted(entry, offered).items() if v is not None})


DEFAULT_REGISTRY = StrategyRegistry(BUILTIN_STRATEGIES)


def register_compression_strategy(
    strategy: StrategyEntry, *, strategy_type: str | Enum | None = None
) -> StrategyEntry:
    """Register a strategy in the process-wide registry (usable as a class decorator)."""
    return DEFAULT_REGISTRY.register(strategy, strategy_type=strategy_type)


def resolve_strategy(
    strategy: StrategyArgument,
    config: AnyCompressionConfig | None = None,
    *,
    summarizer: Summarizer | None = None,
    token_counter: TokenCounter = estimate_tokens,
    registry: StrategyRegistry | None = None,
) -> CompressionStrategy:
    """A strategy object from what a caller passed: an object is used as is; a type is
    looked up; nothing means the type `config.strategy` names."""
    if isinstance(strategy, CompressionStrategy):
        return strategy
    chosen = registry or DEFAULT_REGISTRY
    if strategy is None:
        strategy = getattr(config, "strategy", None)
        if strategy is None:
            raise ValidationError("strategy: pass a strategy, or a config whose strategy names one")
    if not isinstance(strategy, (str, Enum)):
        raise ValidationError(
            "strategy must be a CompressionStrategy or a strategy type name, "
            f"got {type(strategy).__name__}"
        )
    return chosen.create(strategy, summarizer=summarizer, token_counter=token_counter)
