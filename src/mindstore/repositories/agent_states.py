"""An agent graph's run state, stored in its task document beside the header.

`save_agent_state` writes the state and the step's messages in one guarded update (a plan
of `model.plans.agent_step` run by the writer), so after a crash both are stored or
neither; `agent_state` reads it back with one projected read. Under a keyring the state is
sealed whole (`mindstore.crypto.task_fields`). `TaskRepository` documents both.
"""

from __future__ import annotations

from collections.abc import Sequence

from mindstore.crypto.fields import ENCRYPTED
from mindstore.formats import agent_state as formats_agent_state
from mindstore.formats.agent_state import agent_state_document
from mindstore.ids import check_name as check_key_name
from mindstore.model import verbs
from mindstore.model.messages import AnyMessage
from mindstore.model.plans.agent_step import plan_agent_step
from mindstore.model.storage_form import unescape_keys
from mindstore.repositories.engine import TaskWriter
from mindstore.repositories.port import TaskPort


class AgentStates:
    """The agent-graph state of one view's tasks: saved with a step's messages, read back."""

    def __init__(self, port: TaskPort, writer: TaskWriter) -> None:
        self.port = port
        self.writer = writer

    async def save(
        self,
        task_id: str,
        state: formats_agent_state.AgentState,
        *,
        messages: Sequence[AnyMessage] = (),
    ) -> None:
        """Store the state with the step's messages in one guarded update (a replay of the
        same message ids writes nothing)."""
        scope = self.port.scope
        document = agent_state_document(state)
        checked = verbs.check_messages(messages)
        ids = [check_key_name(m.id, "message id") for m in checked]
        if scope.cipher is not None:  # sealed whole (mindstore.crypto.task_fields)
            await scope.cipher.ready(write=True)
            document = scope.cipher.seal_task({"agent_state": document}, task_id)["agent_state"]
        await self.writer.verb(
            task_id, plan_agent_step, checked, {"agent_state": document}, ids=ids,
            replay=lambda stored: None,
        )  # fmt: skip

    async def load(self, task_id: str) -> formats_agent_state.AgentState | None:
        """The state last saved, or None (one projected read)."""
        scope = self.port.scope
        document = await scope.find_task(task_id, {"agent_state": 1, ENCRYPTED: 1})
        scope.require_keyring_to_read(document)
        if scope.cipher is not None:  # opened (mindstore.crypto.task_fields)
            await scope.cipher.ready()
            document = scope.cipher.open_task(document, task_id)
        stored = document.get("agent_state")
        if stored is None:
            return None
        return formats_agent_state.AgentState.model_validate(unescape_keys(stored))
