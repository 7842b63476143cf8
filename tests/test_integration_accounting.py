"""Analytics over framework-driven conversations equal what the frameworks reported.

LangChain and LangGraph are driven end to end with scripted chat models from
`langchain_core` (`GenericFakeChatModel`, replies carrying `usage_metadata` and
`response_metadata.model_name`, no network). What the framework reported is taken from
LangChain's own usage callback (`get_usage_metadata_callback`, tokens by model) and from
the replies the models returned; `acme.analytics.usage(group_by="model")` must give the
same figures per model, time travel and rewritten histories included: each model call
counted once.
"""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("langgraph")

from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from mindstore.integrations import task_id_for
from mindstore.integrations.langchain import MindstoreChatMessageHistory
from mindstore.integrations.langgraph import MindstoreSaver

pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated")

MODELS = ("gpt-4o-mini", "claude-haiku")


class Script:
    """Replies for a scripted chat model: each carries the usage and model name a provider
    would report, and every reply is recorded (the framework's view of its model calls)."""

    def __init__(self, model: str, tokens_in: int, *, calls_tool: bool = False) -> None:
        self.model, self.tokens_in, self.calls_tool = model, tokens_in, calls_tool
        self.replies: list[AIMessage] = []
        self.counter = itertools.count(1)

    def __iter__(self):
        return self

    def __next__(self) -> AIMessage:
        n = next(self.counter)
        usage = {"input_tokens": self.tokens_in + n, "output_tokens": n,
                 "total_tokens": self.tokens_in + 2 * n,
                 "input_token_details": {"cache_read": n}}  # fmt: skip
        calls = (
            [{"name": "lookup", "args": {"n": n}, "id": f"{self.model}-call-{n}"}]
            if self.calls_tool
            else []
        )
        reply = AIMessage(f"{self.model} answer {n}", tool_calls=calls, usage_metadata=usage,
                          response_metadata={"model_name": self.model})  # fmt: skip
        self.replies.append(reply)
        return reply


def reported(replies: list[AIMessage]) -> dict[str, tuple[int, int, int, int]]:
    """Per model: (calls, tokens in, tokens out, cache reads), from the replies."""
    out: dict[str, tuple[int, int, int, int]] = {}
    for reply in replies:
        usage = reply.usage_metadata
        calls, tokens_in, tokens_out, cache = out.get(
            reply.response_metadata["model_name"], (0, 0, 0, 0)
        )
        out[reply.response_metadata["model_name"]] = (
            calls + 1, tokens_in + usage["input_tokens"], tokens_out + usage["output_tokens"],
            cache + usage["input_token_details"]["cache_read"])  # fmt: skip
    return out


async def analytics(view) -> dict[str, tuple[int, int, int, int]]:
    rows = await view.analytics.usage(group_by="model")
    return {
        row.model: (row.messages, row.tokens_in, row.tokens_out, row.cache_reads) for row in rows
    }


def callback_totals(callback) -> dict[str, tuple[int, int]]:
    return {
        model: (u["input_tokens"], u["output_tokens"])
        for model, u in callback.usage_metadata.items()
    }


def tokens(figures: dict[str, tuple[int, int, int, int]]) -> dict[str, tuple[int, int]]:
    return {
        model: (tokens_in, tokens_out) for model, (_, tokens_in, tokens_out, _) in figures.items()
    }


# ---------------------------------------------------------------- LangChain


