"""mindstore as the store behind the agent frameworks platforms already use.

One module per framework, each importing its framework only there, each an optional
extra of the package:

* `mindstore.integrations.openai_agents`: `MindstoreSession`, the OpenAI Agents SDK's
  `Session` (`pip install "mindstore[openai-agents]"`);
* `mindstore.integrations.langgraph`: `MindstoreSaver`, a LangGraph checkpoint saver
  (`[langgraph]`);
* `mindstore.integrations.pydantic_ai`: load/save a task as pydantic-ai messages and a
  `history_processors` function (`[pydantic-ai]`);
* `mindstore.integrations.langchain`: `MindstoreChatMessageHistory`, an async LangChain
  chat history (`[langchain]`);
* `mindstore.integrations.adk`: `MindstoreSessionService`, a Google ADK session service
  (`[adk]`);
* `mindstore.integrations.llamaindex`: `MindstoreChatStore`, a LlamaIndex
  `AsyncDBChatStore` for `Memory`, and `MindstoreLegacyChatStore`, a `BaseChatStore`
  (`[llamaindex]`);
* `mindstore.integrations.agent_framework`: `MindstoreHistoryProvider`, a Microsoft Agent
  Framework `HistoryProvider` (`[agent-framework]`).

Every adapter maps the framework's conversation id (session id, thread id) to the task
that holds it with one rule (`conversation_ids`): `task_id_for("org/team/chat-1")` names
that task, so mindstore's own API finds a framework conversation.

Importing this package imports no framework. See docs/integrations.md.
"""

from mindstore.integrations.conversation_ids import (
    MAX_CONVERSATION_ID_LENGTH,
    conversation_id_of,
    task_id_for,
)

__all__ = ["MAX_CONVERSATION_ID_LENGTH", "conversation_id_of", "task_id_for"]
