"""The console's pure parts: operators and sessions, a message as rows of text, inline
images, chart geometry and CSV, the read-only facade's surface, and the CLI command's
checks (mindstore.console, mindstore.commands.console)."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import os
import re
import signal
import sys
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from console_support import PNG, SPEC
from mindstore.analytics.service import Analytics
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app as cli
from mindstore.console import access, charts, conversation, reports
from mindstore.console.access import Credentials, Sessions, operator, operators_from_json
from mindstore.console.readonly import READ_METHODS, ReadOnlyStore, ReadOnlyTenant
from mindstore.console.web import _environment
from mindstore.errors import ConfigurationError
from mindstore.inert_text import visible
from mindstore.model.messages import AssistantMessage, ToolMessage, UserMessage
from mindstore.model.parts import ImagePart, TextPart, ToolCallPart, ToolResultPart
from mindstore.repositories.dialogs import DialogRepository
from mindstore.services.tasks import TaskService
from mindstore.store import Store
from mindstore.workload import generate, load

runner = CliRunner()
TOKEN = "a-token-of-twenty-chars"


# ------------------------------------------------------------------------------ access
def test_operators_from_json_names_what_is_wrong() -> None:
    good = operators_from_json(json.dumps([
        {"name": "all", "token": TOKEN, "tenants": "*"},
        {"name": "two", "token": TOKEN + "2", "tenants": ["a", "b"]},
    ]))  # fmt: skip
    assert [o.tenants for o in good] == [None, frozenset({"a", "b"})]
    assert good[0].may_see("anything") and good[1].may_see("a") and not good[1].may_see("c")
    assert all(TOKEN not in repr(o) or o.token_digest for o in good)
    bad = {
        "not json": "operators file: not JSON",
        "{}": "expected a list of objects",
        json.dumps([{"name": "x", "token": "short", "tenants": "*"}]): "at least 16",
        json.dumps([{"name": "x", "token": TOKEN, "tenants": []}]): "tenants must be",
        json.dumps([{"name": "", "token": TOKEN, "tenants": "*"}]): "operator name",
        json.dumps([{"name": "x", "token": TOKEN, "tenants": "*"},
                    {"name": "x", "token": TOKEN + "x", "tenants": "*"}]): "same name",
    }  # fmt: skip
    for text, message in bad.items():
        with pytest.raises(ConfigurationError, match=message):
            operators_from_json(text)
    with pytest.raises(ConfigurationError, match="same token"):
        Credentials([operator("a", TOKEN, "*"), operator("b", TOKEN, "*")])
    with pytest.raises(ConfigurationError, match="at least one"):
        Credentials([])


def test_credentials_keep_only_digests_and_match_exact_tokens() -> None:
    people = Credentials([operator("a", TOKEN, "*"), operator("b", TOKEN + "b", ["x"])])
    assert people.check(TOKEN) is people.operators[0]
    assert people.check(TOKEN + "b") is people.operators[1]
    for wrong in (None, "", TOKEN[:-1], TOKEN + " ", TOKEN.upper()):
        assert people.check(wrong) is None
    assert all(isinstance(o.token_digest, bytes) and len(o.token_digest) == 32
               for o in people.operators)  # fmt: skip


def test_sessions_are_random_bounded_and_closable() -> None:
    who = operator("a", TOKEN, "*")
    sessions = Sessions(limit=3)
    ids = [sessions.open(who) for _ in range(4)]
    assert len(set(ids)) == 4 and all(len(i) >= 40 for i in ids)
    assert sessions.get(ids[0]) is None  # the oldest dropped past the limit
    assert sessions.get(ids[3]) is who
    sessions.close(ids[3])
    assert sessions.get(ids[3]) is None and sessions.get(None) is None
    assert access.MAX_SESSIONS >= 1000


# ------------------------------------------------------------------------------ read-only
def test_the_console_view_has_no_write_method() -> None:
    public = {name for name in dir(ReadOnlyTenant) if not name.startswith("_")}
    assert public == READ_METHODS | {"tenant"}
    store_public = {name for name in dir(ReadOnlyStore) if not name.startswith("_")}
    assert store_public == {"tenant", "tenants", "totals"}
    reads = {"list", "get", "read_range", "tree_json", "root", "usage", "latency",
             "tools", "top_owners", "activity", "active_owners",
             "task_versions", "day_groups", "count", "forked"}  # fmt: skip
    writes = set()
    for source in (TaskService, DialogRepository, Analytics):
        for name, _ in inspect.getmembers(source, inspect.iscoroutinefunction):
            if not name.startswith("_") and name not in reads:
                writes.add(name)
    assert {"add_message", "redact", "delete", "fork", "set_state", "create"} <= writes
    assert not writes & public
    # the wrapped view is not reachable by a public name
    assert ReadOnlyTenant.__slots__ == ("__view", "tenant")


# ------------------------------------------------------------------------------ rows
def test_rows_pair_tool_calls_with_their_results_and_keep_text_as_text() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "<b>x</b>"})
    messages = [
        UserMessage(content=[TextPart(text="<script>alert(1)</script>")]),
        AssistantMessage(content=[call], tokens_in=10, tokens_out=5, cost=0.5, model_id="m"),
        ToolMessage(content=[ToolResultPart(tool_call_id="c1", tool_name="search",
                                            result={"hits": 2}, is_error=True, error="boom")]),
    ]  # fmt: skip
    shown = conversation.rows(messages, 40)
    assert [r.index for r in shown] == [40, 41, 42]
    assert shown[0].blocks[0].text == "<script>alert(1)</script>"
    paired = shown[1].blocks[0]
    assert paired.kind == "tool-call" and '"q": "<b>x</b>"' in paired.text
    assert paired.result is not None and paired.result.text == "boom" and paired.result.failed
    assert shown[1].usage == "m · 10 in / 5 out · $0.5000"
    assert shown[2].blocks[0].text == "shown with its call in #41"  # not twice
    alone = conversation.rows(messages[:2], 0)[1].blocks[0]
    assert alone.result is None  # its result is not on the page
    (result_only,) = conversation.rows(messages[2:], 0)  # its call is on an earlier page
    assert result_only.blocks[0].text == "boom" and result_only.blocks[0].failed
    assert json.dumps([r.to_json() for r in shown])  # the feed's form is JSON


def test_long_text_is_clipped_with_a_note() -> None:
    (row,) = conversation.rows([UserMessage(content=[TextPart(text="y" * 25_000)])], 0)
    assert row.blocks[0].text.startswith("y" * conversation.MAX_TEXT)
    assert row.blocks[0].text.endswith("[... 5,000 more characters not shown]")


def test_only_checked_raster_images_become_image_sources() -> None:
    assert conversation.image_source(PNG, "image/png") == f"data:image/png;base64,{PNG}"
    assert conversation.image_source(f"data:image/png;base64,{PNG}", "image/png")
    svg = base64.b64encode(b"<svg onload=alert(1)>").decode()
    refused = [(svg, "image/svg+xml"), (PNG, None), (PNG, "text/html"),
               ('x" onerror="alert(1)', "image/png"), ("not base64!", "image/png"),
               (f"data:text/html;base64,{PNG}", "image/png"), ("", "image/png")]  # fmt: skip
    for data, mime in refused:
        assert conversation.image_source(data, mime) is None, (data, mime)
    image = ImagePart(image=svg, mime_type="image/svg+xml", alt_text="a chart")
    (row,) = conversation.rows([UserMessage(content=[image])], 0)
    assert row.blocks[0].image is None and row.blocks[0].text == "a chart"


@given(st.text(max_size=200), st.sampled_from(["image/png", "image/jpeg", "image/svg+xml", ""]))
def test_an_image_source_is_a_data_url_of_base64_or_nothing(data: str, mime: str) -> None:
    source = conversation.image_source(data, mime)
    if source is not None:
        assert re.fullmatch(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}", source)


class _Markup(HTMLParser):
    """The tags and the text of a rendered fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@example('<script>alert(1)</script><img src=x onerror="alert(2)">', "<b onclick=x>t</b>")
