"""Generated ids: nanoid's format (21 characters of [A-Za-z0-9_-]) from `secrets`, never
starting with '-' (it would read as an option on a command line)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from mindstore.model import base
from mindstore.model.base import ID_ALPHABET, ID_LENGTH, new_id

ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{20}")


def test_ids_have_the_nanoid_format_and_do_not_repeat() -> None:
    ids = [new_id() for _ in range(5_000)]
    assert all(ID.fullmatch(value) for value in ids)
    assert len(set(ids)) == len(ids)
    assert len(ID_ALPHABET) == 64 and set(ID_ALPHABET) == set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    )


def test_every_character_of_the_alphabet_is_drawn() -> None:
    """40,000 draws: a character missing would mean a biased mapping (odds of a miss by
    chance are below 1e-270)."""
    seen = Counter(char for _ in range(2_000) for char in new_id()[1:])
    assert set(seen) == set(ID_ALPHABET)


def test_the_low_six_bits_of_each_random_byte_pick_the_character(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(base.secrets, "token_bytes", lambda n: bytes(range(64, 64 + n)))
    assert new_id() == ID_ALPHABET[:ID_LENGTH]


def test_an_id_starting_with_a_dash_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = iter([bytes([63] + [1] * 20), bytes([63 + 64] + [2] * 20), bytes([5] * 21)])
    calls: list[int] = []

    def token_bytes(n: int) -> bytes:
        calls.append(n)
        return next(draws)

    monkeypatch.setattr(base.secrets, "token_bytes", token_bytes)
    assert new_id() == "5" * 21
    assert calls == [ID_LENGTH] * 3