async def test_a_langchain_chain_is_accounted_per_model_as_langchain_reported(store):
    ann = store.scoped("acme", owner="ann")
    scripts = {
        model: Script(model, tokens_in) for model, tokens_in in zip(MODELS, (100, 40), strict=True)
    }
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    chains = {
        model: RunnableWithMessageHistory(prompt | GenericFakeChatModel(messages=script),
                                          lambda sid: MindstoreChatMessageHistory(sid, ann),
                                          input_messages_key="q", history_messages_key="history")
        for model, script in scripts.items()
    }  # fmt: skip
    with get_usage_metadata_callback() as callback:
        for turn in range(3):  # two models, two conversations (one id no task id could be)
            for model, session in (
                (MODELS[0], "alice@example.com:chat-1"),
                (MODELS[1], "org/team/chat-1"),
            ):
                await chains[model].ainvoke(
                    {"q": f"question {turn}"}, {"configurable": {"session_id": session}}
                )
    replies = [reply for script in scripts.values() for reply in script.replies]
    expected = reported(replies)
    assert len(replies) == 6 and set(expected) == set(MODELS)
    assert await analytics(ann) == expected
    assert tokens(await analytics(ann)) == callback_totals(callback)  # LangChain's own tally
    stored = await ann.tasks.messages(task_id_for("org/team/chat-1"))
    assert [m.model_id for m in stored if m.role == "assistant"] == [MODELS[1]] * 3


async def test_langchain_replies_without_a_model_name_are_grouped_under_none(acme):
    history = MindstoreChatMessageHistory("anon", acme)
    await history.aadd_messages(
        [
            HumanMessage("hi"),
            AIMessage(
                "yo", usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}
            ),
        ]
    )
    await history.aadd_messages([AIMessage("hm", response_metadata={"model": "llama3"},
                                           usage_metadata={"input_tokens": 5, "output_tokens": 2,
                                                           "total_tokens": 7})])  # fmt: skip
    assert await analytics(acme) == {
        None: (1, 3, 1, 0),
        "llama3": (1, 5, 2, 0),
    }  # Ollama/Anthropic say `model`
    assert [m.response_metadata for m in await history.aget_messages()] == [
        {},
        {},
        {"model": "llama3"},
    ]


# ---------------------------------------------------------------- LangGraph


@tool
def lookup(n: int) -> str:
    """Look a number up."""
    return f"entry {n}"


def agent_graph(checkpointer, planner: Script, writer: Script):
    """A planner model that calls a tool, a writer model that answers from its result."""
    planning, writing = (
        GenericFakeChatModel(messages=planner),
        GenericFakeChatModel(messages=writer),
    )

    async def agent(state: MessagesState) -> dict:
        model = planning if isinstance(state["messages"][-1], HumanMessage) else writing
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


async def test_a_langgraph_thread_with_time_travel_counts_each_model_call_once(store):
    ann = store.scoped("acme", owner="ann")
    planner, writer = Script(MODELS[0], 200, calls_tool=True), Script(MODELS[1], 300)
    graph = agent_graph(MindstoreSaver(ann), planner, writer)
    config = {"configurable": {"thread_id": "trip/7"}}
    with get_usage_metadata_callback() as callback:
        for question in ("Oslo?", "Rome?"):
            await graph.ainvoke({"messages": [HumanMessage(question)]}, config)
        states = [s async for s in graph.aget_state_history(config)]
        first_answer = next(
            s for s in states if len(s.values.get("messages", [])) == 4 and not s.next
        )
        await graph.ainvoke(
            {"messages": [HumanMessage("Instead: Paris?")]}, first_answer.config
        )  # time travel
        forked = await graph.aupdate_state(
            first_answer.config, {"messages": [HumanMessage("Lima?")]}, as_node="tools"
        )
        await graph.ainvoke(None, forked)  # a second branch from the same checkpoint
    expected = reported(planner.replies + writer.replies)
    assert (
        sum(calls for calls, *_ in expected.values())
        == len(planner.replies) + len(writer.replies)
        == 8
    )
    assert await analytics(ann) == expected
    assert tokens(expected) == callback_totals(callback)
    tasks = [
        r for r in (await ann.tasks.list()).items if (r.metadata or {}).get("thread_id") == "trip/7"
    ]
    assert (
        len(tasks) == 3
    )  # the first timeline and two branches, each holding its own copy of the prefix
    assert (
        sum(r.seq for r in tasks) == 8 + 8 + 8
    )  # each branch: the 4 messages before it copied, 4 new
    assert (await graph.aget_state(config)).values["messages"][
        -1
    ].content == f"{MODELS[1]} answer 4"