@example("</div><a href='javascript:alert(1)'>x</a>", "&lt;&amp;")
@given(st.text(max_size=80), st.text(max_size=30))
def test_a_rendered_block_is_the_stored_text_and_no_markup_of_it(text: str, title: str) -> None:
    block = conversation.Block("text", text, title)
    html = _environment().get_template("block.html").render(block=block, root="")
    parsed = _Markup()
    parsed.feed(html)
    parsed.close()
    assert set(parsed.tags) <= {"div"} and set(parsed.attributes) <= {"class"}
    shown = "".join(parsed.text)  # control and bidi characters as visible escapes
    assert visible(text).strip() in shown and visible(title).strip() in shown


# ------------------------------------------------------------------------------ charts
finite = st.floats(min_value=0, max_value=1e12, allow_nan=False)


@settings(max_examples=60)
@given(st.lists(st.text(max_size=8), min_size=1, max_size=30),
       st.lists(st.lists(st.one_of(finite, st.just(float("nan")), st.just(-5.0)),
                         min_size=30, max_size=30), min_size=1, max_size=4),
       st.sampled_from(["line", "bar"]))  # fmt: skip
def test_every_drawn_point_is_inside_the_frame(
    labels: list[str], values: list[list[float]], kind: str
) -> None:
    series = [charts.Series(f"s{i}", v) for i, v in enumerate(values)]
    chart = charts.Chart("k", "t", kind, labels, series, (), [])  # type: ignore[arg-type]
    drawing = charts.draw(chart)
    for line in drawing.lines:
        for point in line.points.split():
            x, y = (float(n) for n in point.split(","))
            assert 0 <= x <= charts.WIDTH and charts.TOP <= y <= charts.HEIGHT - charts.BOTTOM
    for bar in drawing.bars:
        assert bar.height >= 0 and bar.y >= charts.TOP
        assert bar.y + bar.height <= charts.HEIGHT - charts.BOTTOM + 0.01
        assert charts.LEFT <= bar.x <= charts.WIDTH - charts.RIGHT
    assert len(drawing.x_ticks) <= charts.MAX_X_LABELS


