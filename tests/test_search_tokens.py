"""Terms across scripts (docs/search.md, "Words"): accents fold, letters do not. Kana
voicing, Indic vowel signs and Hangul syllables stay what they are; the iteration mark
belongs to its run of Han; the terms a snippet highlights are the terms the index holds;
an index built by another tokenizer is rebuilt, never mixed with new terms."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.collection_names import SEARCH_POSTINGS
from mindstore.errors import ConfigurationError
from mindstore.search.tokenize import terms, tokens

# ------------------------------------------------------------------ kana voicing
VOICING = ["か", "が", "トライ", "ドライ", "ハン", "バン", "パン", "ふた", "ぶた", "こま",
           "ごま", "さる", "ざる", "てんき", "でんき", "ビル", "ピル"]  # fmt: skip


async def test_kana_voicing_marks_are_letters_not_accents(acme: Any) -> None:
    """が is not か, ド is not ト: each word finds its own message and no other."""
    task = await acme.tasks.create()
    for n, word in enumerate(VOICING):
        await acme.tasks.add_human_message(task.id, f"{word} です", message_id=f"m{n}")
    for n, word in enumerate(VOICING):
        page = await acme.search(word, limit=20, match="all")
        assert [hit.message_id for hit in page.hits] == [f"m{n}"], word
        # any of its bigrams: its own message first (a voiced twin may share one bigram)
        assert (await acme.search(word, limit=20)).hits[0].message_id == f"m{n}", word
    # half-width katakana with its voicing mark is the full-width syllable (NFKC)
    assert [hit.message_id for hit in (await acme.search("ﾄﾞﾗｲ", match="all")).hits] == ["m3"]


def test_voiced_kana_fold_to_themselves() -> None:
    assert terms("が") == ["が"] and terms("か\u3099") == ["が"]  # composed again
    assert terms("ドライ") == ["ドラ", "ライ"] != terms("トライ")
    assert terms("ﾊﾟﾝ") == terms("パン") == ["パン"]


# ------------------------------------------------------------------ the iteration mark
@pytest.mark.parametrize(
    ("query", "text"),
    [("時々雨", "明日は時々雨が降る"), ("人々", "多くの人々が集まった"), ("様々な", "様々な方法")],
)
async def test_the_iteration_mark_belongs_to_its_run_of_han(
    acme: Any, query: str, text: str
) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, text, message_id="m")
    await acme.tasks.add_human_message(task.id, "時雨 人 様", message_id="other")
    assert [hit.message_id for hit in (await acme.search(query)).hits] == ["m"]


def test_iteration_marks_make_bigrams() -> None:
    assert terms("時々雨") == ["時々", "々雨"]
    assert terms("人々") == ["人々"] and terms("二〇二四年") == ["二〇", "〇二", "二四", "四年"]


# ------------------------------------------------------------------ other scripts
def test_hangul_syllables_stay_composed() -> None:
    assert terms("한국어 공부") == ["한국어", "공부"]
    assert all(len(term) <= 3 for term in terms("한국어 공부"))  # syllables, not jamo
    assert terms("\u1112\u1161\u11ab") == ["한"]  # conjoining jamo compose
    long_word = "가" * 30
    assert terms(long_word) == [long_word]  # 30 syllables, under the 40-character cut


def test_marks_that_are_part_of_letters_stay() -> None:
    # Devanagari: vowel signs and the virama are part of the word; के is not क
    assert terms("हिन्दी के क") == ["हिन्दी", "के", "क"]
    # Thai vowel marks stay in the word
    assert terms("กิน กน") == ["กิน", "กน"]


def test_optional_accents_and_vowel_points_fold() -> None:
    assert terms("Tiếng Việt") == ["tieng", "viet"]
    assert terms("καλημέρα ΚΑΛΗΜΈΡΑ") == ["καλημερα", "καλημερα"]
    assert terms("ёлка") == ["елка"]
    assert terms("كَتَبَ") == terms("كتب") == ["كتب"]  # Arabic harakat
    assert terms("שָׁלוֹם") == terms("שלום") == ["שלום"]  # Hebrew points


async def test_a_devanagari_word_is_found_whole(acme: Any) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "मुझे हिन्दी पसंद है", message_id="m")
    await acme.tasks.add_human_message(task.id, "हन द", message_id="other")
    assert [hit.message_id for hit in (await acme.search("हिन्दी")).hits] == ["m"]
    page = await acme.search("हिन्दी")
    assert page.hits[0].snippet.marked() == "मुझे **हिन्दी** पसंद है"


def test_every_mark_is_where_the_word_pattern_looks() -> None:
    from mindstore.search.tokenize import MARK_PLANES

    planes = [p for plane in MARK_PLANES for p in (plane.start, plane.stop - 1)]
    marks = [p for p in range(0x110000) if unicodedata.category(chr(p))[0] == "M"]
    assert all(any(r.start <= p < r.stop for r in MARK_PLANES) for p in marks), planes


SCRIPTS = st.sampled_from(
    list("がかゕ\u3099\u309a\u309bｶﾞﾟ가\u1100\u1161\u11a8ㄱㅏ हि\u094dक\u093f\u0947ـَُأإآ")
    + list("é\u0301e\u0308İßﬁ々〻Å\u212b_ -.\u200d\u202eกิ")
)


@given(st.text(st.characters(blacklist_categories=()) | SCRIPTS, max_size=60))
@settings(max_examples=400, deadline=None)
def test_a_snippet_highlights_the_terms_the_index_holds(text: str) -> None:
    """The span-keeping walk (snippets, phrases) reads the same terms as the whole-text
    path (the index, queries), in every script."""
    assert [token.term for token in tokens(text)] == terms(text)


# ------------------------------------------------------------------ the index's tokenizer
async def test_an_index_of_another_tokenizer_is_rebuilt_not_mixed(acme: Any) -> None:
    """An index written before the tokenizer changed holds `か` for a message saying `が`;
    the first search under the new tokenizer rebuilds it rather than answer from it."""
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "が", message_id="m")
    assert [hit.message_id for hit in (await acme.search("が")).hits] == ["m"]
    postings = acme.store.database[SEARCH_POSTINGS]
    # as the old tokenizer wrote it: the term `か`, and no version recorded
    for document in await postings.find({"tenant": "acme", "_id": {"$regex": "^acme/が/"}}
                                        ).to_list(None):  # fmt: skip
        document["_id"] = document["_id"].replace("/が/", "/か/")
        await postings.insert_one(document)
    await postings.update_one({"_id": "acme/"}, {"$unset": {"tv": ""}})
    acme.store.search_states.clear()  # as a store started on the new version
    assert (await acme.search("か")).hits == []
    assert await postings.count_documents({"_id": {"$regex": "^acme/か/"}}) == 0
    stats = await postings.find_one({"_id": "acme/"})
    assert stats["tv"] == 2
    assert [hit.message_id for hit in (await acme.search("が")).hits] == ["m"]
    assert (await acme.search_index.verify()).ok


async def test_an_index_of_a_newer_tokenizer_is_refused(acme: Any) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "word", message_id="m")
    assert (await acme.search("word")).hits
    postings = acme.store.database[SEARCH_POSTINGS]
    await postings.update_one({"_id": "acme/"}, {"$set": {"tv": 99}})
    acme.store.search_states.clear()
    before = await postings.find({"tenant": "acme"}).to_list(None)
    with pytest.raises(ConfigurationError, match="newer mindstore"):
        await acme.search("word")
    assert await postings.find({"tenant": "acme"}).to_list(None) == before
