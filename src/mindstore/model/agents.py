"""An agent's dialogs by alias (the dialog document's agent-level access), the pure part.

An agent works with several dialogs at once ("planning", "execution", a fork to explore
"planning_alt") and one of them is active. `AgentState` is that map and the active
alias, with the document's names (`dialogs`, `active_alias`, `current_dialog`); its
transitions (`with_dialog`, `switched`) return a new state or raise, without I/O. The
repository stores the state as one small document per agent and applies each transition
as one guarded update (`repositories/agents.py`); the dialogs themselves are ordinary
stored dialogs, which the state only names.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.ids import KEY_SEPARATOR, check_key, check_name


def check_agent_name(name: Any) -> str:
    """An agent's name is the owner of its dialogs: the owner alphabet applies."""
    return check_name(name, "agent name")


def check_alias(alias: Any) -> str:
    """Aliases are keys (``[A-Za-z0-9_-.:]``, 1-128): safe in any filter, path or log line."""
    return check_key(alias, "alias")


def agent_key(tenant: str, name: str) -> str:
    """The stored ``_id`` of an agent's document: unique per tenant, unambiguous to split
    (a tenant never contains the separator)."""
    return f"{tenant}{KEY_SEPARATOR}{name}"


class AgentDialog(BaseModel):
    """One alias and the dialog it names (stored as a list entry, never as a field name)."""

    alias: str
    dialog_id: str
    forked_from: str | None = None
    """The alias this dialog was forked from, when it was made by `fork`."""


class AgentState(BaseModel):
    """Which dialogs an agent has open, by alias, and which one is active."""

    name: str
    entries: list[AgentDialog] = Field(default_factory=list)
    active_alias: str | None = None
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None

    # -- the document's names ---------------------------------------------------------
    @property
    def dialogs(self) -> dict[str, str]:
        """Alias -> dialog id, in the order the aliases were opened."""
        return {entry.alias: entry.dialog_id for entry in self.entries}

    @property
    def current_dialog(self) -> str | None:
        """The active dialog's id (None before the first `open`)."""
        return self.dialogs.get(self.active_alias) if self.active_alias is not None else None

    @property
    def exists(self) -> bool:
        """False for an agent that has never been changed (nothing stored yet)."""
        return self.version > 0

    def dialog_id(self, alias: str) -> str:
        found = self.dialogs.get(check_alias(alias))
        if found is None:
            raise NotFound(f"agent {self.name!r} has no dialog under alias {alias!r}")
        return found

    # -- transitions (pure) -----------------------------------------------------------
    def check_free(self, alias: str, *, replace: bool = False) -> None:
        """Refuse an alias that is already open (unless it is to be replaced)."""
        check_alias(alias)
        if alias in self.dialogs and not replace:
            raise Conflict(f"agent {self.name!r} already has a dialog under alias {alias!r}")

    def with_dialog(
        self,
        alias: str,
        dialog_id: str,
        *,
        activate: bool = True,
        replace: bool = False,
        forked_from: str | None = None,
    ) -> AgentState:
        """`alias` now names `dialog_id` (and is active with `activate`).

        An alias that is already open is a `Conflict` unless `replace`: silently pointing
        it elsewhere would hide the dialog it named.
        """
        self.check_free(alias, replace=replace)
        check_name(dialog_id, "dialog id")  # comes from a stored dialog; any stored id form passes
        entry = AgentDialog(alias=alias, dialog_id=dialog_id, forked_from=forked_from)
        entries = [e for e in self.entries if e.alias != alias]
        position = next((i for i, e in enumerate(self.entries) if e.alias == alias), len(entries))
        entries.insert(position, entry)
        return self.model_copy(update={
            "entries": entries,
            "active_alias": alias if activate else self.active_alias,
        })  # fmt: skip

    def switched(self, alias: str) -> AgentState:
        """`alias` is active; NotFound when the agent has no such alias."""
        self.dialog_id(alias)
        return self.model_copy(update={"active_alias": alias})

    # -- stored form --------------------------------------------------------------------
    def changed_fields(self) -> dict[str, Any]:
        """The fields one update sets (the whole small state: its size is the alias count)."""
        return {
            "dialogs": [entry.model_dump() for entry in self.entries],
            "active_alias": self.active_alias,
        }

    def to_document(self, tenant: str) -> dict[str, Any]:
        return {
            "_id": agent_key(tenant, self.name),
            "tenant": tenant,
            "owner": self.name,
            **self.changed_fields(),
            "version": self.version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> AgentState:
        return cls(
            name=document["owner"],
            entries=[AgentDialog.model_validate(e) for e in document.get("dialogs") or []],
            active_alias=document.get("active_alias"),
            version=int(document.get("version", 0)),
            created_at=document.get("created_at"),
            updated_at=document.get("updated_at"),
        )


def render_prompt(template: str, prompt_args: Mapping[str, Any] | None) -> str:
    """A system prompt from its `str.format` template (the document's `prompt_args`)."""
    if not isinstance(template, str):
        raise ValidationError(f"system_prompt must be a string, got {type(template).__name__}")
    if prompt_args is not None and not isinstance(prompt_args, Mapping):
        raise ValidationError(f"prompt_args must be a mapping, got {type(prompt_args).__name__}")
    try:
        return template.format(**(prompt_args or {}))
    except (KeyError, IndexError, ValueError) as exc:
        raise ValidationError(
            f"system_prompt could not be rendered with prompt_args: {exc!r}"
        ) from exc