def test_the_tallest_value_reaches_the_top_tick() -> None:
    chart = charts.Chart("k", "t", "bar", ["a", "b"], [charts.Series("s", [50.0, 100.0])], (), [])
    drawing = charts.draw(chart)
    assert [t.text for t in drawing.y_ticks] == ["0", "25", "50", "75", "100"]
    assert drawing.bars[1].y == charts.TOP and drawing.bars[0].height == drawing.bars[1].height / 2
    assert charts.draw(charts.Chart("k", "t", "bar", [], [], (), [])).empty


def test_csv_quotes_what_a_spreadsheet_would_run() -> None:
    chart = charts.Chart("k", "t", "bar", [], [], ("tool", "calls"),
                         [("=HYPERLINK(1)", 3), ("-2+3", None), ("plain, text", 1.5)])  # fmt: skip
    assert chart.csv().splitlines() == [
        "tool,calls",
        "'=HYPERLINK(1),3",
        "'-2+3,",
        '"plain, text",1.5',
    ]


def test_reports_keep_every_number_in_their_tables() -> None:
    from mindstore.analytics.rows import ToolRow, UsageRow

    usage = [
        UsageRow(period="2026-10-01", model="a", tokens_in=5, tokens_out=1, cost=0.25),
        UsageRow(period="2026-10-02", model="b", tokens_in=7, tokens_out=0, cost=1.0),
    ]
    tokens = reports.tokens(usage)
    assert tokens.labels == ["2026-10-01", "2026-10-02"]
    assert [(s.name, s.values) for s in tokens.series] == [("a", [6.0, 0.0]), ("b", [0.0, 7.0])]
    assert reports.cost(usage).table == [("2026-10-01", "a", 0.25, 0), ("2026-10-02", "b", 1.0, 0)]
    tools = reports.tools([ToolRow(tool="x", calls=4, results=4, errors=1, error_rate=0.25)])
    assert tools.table == [("x", 4, 4, 1, 0.25)] and tools.series[1].values == [1.0]


