"""The one CSV writer of the CLI and the console (`mindstore.inert_text.csv_text`): no
stored name becomes a formula, checked by opening the console's CSV in a spreadsheet
engine (LibreOffice, headless, from Debian's packages), and the CLI writes the same bytes.

LibreOffice must be there: a missing `soffice` fails the test (`.ci/run` installs
`libreoffice-calc-nogui`), it never skips: a CSV nobody opened in a spreadsheet must not
pass for one that was.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.commands.output import OutputFormat, render
from mindstore.commands.sanitize import csv_cell
from mindstore.console.charts import Chart

SOFFICE = os.environ.get("MINDSTORE_SOFFICE") or shutil.which("soffice") or "/usr/bin/soffice"
HOSTILE = [
    "gpt\r=1+1", "gpt\n=1+1", "gpt\r\n=1+1", " =1+1", "\n=1+1", "\u00a0=1+1", "\uff1d1+1",
    "|calc!A0", ";=1+1", "=1+1", "+1+1", "-1+1", "@SUM(1;1)", "\t=1+1", "\u202e=1+1",
    "\x1b[31m=1+1", "\u2028=1+1", '"=1+1', "ok, =1+1", "plain",
]  # fmt: skip
"""Model and tool names a spreadsheet would run, or split a row at, if written raw."""
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def _cell_text(cell: ET.Element) -> str:
    """What a cell of a flat ODS shows (a paragraph a line, `<text:s/>` a run
    of spaces, `<text:tab/>` a tab)."""
    lines: list[str] = []
    for paragraph in cell.iter(f"{{{TEXT}}}p"):
        parts = [paragraph.text or ""]
        for child in paragraph:
            if child.tag == f"{{{TEXT}}}s":
                parts.append(" " * int(child.get(f"{{{TEXT}}}c", "1")))
            elif child.tag == f"{{{TEXT}}}tab":
                parts.append("\t")
            parts.append(child.text or "")
            parts.append(child.tail or "")
        lines.append("".join(parts))
    return "\n".join(lines)


def test_libreoffice_runs_no_stored_name_of_a_console_csv(tmp_path: Path) -> None:
    """The console's chart CSV of hostile tool names, opened in LibreOffice Calc: one row
    per name, no cell a formula; a control row written raw (`=1+1`) is evaluated, so the
    engine does run formulas in this import."""
    if not os.path.exists(SOFFICE):
        pytest.fail(f"no LibreOffice at {SOFFICE}: apt-get install libreoffice-calc-nogui "
                    "(.ci/run does), or set MINDSTORE_SOFFICE")  # fmt: skip
    chart = Chart("tools", "Tools", "bar", [], [], ("tool", "calls"),
                  [(name, n) for n, name in enumerate(HOSTILE)])  # fmt: skip
    source = tmp_path / "tools.csv"
    source.write_bytes((chart.csv() + "=1+1,-1\r\n").encode("utf-8"))
    subprocess.run(
        [SOFFICE, "--headless", "--norestore", f"-env:UserInstallation={tmp_path.as_uri()}/lo",
         "--infilter=CSV:44,34,76,1", "--convert-to", "fods", "--outdir", str(tmp_path),
         str(source)],
        check=True, capture_output=True, timeout=180,
    )  # fmt: skip
    sheet = ET.parse(tmp_path / "tools.fods")
    rows = [row.findall(f"{{{TABLE}}}table-cell") for row in sheet.iter(f"{{{TABLE}}}table-row")]
    assert len(rows) == 1 + len(HOSTILE) + 1  # no name split its row
    *data, control = rows[1:]
    assert control[0].get(f"{{{TABLE}}}formula") == "of:=1+1"
    for number, (name, cells) in enumerate(zip(HOSTILE, data, strict=True)):
        assert [c.get(f"{{{TABLE}}}formula") for c in cells] == [None, None], repr(name)
        assert _cell_text(cells[0]) == csv_cell(name), repr(name)
        assert _cell_text(cells[1]) == str(number)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12) | st.sampled_from(HOSTILE), st.integers()),
                max_size=4))  # fmt: skip
def test_the_cli_and_the_console_write_the_same_csv(rows: list[tuple[str, int]]) -> None:
    """One writer: the CLI's `--format csv` and a console chart's CSV are the same text."""
    from mindstore.inert_text import csv_text

    chart = Chart("tools", "Tools", "bar", [], [], ("tool", "calls"), list(rows))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        render([{"tool": t, "calls": c} for t, c in rows], OutputFormat.csv,
               columns=["tool", "calls"])  # fmt: skip
    assert out.getvalue() == chart.csv() == csv_text(("tool", "calls"), rows)


@pytest.mark.parametrize("name", HOSTILE)
def test_no_cell_starts_a_formula_or_holds_a_control(name: str) -> None:
    from mindstore.inert_text import FORMULA_STARTS, csv_text, unsafe

    cell = csv_cell(name)
    assert isinstance(cell, str)
    assert not cell.lstrip().startswith(FORMULA_STARTS) and not cell[:1].isspace()
    assert not any(unsafe(c) for c in cell)
    lines = csv_text(("tool",), [(name,)]).split("\r\n")
    assert lines[0] == "tool" and lines[-1] == ""
