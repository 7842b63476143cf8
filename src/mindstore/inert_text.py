"""User data shown as it is, never acted on: on a terminal, in JSON and in a spreadsheet (pure).

Titles, owners, model and tool names, message texts and ids are whatever an agent or a
user stored. Written raw they can act on whoever reads them:

* on a terminal or a web page, a carriage return, a bidi override (``U+202E``) or a
  line separator makes a line read differently from what it holds; ANSI/OSC escapes
  recolour the screen or hide a link; a lone surrogate cannot be written at all;
* in a spreadsheet, a CSV cell that starts with ``=``, ``+``, ``-``, ``@``, ``|`` or
  ``;`` (or their fullwidth forms, or any of them behind leading blanks, which some
  imports trim) runs as a formula or a DDE call (CSV injection), and a raw carriage
  return inside an unquoted cell ends the row there, so what follows it is a new cell
  that may be a formula (``gpt\\r=1+1``).

`visible` makes any text safe to show: control characters (C0 except tab and newline,
DEL, C1), bidi controls, line/paragraph separators and lone surrogates become visible
escapes (``\\x1b``, ``\\u202e``, ``\\ud800``), so an escape sequence is shown, inert, rather
than stripped silently. `csv_cell` applies the same escapes and neutralises a formula with
a leading single quote (the OWASP rule); numbers stay numbers. `csv_text` is the one CSV
writer of the CLI and the console: RFC 4180 lines (``\\r\\n``), every cell through
`csv_cell`, so a cell holding a line break is quoted and none can start a formula.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Final

__all__ = ["FORMULA_STARTS", "csv_cell", "csv_text", "json_text", "visible"]

FORMULA_STARTS: Final = (
    "=", "+", "-", "@", "|", ";", "\t", "\r", "\n",
    "\uff1d", "\uff0b", "\uff0d", "\uff20", "\uff5c", "\uff1b",  # fullwidth = + - @ | ;
)  # fmt: skip
"""A spreadsheet may run a cell that starts with one of these (or with blanks before
one) as a formula: such a cell gets a leading `'`. Any cell starting with a blank gets it
too (`csv_cell`)."""
_KEPT: Final = frozenset("\n\t")
_SPOOFING: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                             "\u2066\u2067\u2068\u2069\u2028\u2029")  # fmt: skip
"""Bidirectional controls (Trojan Source) and the Unicode line/paragraph separators."""

Cell = str | int | float | bool | None


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def unsafe(char: str) -> bool:
    """Whether `char` acts on a reader when written raw (shown as an escape instead)."""
    if char in _KEPT:
        return False
    if char in _SPOOFING:
        return True
    return unicodedata.category(char) in ("Cc", "Cs")


def visible(value: object) -> str:
    """`value` as text that shows as itself: no escape sequence, bidi control or stray
    carriage return acts; tab and newline are kept."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():  # the common case: nothing to do (tab and newline are not)
        return text
    return "".join(_escape(char) if unsafe(char) else char for char in text)


def json_text(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with the characters that
    JSON leaves raw but a terminal acts on (C1 controls, DEL, bidi controls, separators,
    lone surrogates) written as ``\\uXXXX`` escapes: the same JSON value, inert."""
    if text.isascii() and "\x7f" not in text:
        return text
    return "".join(f"\\u{ord(c):04x}" if unsafe(c) else c for c in text)


def csv_cell(value: Cell) -> Cell:
    """A CSV value: text escaped as for a terminal and kept from running as a formula
    (a leading `'` before a formula start or a blank); numbers, booleans and empty cells
    unchanged."""
    if not isinstance(value, str):
        return value
    text = visible(value)
    if text[:1].isspace() or text.lstrip().startswith(FORMULA_STARTS):
        return "'" + text
    return text


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    """A CSV document: the header `columns`, then `rows`, every cell through `csv_cell`
    (None as an empty cell), RFC 4180 line ends; a cell with a line break or a quote is
    quoted."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([csv_cell(name) for name in columns])
    for row in rows:
        writer.writerow(["" if cell is None else csv_cell(cell) for cell in row])
    return out.getvalue()
