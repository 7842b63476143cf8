"""Context managers by name, and built from configuration (a dict or YAML).

The dialog document's configuration has a global block that applies to every agent and
per-agent overrides, deep-merged over it:

```yaml
global:
  context_manager: {type: default, max_tokens: 128000}
agent_configs:
  - name: cheap_agent
    model_name: gpt-4o-mini
    context_manager: {max_tokens: 16000}   # merged: type default, max_tokens 16000
  - name: reader
    context_manager: {type: keep_last}     # another type: the global options do not apply
  - name: no_prune_agent
    model_name: gpt-4o
    context_manager: {type: null}          # pruning disabled for this agent
```

`type` names a class registered with `register_context_manager` (`default` and
`message_count` are built in); the other keys are its constructor's keyword arguments,
plus the agent's `model_name` when the constructor takes one. `type: null`, or no
`context_manager` anywhere, means no pruning (`None`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from mindstore.compression.managers import (
    ContextManager,
    DefaultContextManager,
    MessageContextManager,
)
from mindstore.errors import ConfigurationError, ValidationError

TYPE_KEY = "type"


class ContextManagerRegistry:
    """Manager names -> manager classes (the runtime's registry in the dialog document)."""

    def __init__(self, classes: tuple[type[ContextManager], ...] = ()) -> None:
        self._classes: dict[str, type[ContextManager]] = {}
        for cls in classes:
            self.register(cls)

    def register(self, cls: type[ContextManager]) -> type[ContextManager]:
        """Register `cls` under `cls.name`; returns it (usable as a class decorator).

        A class without a `name` is refused with a `ValidationError` (a `ValueError`), as the
        document requires. Registering a name again replaces the class.
        """
        if not (isinstance(cls, type) and issubclass(cls, ContextManager)):
            raise ValidationError(f"cls must be a ContextManager subclass, got {cls!r}")
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise ValidationError(
                f"{cls.__name__} must set a non-empty `name` class attribute to be registered"
            )
        self._classes[name] = cls
        return cls

    def unregister(self, name: str) -> None:
        self._classes.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._classes)

    def get(self, name: str) -> type[ContextManager]:
        found = self._classes.get(name) if isinstance(name, str) else None
        if found is None:
            raise ValidationError(
                f"unknown context manager type {name!r} (known: {', '.join(self.names())})"
            )
        return found

    def build(
        self, settings: Mapping[str, Any] | None, *, model_name: str | None = None
    ) -> ContextManager | None:
        """The manager a `context_manager` block describes, or None when it disables pruning."""
        if settings is None or not settings:
            return None
        if not isinstance(settings, Mapping):
            raise ValidationError(
                f"context_manager must be a mapping, got {type(settings).__name__}"
            )
        if TYPE_KEY not in settings:
            raise ValidationError("context_manager.type is required (type: null disables pruning)")
        kind = settings[TYPE_KEY]
        if kind is None:
            return None
        cls = self.get(kind)
        options = {k: v for k, v in settings.items() if k != TYPE_KEY}
        if model_name is not None and "model_name" not in options and _takes(cls, "model_name"):
            options["model_name"] = model_name
        try:
            return cls(**options)
        except TypeError as exc:
            raise ValidationError(f"context_manager {kind!r}: {exc}") from exc


def _takes(cls: type, parameter: str) -> bool:
    parameters = inspect.signature(cls).parameters
    return parameter in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


DEFAULT_MANAGERS = ContextManagerRegistry((DefaultContextManager, MessageContextManager))


def register_context_manager(cls: type[ContextManager]) -> type[ContextManager]:
    """Register a manager class in the process-wide registry, keyed by `cls.name`."""
    return DEFAULT_MANAGERS.register(cls)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` over `base`: nested mappings merge key by key, anything else (lists,
    None included) replaces. So `type: null` in an override always wins."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow")
    model_name: str | None = None
    context_manager: dict[str, Any] | None = None


class _AgentBlock(_Block):
    name: str = Field(min_length=1)


class _ConfigModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    global_: _Block = Field(default_factory=_Block, alias="global")
    agent_configs: list[_AgentBlock] = Field(default_factory=list)


class ContextConfig:
    """The context-manager part of a configuration: a global block and agent overrides."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        if data is not None and not isinstance(data, Mapping):
            raise ValidationError(f"configuration must be a mapping, got {type(data).__name__}")
        try:
            self._model = _ConfigModel.model_validate(dict(data or {}))
        except pydantic.ValidationError as exc:
            raise ValidationError(f"invalid context configuration: {exc}") from exc
        names = [agent.name for agent in self._model.agent_configs]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValidationError(f"agent_configs names agents more than once: {duplicated}")
        self._agents = {agent.name: agent for agent in self._model.agent_configs}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextConfig:
        return cls(data)

    @classmethod
    def from_yaml(cls, text: str) -> ContextConfig:
        """Parse YAML text (needs PyYAML: `pip install 'mindstore[yaml]'`)."""
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise ConfigurationError(
                "YAML configuration needs PyYAML: pip install 'mindstore[yaml]'"
            ) from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValidationError(f"configuration is not valid YAML: {exc}") from exc
        return cls(data)

    @classmethod
    def from_file(cls, path: str | Path) -> ContextConfig:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read configuration file {str(path)!r}: {exc}"
            ) from exc
        return cls.from_yaml(text)

    def agent_names(self) -> list[str]:
        return list(self._agents)

    def model_name_for(self, agent_name: str) -> str | None:
        agent = self._agents.get(agent_name)
        return (
            agent.model_name if agent and agent.model_name else None
        ) or self._model.global_.model_name

    def settings_for(self, agent_name: str) -> dict[str, Any] | None:
        """The agent's `context_manager` block merged over the global one (None: no pruning).

        An agent that sets `context_manager: null` outright opts out, like `type: null`.
        An agent block that names another type than the global one starts from nothing:
        the global options belong to another class's constructor.
        """
        merged = dict(self._model.global_.context_manager or {})
        agent = self._agents.get(agent_name)
        if agent is not None and "context_manager" in agent.model_fields_set:
            override = agent.context_manager
            if override is None:
                return None
            if override.get(TYPE_KEY) not in (None, merged.get(TYPE_KEY)):
                merged = {}
            merged = deep_merge(merged, override)
        if not merged or merged.get(TYPE_KEY, ...) is None:
            return None
        return merged

    def context_manager_for(
        self, agent_name: str, registry: ContextManagerRegistry | None = None
    ) -> ContextManager | None:
        """The agent's manager, built from its merged settings and its model name."""
        return (registry or DEFAULT_MANAGERS).build(
            self.settings_for(agent_name), model_name=self.model_name_for(agent_name)
        )
