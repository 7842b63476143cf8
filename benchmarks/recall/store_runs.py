"""mindstore's side of the recall benchmark: the conversations in a tenant, every question
asked through the public search, one method at a time.

Layout: one tenant; one owner per LoCoMo conversation (its sample id, ``conv-26``); one
task per session (``conv-26-s3``); one message per turn, the first speaker's as user
messages and the second's as assistant messages, the message id being the turn's
``dia_id``, so a hit names its evidence turn directly. A question is asked as typed,
``search(question, owner=<its conversation>, limit=10, mode=..., match=...)``.

The modes and the embedder come from the recall work (issue 47); on a tree without them
the methods that need them are reported as skipped, with the reason, and "lexical all"
runs as today's `search(question)` (the same behaviour by definition).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mindstore
from benchmarks.recall.locomo import Conversation
from benchmarks.recall.metrics import Answer
from mindstore.errors import MindstoreError
from mindstore.model.messages import AnyMessage, AssistantMessage, UserMessage
from mindstore.model.parts import TaskConfigPart, TextPart
from mindstore.store import TenantStore

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

TENANT = "locomo"
TOP = 10
CONFIG = TaskConfigPart(model_name="locomo")


@dataclass(frozen=True)
class StoreMethod:
    name: str
    options: dict[str, str] = field(default_factory=dict)
    """The `mode`/`match` keywords given to `search`."""
    embedder: bool = False
    stemming: str | None = None
    content_words: bool = False
    """Ask only the question's content words (scikit-learn's English stop list removed)."""


METHODS = (
    StoreMethod("mindstore lexical all", {"mode": "lexical", "match": "all"}),
    StoreMethod(
        "mindstore lexical all, content words",
        {"mode": "lexical", "match": "all"},
        content_words=True,
    ),
    StoreMethod("mindstore lexical any", {"mode": "lexical", "match": "any"}),
    StoreMethod("mindstore semantic", {"mode": "semantic"}, embedder=True),
    StoreMethod("mindstore hybrid", {"mode": "hybrid", "match": "any"}, embedder=True),
)
STEMMED = (
    StoreMethod(
        "mindstore lexical all, stemmed", {"mode": "lexical", "match": "all"}, stemming="english"
    ),
    StoreMethod(
        "mindstore lexical any, stemmed", {"mode": "lexical", "match": "any"}, stemming="english"
    ),
)


_WORD = re.compile(r"[\w']+")


def content_words(question: str) -> str:
    """The question's words that are not English stop words, in order (quotes and other
    punctuation dropped: they would be query syntax)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = (w.strip("'") for w in _WORD.findall(question))
    return " ".join(w for w in words if w and w.lower() not in ENGLISH_STOP_WORDS)


def has_modes() -> bool:
    """Whether `TenantStore.search` takes `mode` and `match` (issue 47's lexical work)."""
    parameters = inspect.signature(TenantStore.search).parameters
    return "mode" in parameters and "match" in parameters


def embedder_for(model: SentenceTransformer) -> object | None:
    """`mindstore.search.SentenceTransformerEmbedder(model)`, or None where the tree has no
    embedders yet (`connect(embedder=...)` and the class are both needed)."""
    import mindstore.search as search

    maker = getattr(search, "SentenceTransformerEmbedder", None)
    if maker is None or "embedder" not in inspect.signature(mindstore.connect).parameters:
        return None
    return maker(model)


def skip_reason(method: StoreMethod, modes: bool, embedder: object | None) -> str | None:
    if method.content_words and importlib.util.find_spec("sklearn") is None:
        return "scikit-learn (its English stop list) is not installed"
    if method.stemming is not None and not modes:
        return "the stemmed rows are measured beside match='any' (issue 47's lexical work)"
    if method.options.get("match") == "all" and method.options.get("mode") == "lexical":
        return None  # today's search, reachable on every tree
    if not modes:
        return "search(mode=..., match=...) is not in this tree (issue 47's lexical work)"
    if method.embedder and embedder is None:
        return (
            "connect(embedder=...) / mindstore.search.SentenceTransformerEmbedder are not in "
            "this tree (issue 47's vector work)"
        )
    return None


def messages_of(conversation: Conversation, number: int) -> list[AnyMessage]:
    session = next(s for s in conversation.sessions if s.number == number)
    first = conversation.speakers[0]
    out: list[AnyMessage] = []
    for turn in session.turns:
        content = [TextPart(text=turn.text)]
        if turn.speaker == first:
            out.append(UserMessage(id=turn.dia_id, content=content))
        else:
            out.append(AssistantMessage(id=turn.dia_id, content=content, status="completed"))
    return out


async def load(view: TenantStore, conversations: Sequence[Conversation]) -> None:
    for conversation in conversations:
        for session in conversation.sessions:
            await view.tasks.create(
                owner=conversation.sample_id,
                task_id=f"{conversation.sample_id}-s{session.number}",
                title=session.when[:200] or None,
                config=CONFIG,
                messages=messages_of(conversation, session.number),
            )


async def ask(
    view: TenantStore, method: StoreMethod, modes: bool, owner: str, question: str
) -> Answer:
    options = method.options if modes else {}
    if method.content_words:
        question = content_words(question) or question
    started, cpu = time.perf_counter(), time.process_time()
    try:
        page = await view.search(question, owner=owner, limit=TOP, **options)  # type: ignore[arg-type]
    except MindstoreError as error:
        return Answer((), time.perf_counter() - started, time.process_time() - cpu,
                      f"{type(error).__name__}: {error}")  # fmt: skip
    return Answer(tuple(hit.message_id for hit in page.hits), time.perf_counter() - started,
                  time.process_time() - cpu)  # fmt: skip


@dataclass
class StoreRun:
    """Every method's answers (in question order) or the reason it was skipped, and what
    the first search of each method cost (the index built, the vectors computed)."""

    answers: dict[str, list[Answer]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    first_search_seconds: dict[str, float] = field(default_factory=dict)
    load_seconds: float = 0.0


async def run(
    conversations: Sequence[Conversation],
    model: SentenceTransformer | None,
    *,
    stemming: bool = True,
) -> StoreRun:
    modes = has_modes()
    embedder = embedder_for(model) if model is not None else None
    out = StoreRun()
    store = (
        await mindstore.connect("memory:", embedder=embedder)  # type: ignore[call-arg]
        if embedder is not None
        else await mindstore.connect("memory:")
    )
    try:
        view = store.scoped(TENANT)
        started = time.perf_counter()
        await load(view, conversations)
        out.load_seconds = time.perf_counter() - started
        stemmed_now: str | None = None
        for method in METHODS + (STEMMED if stemming else ()):
            reason = skip_reason(method, modes, embedder)
            if reason is not None:
                out.skipped[method.name] = reason
                continue
            started = time.perf_counter()
            if method.stemming != stemmed_now:
                await view.search_index.rebuild(stemming=method.stemming)
                stemmed_now = method.stemming
            first = conversations[0]
            await ask(view, method, modes, first.sample_id, first.questions[0].text)
            out.first_search_seconds[method.name] = round(time.perf_counter() - started, 3)
            out.answers[method.name] = [
                await ask(view, method, modes, c.sample_id, q.text)
                for c in conversations
                for q in c.questions
            ]
    finally:
        await store.close()
    return out
