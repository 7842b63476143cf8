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
  chat history (`[langchain]`).

Importing this package imports no framework. See docs/integrations.md.
"""