# ------------------------------------------------------------------------------ CLI
def test_the_command_names_the_extra_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as in an install without the extra
    result = runner.invoke(cli, ["console"])
    assert result.exit_code == 40
    assert "pip install 'mindstore[console]'" in result.output


def test_the_command_refuses_a_remote_host_without_allow_remote(tmp_path: Path) -> None:
    result = runner.invoke(cli, ["console", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "--allow-remote" in result.output
    missing = runner.invoke(cli, ["console", "--operators", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "--operators" in missing.output
    broken = tmp_path / "ops.json"
    broken.write_text('[{"name": "x", "token": "short", "tenants": "*"}]')
    result = runner.invoke(cli, ["console", "--operators", str(broken)])
    assert result.exit_code == 40 and "at least 16" in result.output


async def test_mindstore_console_serves_the_store_it_is_given(tmp_path: Path, store: Store) -> None:
    data, ops = tmp_path / "demo.json.gz", tmp_path / "ops.json"
    ops.write_text(json.dumps([{"name": "t0", "token": TOKEN, "tenants": ["tenant-0"]}]))
    await load(store, generate(SPEC))
    await save_snapshot(store.database, data)
    command = [sys.executable, "-m", "mindstore", "--data", str(data)]
    port = free_port()
    served = await asyncio.create_subprocess_exec(
        *command, "console", "--port", str(port), "--operators", str(ops),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/"
        async with httpx.AsyncClient() as client:
            for _ in range(400):
                try:
                    response = await client.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("the console did not start")
            assert response.status_code == 200
            assert "/t/tenant-0/" in response.text and "/t/tenant-1/" not in response.text
            assert (await client.get(url)).status_code == 303
    finally:
        served.send_signal(signal.SIGINT)
        await asyncio.wait_for(served.wait(), 30)


def free_port() -> int:
    from console_support import free_port as port

    return port()


def test_every_console_module_has_a_docstring() -> None:
    from mindstore import console as package

    folder = Path(package.__file__).parent
    for path in folder.glob("*.py"):
        assert path.read_text().lstrip().startswith('"""'), path
    assert os.path.isfile(folder / "static" / "feed.js")


def test_a_line_of_one_period_is_drawn_as_a_dot() -> None:
    series = [charts.Series("a", [5.0]), charts.Series("b", [10.0])]
    drawing = charts.draw(charts.Chart("k", "t", "line", ["2026-10-01"], series, (), []))
    middle = charts.TOP + (charts.HEIGHT - charts.TOP - charts.BOTTOM) / 2
    assert [d.y for d in drawing.dots] == [middle, charts.TOP]
    assert all(charts.LEFT <= d.x <= charts.WIDTH - charts.RIGHT for d in drawing.dots)
    two = charts.Chart("k", "t", "line", ["a", "b"], [charts.Series("a", [1.0, 2.0])], (), [])
    assert charts.draw(two).dots == []


def test_a_chart_over_time_spaces_its_points_by_time() -> None:
    from mindstore.console.reports import period_start

    assert period_start("2026-W41") == period_start("2026-10-05")
    assert period_start("2026-10") == period_start("2026-10-01")
    assert period_start("(none)") is None and period_start("2026-W99") is None
    labels = ["2026-W41", "2026-W42", "2026-W50"]  # seven weeks missing before the last
    times = [period_start(label) or 0.0 for label in labels]
    chart = charts.Chart("k", "t", "line", labels, [charts.Series("a", [1.0, 2.0, 3.0])], (), [],
                         times=times)  # fmt: skip
    xs = [float(p.split(",")[0]) for p in charts.draw(chart).lines[0].points.split()]
    assert xs == sorted(xs) and round((xs[2] - xs[1]) / (xs[1] - xs[0])) == 8
    assert xs[0] >= charts.LEFT and xs[-1] <= charts.WIDTH - charts.RIGHT
