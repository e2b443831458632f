"""The run explorer's pages, built from a real log file: a run's page holds its timeline in time order, its
verdicts with their reasons and evidence and its state diff; a cell's link lists its runs; hostile log
strings stay text; the server answers its own address only."""

from __future__ import annotations

import threading
from html.parser import HTMLParser
from urllib.parse import quote

import httpx
import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.report.explorer.markup import SCRIPT
from fae.report.explorer.server import Explorer, port_of, serve
from fae.store.live import LogReader
from tests.report.explorer_log import ATTACK, HOSTILE_RUN, LINK, build_explorer_log

ORDER = ("RunStarted", "SandboxSeeded", "LlmCalled", "HttpExchanged", "ToolCalled", "AnswerGiven")
ORDER += ("StateCaptured", "RunFinished")


class Tags(HTMLParser):
    """Every element with its attributes, every script's text, and the page's text as a reader sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def parsed(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


@pytest.fixture(scope="module")
def explorer(tmp_path_factory) -> Explorer:
    log = build_explorer_log(tmp_path_factory.mktemp("explorer") / "explorer.duckdb")
    return Explorer(LogReader(log), "<p>index</p>", log.name)


def hostile_page(explorer: Explorer) -> str:
    status, page = explorer.answer("/run/" + quote(HOSTILE_RUN, safe=""))
    assert status == 200, page
    return page


def test_hostile_strings_in_every_part_of_a_run_page_stay_text(explorer):
    page = hostile_page(explorer)
    tags = parsed(page)
    assert tags.scripts == [SCRIPT], "a script other than the explorer's own is on the page"
    for tag, attrs in tags.tags:
        assert tag not in ("img", "b", "iframe", "object"), f"a log string became a <{tag}> element"
        assert not any(name.startswith("on") for name in attrs), f"<{tag}> has an event handler: {attrs}"
        link = attrs.get("href") or ""
        assert not link or link.startswith(("/", "#")), f"a link leaves fae's pages: {link!r}"
    shown = "".join(tags.text)
    # the answer, the LLM message, the tool's arguments, the exchange's body and fault, the state diff, the
    # verdict's evidence: each shows the attack as text (its bidi override spelled out)
    # (JSON shows it with its quotes escaped: the part before the first quote is the same everywhere)
    attack = ATTACK.split('"')[0]
    assert shown.count(attack) >= 8, shown
    assert "\u202e" not in page
    assert LINK in shown


def test_a_run_page_holds_its_timeline_in_time_order_its_verdicts_and_its_state_diff(explorer):
    page = hostile_page(explorer)
    shown = "".join(parsed(page).text)
    # the exchange started (3.5 s) before the tool call was logged (4 s) but came into the log after it
    kinds = [
        (attrs.get("class") or "").split()[0] for tag, attrs in parsed(page).tags if tag == "li" and attrs.get("id")
    ]
    assert kinds == [f"k-{kind}" for kind in ORDER], kinds
    assert "1 came into the log after one that started later" in shown
    assert "3.500 s" in shown
    # the verdict, its reason in words and its evidence
    assert "task" in shown and "fail" in shown and "evidence" in shown
    # the state diff: Observation/o1 added, Patient/gone removed, Patient/p1 changed, Patient/same only
    # stamped anew by the server (meta), so unchanged
    assert "3 resources seeded, 3 at the end: 1 added, 1 removed, 1 changed, 1 unchanged" in shown
    assert "+ Observation/o1" in shown and "− Patient/gone" in shown and "~ Patient/p1" in shown
    assert '-      "family": "Keep"' in shown


def test_a_cells_link_lists_exactly_its_runs_and_each_links_to_its_page(explorer):
    status, page = explorer.answer("/runs?configuration=A&task_id=T2&experiment=e&phase=eval")
    assert status == 200
    tags = parsed(page)
    runs = sorted(a["href"] or "" for tag, a in tags.tags if tag == "a" and (a.get("href") or "").startswith("/run/"))
    assert runs == sorted(f"/run/A.T2.v{v}.r{t}" for v in (0, 1) for t in range(3)), runs
    assert "6 runs" in "".join(tags.text)
    _, modes = explorer.answer("/runs?configuration=A&failure_mode=incorrect_order")
    assert modes.count('href="/run/') == 1 and 'href="/run/A.T1.v1.r1"' in modes, modes
    # a run id is percent-encoded whole in its link, so no id can end the path or start a query
    _, hostile = explorer.answer("/runs?configuration=A&task_id=T1&variation=0")
    encoded = "/run/" + quote(HOSTILE_RUN, safe="")
    assert f'href="{encoded}"' in hostile, hostile
    assert explorer.answer(encoded)[0] == 200
    # the runs that flip between two configurations: A failed where B passed on the same task, variation, trial
    _, flipped = explorer.answer("/runs?experiment=e&phase=eval&configuration=A&versus=B&strict=false")
    assert sorted(flipped.split('href="/run/')[1:][i].split('"')[0] for i in range(3)) == [
        "A.T1.v1.r1",
        "A.T2.v0.r0",
        "A.T2.v1.r1",
    ], flipped
    assert flipped.count('href="/run/') == 3
    _, none = explorer.answer("/runs?configuration=A&task_id=nothing%27%20OR%201=1")
    assert "0 runs" in none and 'href="/run/' not in none


def test_an_unknown_run_or_path_is_a_404_page_that_shows_the_id_as_text(explorer):
    status, page = explorer.answer("/run/" + quote("<script>x</script>", safe=""))
    assert status == 404 and "&lt;script&gt;x&lt;/script&gt;" in page and parsed(page).scripts == [SCRIPT]
    assert explorer.answer("/etc/passwd")[0] == 404


def test_the_server_answers_only_a_host_naming_its_own_address(explorer):
    server = serve(explorer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{port_of(server)}"
        answer = httpx.get(base + "/runs?configuration=B")
        assert answer.status_code == 200 and "script-src 'sha256-" in answer.headers["content-security-policy"]
        rebound = httpx.get(base + "/", headers={"Host": "evil.example:80"})
        assert rebound.status_code == 421
    finally:
        server.shutdown()
        server.server_close()


def test_the_report_links_each_cell_that_stands_for_runs_only_when_served(tmp_path):
    from fae.report.commands import report_page

    log = build_explorer_log(tmp_path / "explorer.duckdb")
    page = report_page(log)
    links = [a.get("href") or "" for tag, a in parsed(page).tags if tag == "a"]
    assert "/runs?configuration=A&task_id=T1" in links, "the grid's cell A × T1"
    assert "/runs?experiment=e&phase=eval&configuration=A&failure_mode=tool_error" in links, "a failure mode"
    assert "/runs?experiment=e&phase=eval&configuration=B&difficulty=2" in links, "a difficulty slice"
    flips = "/runs?experiment=e&amp;phase=eval&amp;configuration=A&amp;versus=B&amp;strict="
    assert f'href="{flips}false">3</a>' in page, "only_b: A failed where B passed, 3 times"
    assert f'href="{flips}true">0</a>' in page, "only_a: A passed where B failed, never"
    written = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", "--log", str(log), "-o", str(written)])
    assert result.exit_code == 0, result.output
    assert "/runs?" not in written.read_text(encoding="utf-8"), "a file opened from disk has no server to ask"


def test_fae_view_of_a_missing_log_is_one_line(tmp_path):
    result = CliRunner().invoke(app, ["view", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 1 and "no log at" in result.output and "Traceback" not in result.output
