"""User data on a terminal and in a spreadsheet: shown as it is, never acted on.

Titles, owners, message texts and ids are whatever an agent or a user stored. Printed
raw they can act on the reader (`mindstore.inert_text` says how, and holds the rules the
console shares): on a terminal, escape sequences, carriage returns, bidi overrides and
lone surrogates; in rich, ``[bold]`` and ``[/bold]`` are markup (a title ``[/bold]``
crashed tables); in a spreadsheet, a cell that starts a formula.

`terminal_text` makes any value safe to print (visible escapes, ``\\x1b``, ``\\u202e``).
Tables are given `plain` cells (`rich.text.Text`, which rich never parses as markup).
`csv_cell` applies the same escapes and neutralises a formula with a leading single quote;
`csv_text` is the one CSV writer of the CLI and the console.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from mindstore.inert_text import FORMULA_STARTS, csv_cell, csv_text, json_text
from mindstore.inert_text import visible as terminal_text

__all__ = ["FORMULA_STARTS", "csv_cell", "csv_text", "json_text", "plain", "terminal_text"]


def plain(value: Any) -> Text:
    """A table cell or title: escaped text that rich shows literally (no markup)."""
    return Text("" if value is None else terminal_text(value))
