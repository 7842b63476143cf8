"""Properties of the CLI's input and output guards over their whole input space: any
text prints inert and stays readable, any CSV cell stays data, any JSON stays the same
value, any number or time either parses or is refused with a typed error."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import unicodedata
from datetime import UTC

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.cli import check_uri
from mindstore.commands.arguments import time_bound
from mindstore.commands.output import OutputFormat, echo_json, render
from mindstore.commands.sanitize import FORMULA_STARTS, csv_cell, json_text, terminal_text
from mindstore.errors import ConfigurationError, ValidationError

SPOOFING = set(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
)
# any code point, lone surrogates included, with the dangerous ones drawn often
hostile_text = st.text(st.one_of(
    st.characters(),
    st.sampled_from(["\x1b", "\x07", "\x9b", "\x00", "\r", "\x7f", "\u202e", "\ud800", "\udfff",
                     "[", "]", "/", "=", "+", "-", "@", "\t", "\n"]),
), max_size=40)  # fmt: skip
markup_text = st.builds(
    lambda a, b: f"[{a}]{b}[/{a}]",
    st.sampled_from(["bold", "red", "link=x", "", "/"]),
    st.text(max_size=5),
) | st.sampled_from(["[/bold]", "[/]", "[bold", "\\[x]"])


def _unsafe(char: str) -> bool:
    if char in "\n\t":
        return False
    return char in SPOOFING or unicodedata.category(char) in ("Cc", "Cs")


@settings(max_examples=400)
@given(hostile_text)
def test_terminal_text_is_inert_printable_and_lossless_for_safe_text(text):
    shown = terminal_text(text)
    shown.encode("utf-8")  # a lone surrogate would raise here
    assert not any(_unsafe(c) for c in shown)
    if not any(_unsafe(c) for c in text):
        assert shown == text
    else:  # every unsafe character became a visible escape
        assert shown.count("\\") >= sum(map(_unsafe, text))


@settings(max_examples=400)
@given(st.one_of(hostile_text, st.integers(), st.floats(allow_nan=True), st.none(), st.booleans()))
def test_csv_cells_never_start_a_formula(value):
    cell = csv_cell(value)
    if not isinstance(value, str):
        assert cell is value  # numbers stay numbers
        return
    assert not cell.lstrip().startswith(FORMULA_STARTS) and not cell[:1].isspace()
    assert not any(_unsafe(c) for c in cell)
    plain = terminal_text(value)
    risky = plain[:1].isspace() or plain.lstrip().startswith(FORMULA_STARTS)
    assert cell == ("'" + plain if risky else plain)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(hostile_text, st.one_of(hostile_text, st.integers(), st.floats(allow_nan=False))),
        min_size=1,
        max_size=4,
    )
)
def test_csv_output_reads_back_as_the_neutralised_cells(rows):
    items = [{"a": a, "b": b} for a, b in rows]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        render(items, OutputFormat.csv, columns=["a", "b"])
    text = out.getvalue()
    assert not any(_unsafe(c) for c in text if c != "\r")
    read = list(csv.DictReader(io.StringIO(text)))
    assert [row["a"] for row in read] == [csv_cell(a) for a, _ in rows]
    assert [row["b"] for row in read] == [str(csv_cell(b)) for _, b in rows]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(hostile_text, markup_text), min_size=1, max_size=3),
    st.one_of(hostile_text, markup_text),
)
def test_tables_print_any_text_literally(cells, title):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        render([{"cell": c} for c in cells], OutputFormat.table, title=title, columns=["cell"])
    printed = out.getvalue()
    assert not any(_unsafe(c) for c in printed)
    for cell in cells:  # short, single-line cells appear exactly, markup and all
        shown = terminal_text(cell)
        if (
            shown
            and len(shown) < 30
            and shown.isprintable()
            and shown == shown.strip()
            and "  " not in shown
        ):
            assert shown in printed


@settings(max_examples=300)
@given(st.recursive(st.one_of(hostile_text, st.integers(), st.none(), st.booleans()),
                    lambda children: (st.lists(children, max_size=3)
                                      | st.dictionaries(hostile_text, children, max_size=3)),
                    max_leaves=10))  # fmt: skip
def test_json_output_is_the_same_value_and_inert(value):
    text = json_text(json.dumps(value, ensure_ascii=False))
    text.encode("utf-8")
    assert not any(_unsafe(c) for c in text)
    assert json.loads(text) == value
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        echo_json(value)
    assert json.loads(out.getvalue()) == value


@settings(max_examples=300)
@given(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.floats(allow_nan=True, allow_infinity=True).map(str),
        st.integers(-(2**80), 2**80).map(str),
        hostile_text,
        st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    )
)
def test_a_time_bound_parses_or_is_a_validation_error(text):
    try:
        moment = time_bound(text, "--since")
    except ValidationError as exc:
        assert "--since" in str(exc)
        return
    assert moment is not None and moment.tzinfo is not None
    try:
        seconds = float(text.strip())
    except ValueError:
        return
    assert (
        math.isfinite(seconds)
        and abs(moment.timestamp() - seconds) < 1e-3 * max(1, abs(seconds)) + 1
    )


@pytest.mark.parametrize(
    "text", ["nan", "-nan", "inf", "-inf", "Infinity", "1e300", "-1e300", "1e20"]
)
def test_non_finite_and_huge_times_are_refused(text):
    with pytest.raises(ValidationError, match="--until"):
        time_bound(text, "--until")


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=30), st.sampled_from(["mongodb://localhost:1/?", "mongodb+srv://c.invalid/?"])
)
def test_uri_options_parse_or_are_a_configuration_error(options, base):
    try:
        check_uri(base + options)
    except ConfigurationError as exc:
        assert str(exc).startswith("invalid MongoDB URI")


def test_the_uri_check_leaves_good_and_embedded_uris_alone():
    for uri in (
        None,
        "",
        "embedded",
        "mongomock://x",
        "mongodb://a:27017,b:27018/db?replicaSet=rs&w=majority",
        "mongodb+srv://cluster.example.net/db?retryWrites=true",
        "mongodb://u:p%40ss@h/?authSource=admin",
    ):
        check_uri(uri)
    with pytest.raises(ConfigurationError) as bad:
        check_uri("mongodb://user:secret@h/?serverSelectionTimeoutMS=abc")
    assert "secret" not in str(bad.value)  # the password is redacted


@pytest.mark.parametrize("uri", [
    "mongodb://user:secret@127.0.0.1:1/?serverSelectionTimeoutMS=abc",
    "mongodb://127.0.0.1:1/?w=-7",
    "mongodb+srv://cluster.invalid/?connectTimeoutMS=soon",
])  # fmt: skip
async def test_the_library_connect_refuses_bad_uri_options_before_connecting(uri, monkeypatch):
    """`connect()` runs the same check as the CLI: a typo in an option is a one-line
    ConfigurationError at once, not a warning and a 30-second default wait; no client is
    ever built (a port nobody listens on would otherwise be tried)."""
    import pymongo

    import mindstore

    built: list[str] = []
    monkeypatch.setattr(pymongo, "AsyncMongoClient", lambda *a, **k: built.append(a[0]))
    with pytest.raises(ConfigurationError, match="invalid MongoDB URI") as refused:
        await mindstore.connect(uri)
    assert built == []
    assert "secret" not in str(refused.value)
