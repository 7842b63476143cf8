"""A seeded multi-tenant corpus of agent conversations for search tests and the bench.

Realistic turns: a user asks (English, Portuguese, German, Japanese, Chinese), the
assistant answers and calls tools (weather, flights, orders, docs) whose results come
back as tool messages. Words follow a Zipf-like law over a shared vocabulary, so
document frequencies differ as in real text and BM25 has something to rank. Pure: it
returns messages; the callers insert them (`tasks.create(messages=...)`, one insert each).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mindstore.model.messages import AnyMessage, AssistantMessage, ToolMessage, UserMessage
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolResultPart

CONFIG = TaskConfigPart(model_name="gpt-x")

ENGLISH = [
    "hotel",
    "flight",
    "booking",
    "lisbon",
    "porto",
    "berlin",
    "tokyo",
    "invoice",
    "refund",
    "order",
    "shipment",
    "delivery",
    "weather",
    "forecast",
    "rain",
    "sunny",
    "meeting",
    "schedule",
    "calendar",
    "report",
    "summary",
    "budget",
    "quarter",
    "revenue",
    "customer",
    "account",
    "password",
    "reset",
    "login",
    "error",
    "timeout",
    "database",
    "server",
    "deploy",
    "release",
    "version",
    "bug",
    "crash",
    "memory",
    "latency",
    "cache",
    "index",
    "query",
    "search",
    "result",
    "document",
    "contract",
    "clause",
    "payment",
    "card",
    "bank",
    "transfer",
    "receipt",
    "address",
    "phone",
    "email",
    "ticket",
    "support",
    "agent",
    "model",
    "prompt",
    "token",
    "context",
    "window",
    "tool",
    "call",
    "function",
    "argument",
    "response",
    "stream",
    "museum",
    "restaurant",
    "dinner",
    "lunch",
    "breakfast",
    "train",
    "station",
    "airport",
    "taxi",
    "car",
    "rental",
    "beach",
]
PORTUGUESE = [
    "reserva",
    "voo",
    "hotel",
    "praia",
    "estação",
    "aeroporto",
    "jantar",
    "almoço",
    "chuva",
    "previsão",
    "fatura",
]
GERMAN = [
    "Übernachtung",
    "Flughafen",
    "Bahnhof",
    "Rechnung",
    "Wetter",
    "Frühstück",
    "Straße",
    "Größe",
    "Buchung",
]
JAPANESE = ["東京の天気", "予約を確認", "ホテルの予約", "請求書を送って", "空港までの電車"]
CHINESE = ["北京的天气", "预订酒店", "发票号码", "机场出租车", "会议安排"]
FILLER = [
    "the",
    "a",
    "to",
    "of",
    "and",
    "in",
    "for",
    "on",
    "with",
    "is",
    "it",
    "please",
    "can",
    "you",
    "me",
    "my",
    "we",
    "our",
    "this",
    "that",
]
TOOLS = ("get_weather", "search_flights", "lookup_order", "read_document")


@dataclass(frozen=True)
class Conversation:
    owner: str
    title: str
    messages: list[AnyMessage]


_ZIPF = [sum(1.0 / (r + 1) for r in range(n + 1)) for n in range(len(ENGLISH))]
"""Cumulative weights 1/rank (Zipf's law, s = 1) over the vocabulary's ranks."""


def _zipf_word(rng: random.Random, words: list[str]) -> str:
    return rng.choices(words, cum_weights=_ZIPF)[0]


def _sentence(rng: random.Random, vocabulary: list[str], size: int) -> str:
    out = []
    for _ in range(size):
        pick = rng.random()
        if pick < 0.35:
            out.append(rng.choice(FILLER))
        elif pick < 0.9:
            out.append(_zipf_word(rng, vocabulary))
        elif pick < 0.95:
            out.append(rng.choice(PORTUGUESE + GERMAN))
        else:
            out.append(f"A-{rng.randint(1000, 9999)}")
    if rng.random() < 0.08:
        out.append(rng.choice(JAPANESE + CHINESE))
    return " ".join(out).capitalize()


def conversation(rng: random.Random, index: int, size: int, owners: int = 5) -> Conversation:
    """One task's messages: about `size` of them, in user/assistant/tool turns."""
    vocabulary = list(ENGLISH)
    rng.shuffle(vocabulary)  # each conversation has its own topical ranking
    messages: list[AnyMessage] = []
    turn = 0
    while len(messages) < size:
        turn += 1
        messages.append(
            UserMessage(
                id=f"u{index}-{turn}",
                content=[TextPart(text=_sentence(rng, vocabulary, rng.randint(4, 18)))],
            )
        )
        answer = [TextPart(text=_sentence(rng, vocabulary, rng.randint(6, 40)))]
        call = None
        if rng.random() < 0.4:
            tool = rng.choice(TOOLS)
            call = ToolCallPart(
                tool_call_id=f"c{index}-{turn}",
                tool_name=tool,
                args={"q": _sentence(rng, vocabulary, rng.randint(1, 4))},
                is_loading=False,
                is_approval_pending=False,
            )
            answer.append(call)
        messages.append(AssistantMessage(id=f"a{index}-{turn}", content=answer, status="completed"))
        if call is not None:
            result = ToolResultPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                result={"text": _sentence(rng, vocabulary, rng.randint(5, 60))},
            )
            messages.append(ToolMessage(id=f"t{index}-{turn}", content=[result]))
    return Conversation(f"owner{index % owners}", f"conversation {index}", messages[:size])


def corpus(seed: int, tasks: int, per_task: int) -> list[Conversation]:
    """`tasks` conversations of `per_task` messages, deterministic for `seed`."""
    rng = random.Random(seed)
    return [conversation(rng, n, per_task) for n in range(tasks)]