async def test_a_langgraph_thread_matches_in_memory_saver_while_being_accounted(store):
    acme = store.scoped("acme")
    graphs = [agent_graph(saver, Script(MODELS[0], 10, calls_tool=True), Script(MODELS[1], 20))
              for saver in (MindstoreSaver(acme), InMemorySaver())]  # fmt: skip
    config = {"configurable": {"thread_id": "same"}}
    for graph in graphs:
        await graph.ainvoke({"messages": [HumanMessage("q", id="h1")]}, config)
    ours, theirs = [(await g.aget_state(config)).values["messages"] for g in graphs]
    assert [m.model_dump(exclude={"id"}) for m in ours] == [
        m.model_dump(exclude={"id"}) for m in theirs
    ]
    assert (
        ours[1].response_metadata == {"model_name": MODELS[0]}
        and ours[1].usage_metadata["input_tokens"] == 11
    )


def trimming_graph(checkpointer, script: Script):
    """Keeps the last 3 messages once there are more than 4 (`RemoveMessage`), then replies."""
    model = GenericFakeChatModel(messages=script)

    async def reply(state: MessagesState) -> dict:
        messages = state["messages"]
        removals = [RemoveMessage(id=m.id) for m in messages[:-3]] if len(messages) > 4 else []
        return {"messages": [*removals, await model.ainvoke(messages[-3:])]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


async def test_a_history_that_removes_messages_counts_each_model_call_once(acme):
    script = Script(MODELS[1], 50)
    graph = trimming_graph(MindstoreSaver(acme), script)
    config = {"configurable": {"thread_id": "trim"}}
    for i in range(6):
        await graph.ainvoke({"messages": [HumanMessage(f"q{i}")]}, config)
    assert await analytics(acme) == reported(script.replies)
    assert (
        len(script.replies) == 6 and len((await graph.aget_state(config)).values["messages"]) == 4
    )


async def test_pruning_copying_and_deleting_branched_threads_keep_the_books(acme):
    planner, writer = Script(MODELS[0], 10, calls_tool=True), Script(MODELS[1], 20)
    saver = MindstoreSaver(acme)
    graph = agent_graph(saver, planner, writer)
    config = {"configurable": {"thread_id": "src"}}
    for question in ("a?", "b?"):
        await graph.ainvoke({"messages": [HumanMessage(question)]}, config)
    states = [s async for s in graph.aget_state_history(config)]
    first_answer = next(s for s in states if len(s.values.get("messages", [])) == 4 and not s.next)
    await graph.ainvoke(
        {"messages": [HumanMessage("c?")]}, first_answer.config
    )  # the latest state is on a branch
    expected = reported(planner.replies + writer.replies)
    assert await analytics(acme) == expected
    await saver.acopy_thread("src", "dst")  # a conversation of its own: counted again
    doubled = {model: tuple(2 * x for x in figures) for model, figures in expected.items()}
    assert await analytics(acme) == doubled
    copied = {
        r.id: r.metadata
        for r in (await acme.tasks.list()).items
        if (r.metadata or {}).get("thread_id") == "dst"
    }
    assert all(
        source in copied
        for metadata in copied.values()
        for source in metadata.get("copied_from", [])
    )
    await saver.adelete_thread("src")
    assert await analytics(acme) == expected
    latest = (await graph.aget_state({"configurable": {"thread_id": "dst"}})).values
    await saver.aprune(["dst"])  # keeps the branch's task and the task it copies from
    assert await analytics(acme) == expected
    assert (await graph.aget_state({"configurable": {"thread_id": "dst"}})).values == latest
    await saver.adelete_thread("dst")
    assert await analytics(acme) == {} and (await acme.tasks.list()).items == []
