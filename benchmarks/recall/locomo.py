"""LoCoMo (benchmarks/data/locomo/): its conversations, turns and questions, read as published.

Pure: reads the vendored archive, returns dataclasses. A turn's text is the speaker's
name and what they wrote, followed by the caption of the photo they shared when there
is one, as the LoCoMo paper's retrieval baselines give a turn to a retriever (the images
are not released, their BLIP captions are). The name matters: nearly every question
names the person it is about ("When did Caroline ..."), and a message of mindstore has
a role, not a name, so the name is in the text for every method alike.

Questions of category 5 are left out: they are adversarial, asking about something the
other speaker did ("What did Caroline realize after her charity race?" when the race was
Melanie's), so the right answer is that it was never said, and the turn annotated with
one is the trap, not an answer. Every other question keeps the evidence ids that name a turn of its
conversation (the annotations spell a few ids loosely, ``D8:6; D9:17`` in one string,
``D:11:26``, ``D30:05``: they are split and normalised), and a question left with none
is counted and dropped.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parent.parent / "data" / "locomo" / "locomo10.zip"
UNANSWERABLE_CATEGORIES = frozenset({5})
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""LoCoMo's category numbers as its released evaluation code names them."""

_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    """``D<session>:<n>``, the id the questions' evidence names."""
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    when: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    dropped: dict[str, int] = field(default_factory=dict)
    """Questions left out, by reason (``adversarial``, ``no evidence turn``), and evidence
    ids that name no turn (``unknown evidence ids``)."""

    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]


def turn_text(raw: dict[str, object]) -> str:
    """``<speaker>: <text>``, and `` [shared <caption>]`` when a photo was shared."""
    text = f"{str(raw.get('speaker') or '').strip()}: {str(raw.get('text') or '').strip()}"
    caption = raw.get("blip_caption")
    return f"{text} [shared {str(caption).strip()}]" if caption else text


def evidence_ids(raw: Iterable[object]) -> list[str]:
    """Every ``D<s>:<n>`` named in the annotation's strings, in a canonical spelling."""
    return [f"D{int(s)}:{int(n)}" for item in raw for s, n in _EVIDENCE.findall(str(item))]


def parse(sample_id: str, data: dict[str, object]) -> Conversation:
    sessions = []
    for key, value in data.items():
        found = _SESSION.fullmatch(key)
        if found is None or not isinstance(value, list) or not value:
            continue
        number = int(found.group(1))
        turns = tuple(Turn(str(t["dia_id"]), str(t["speaker"]), turn_text(t)) for t in value)
        sessions.append(Session(number, str(data.get(f"{key}_date_time", "")), turns))
    sessions.sort(key=lambda s: s.number)
    known = {turn.dia_id for session in sessions for turn in session.turns}
    dropped = {"adversarial": 0, "no evidence turn": 0, "unknown evidence ids": 0}
    questions = []
    qa = data.get("qa")
    assert isinstance(qa, list)
    for item in qa:
        category = int(item["category"])
        if category in UNANSWERABLE_CATEGORIES:
            dropped["adversarial"] += 1
            continue
        named = evidence_ids(item.get("evidence") or [])
        evidence = frozenset(e for e in named if e in known)
        dropped["unknown evidence ids"] += len(set(named) - evidence)
        if not evidence:
            dropped["no evidence turn"] += 1
            continue
        questions.append(Question(str(item["question"]).strip(), evidence, category))
    speakers = (str(data["speaker_a"]), str(data["speaker_b"]))
    return Conversation(sample_id, speakers, tuple(sessions), tuple(questions), dropped)


def load(archive: Path = ARCHIVE, samples: Iterable[str] | None = None) -> list[Conversation]:
    """The conversations of the archive (or only `samples`, e.g. ``["conv-30"]``), by id."""
    wanted = None if samples is None else set(samples)
    out = []
    with zipfile.ZipFile(archive) as zipped:
        for name in sorted(zipped.namelist()):
            if not name.endswith(".json"):
                continue
            sample_id = f"conv-{Path(name).stem}"
            if wanted is None or sample_id in wanted:
                out.append(parse(sample_id, json.loads(zipped.read(name))))
    return out


def first_sessions(conversation: Conversation, count: int) -> Conversation:
    """A slice: the first `count` sessions and the questions whose evidence lies in them."""
    sessions = conversation.sessions[:count]
    kept = {turn.dia_id for session in sessions for turn in session.turns}
    questions = tuple(q for q in conversation.questions if q.evidence <= kept)
    return replace(conversation, sessions=sessions, questions=questions, dropped={})
