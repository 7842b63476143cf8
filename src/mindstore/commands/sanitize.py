"""User data on a terminal and in a spreadsheet: shown as it is, never acted on.

Titles, owners, message texts and ids are whatever an agent or a user stored. Printed
raw they can act on the reader:

* on a terminal, ANSI/OSC escape sequences recolour or clear the screen, rewrite the
  window title, or hide a link behind harmless text; a carriage return or a bidi override
  (``U+202E``) makes a line read differently from what it holds; a lone surrogate cannot
  be written at all (the command would crash);
* in rich, ``[bold]`` and ``[/bold]`` are markup (a title ``[/bold]`` crashed tables);
* in a spreadsheet, a CSV cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or
  carriage return) is run as a formula (CSV injection).

`terminal_text` makes any value safe to print: control characters (C0 except tab and
newline, DEL, C1), bidi controls, line/paragraph separators and lone surrogates become
visible escapes (``\\x1b``, ``\\u202e``, ``\\ud800``), so an escape sequence is shown,
inert, rather than stripped silently. Tables are given `plain` cells (`rich.text.Text`,
which rich never parses as markup). `csv_cell` applies the same escapes and neutralises a
formula with a leading single quote (the OWASP rule); numbers stay numbers.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from rich.text import Text

__all__ = ["FORMULA_STARTS", "csv_cell", "json_text", "plain", "terminal_text"]

#: A spreadsheet runs a cell that starts with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_KEPT = frozenset("\n\t")
#: Bidirectional controls (Trojan Source) and the Unicode line/paragraph separators.
_SPOOFING = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                      "\u2066\u2067\u2068\u2069\u2028\u2029")  # fmt: skip


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(char: str) -> bool:
    if char in _KEPT:
        return False
    if char in _SPOOFING:
        return True
    return unicodedata.category(char) in ("Cc", "Cs")


def terminal_text(value: Any) -> str:
    """`value` as text that prints as itself: no escape sequence or control acts."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():  # the common case: nothing to do (tab and newline are not)
        return text
    return "".join(_escape(char) if _unsafe(char) else char for char in text)


def json_text(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with the characters that
    JSON leaves raw but a terminal acts on (C1 controls, DEL, bidi controls, separators,
    lone surrogates) written as ``\\uXXXX`` escapes: the same JSON value, inert."""
    if text.isascii() and "\x7f" not in text:
        return text
    return "".join(f"\\u{ord(c):04x}" if _unsafe(c) else c for c in text)


def plain(value: Any) -> Text:
    """A table cell or title: escaped text that rich shows literally (no markup)."""
    return Text("" if value is None else terminal_text(value))


def csv_cell(value: Any) -> Any:
    """A CSV value: text escaped as for a terminal and kept from running as a formula;
    numbers, booleans and empty cells unchanged."""
    if not isinstance(value, str):
        return value
    text = terminal_text(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text
