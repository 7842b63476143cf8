"""Questions as a user types them, over LoCoMo's conv-26 (Caroline and Melanie), for the
share of questions that return no hit at all, by mode.

Written for this benchmark, not taken from LoCoMo: lower case, no punctuation but the
question mark, the words a person would use rather than the conversation's own ("wedding"
for a turn that says "marrying my partner", "grandmother" for "grandma", "favourite
colour" for "Blue's my fave"). Each names the turns that answer it, as read in the
first eight sessions; the no-hit share needs no labels, the labels let the same run
report a recall beside it.
"""

from __future__ import annotations

from benchmarks.recall.locomo import Question

SAMPLE = "conv-26"

NATURAL: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("what did melanie say about her wedding?", ("D3:16", "D8:12", "D8:14", "D8:16")),
    ("how long has melanie been married?", ("D3:16",)),
    ("where is caroline's grandmother from?", ("D4:3",)),
    ("what gift did caroline get from her grandmother?", ("D4:3",)),
    ("what are the names of melanie's pets?", ("D7:18",)),
    ("which instrument is caroline learning to play?", ("D5:5",)),
    ("what instrument does melanie play?", ("D2:5",)),
    ("what did the kids enjoy at the museum?", ("D6:6",)),
    ("which book about a trans girl did caroline recommend?", ("D7:11",)),
    ("what was melanie's favourite book when she was little?", ("D6:10",)),
    ("what kind of job does caroline want?", ("D1:11",)),
    ("did melanie sign up for any class recently?", ("D5:4",)),
    ("what charity event did melanie take part in?", ("D2:1",)),
    ("who made the bowl caroline treasures?", ("D4:5",)),
    ("what did the family do on their camping trip?", ("D4:8",)),
    ("why did caroline choose that adoption agency?", ("D2:12",)),
    ("how does melanie unwind after work?", ("D1:16",)),
    ("what did caroline tell the students at her school talk?", ("D3:1",)),
    ("how does melanie deal with stress?", ("D7:20", "D7:22")),
    ("how did caroline feel at the pride parade?", ("D5:1", "D8:19")),
    ("what did melanie's children make at the pottery workshop?", ("D8:2", "D8:4")),
    ("what is caroline's favourite colour?", ("D8:11",)),
    ("what flowers did melanie have at her wedding?", ("D8:12",)),
    ("what country did caroline grow up in?", ("D4:3",)),
)


def natural_questions() -> tuple[Question, ...]:
    return tuple(Question(text, frozenset(evidence), 0) for text, evidence in NATURAL)
