"""Whatever an agent, an upstream or a log's author wrote, every command that prints it shows it as data.

Random strings of control characters (C0, C1, DEL, ESC sequences: OSC 0 title, CSI clear, OSC 8 link, OSC 52
clipboard), bidi and other format characters, rich markup, emoji codes and mathtext go into a log as the
run id, task id, agent, model, LLM reply, tool arguments and result, answer, failure mode, verdict outcome,
stop reason and error text (tests/cli/hostile.py). Each command then exits 0, prints no hidden character
(fae.util.visible), and shows each value it prints as it is stored, with the documented escaping: hidden
characters as JSON escapes; the timeline on one line, whitespace folded, long values cut with "…".
The synthetic log is written once for the module; each example copies it and adds the two hostile runs.
"""

from __future__ import annotations

import html
import itertools
import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fae.cli import app
from fae.util.visible import hidden, visible
from tests.cli import hostile

runner = CliRunner()

FRAGMENTS = [
    "[/bogus]",
    "[link=https://e.x]",
    "[/link]",
    "[bold red]",
    "[/]",
    ":smile:",
    "$a_b$",
    "$\\frac{$",
    "$^$",
    "\x1b[2J",  # CSI: clear the screen
    "\x1b]0;t\x07",  # OSC 0: the window title
    "\x1b]8;;u\x1b\\",  # OSC 8: a hyperlink
    "\x1b]52;c;YQ\x07",  # OSC 52: write the clipboard
    "\x9b2J",  # C1 CSI
    "\r",
    "\x00",
    "\x7f",
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u200d",
    "\u2028",
    "\U000e0041",
    "\n",
    "\t",
    " ",
    "\\",
    '"',
]
HOSTILE = (
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.characters(codec=None, exclude_categories=("Cs",))),
        min_size=1,
        max_size=5,
    )
    .map("".join)
    .filter(lambda text: len(visible(text)) <= 24)  # short enough for every table to show it whole
)
ISSUE = ("[/bogus]\x1b]0;t\x07", "$\\frac{$\u202e\x1b[2J", "[link=https://e.x]x[/link]\n\x9b2J")
"""The strings of issue 33, tried first by every test: markup that crashed fae stats, a title and a clear-screen
sequence, mathtext that stopped fae report, a bidi override, a link, a newline and a C1 control."""


def _hostile(examples: int):
    """The test runs on the issue's strings, then on ``examples`` drawn ones (the same on every run)."""

    def decorate(test):
        for text in ISSUE:
            test = example(text=text)(test)
        return settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,  # a failure here is reproducible, never flaky
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )(given(text=HOSTILE)(test))

    return decorate


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    hostile.base(folder / "base.duckdb")
    return folder


_names = itertools.count()


def _log(folder: Path, text: str) -> tuple[Path, dict[str, str]]:
    path = folder / f"h{next(_names)}.duckdb"
    return path, hostile.with_values(folder / "base.duckdb", path, text)


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, f"fae {' '.join(map(repr, args))} exited {result.exit_code}:\n{result.output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    _no_hidden(result.output)
    return result.output


def _no_hidden(output: str) -> None:
    found = sorted({repr(char) for char in output if hidden(char) and char != "\n"})
    assert not found, f"hidden characters reached the output: {found}\n{output}"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _shows(output: str, values: dict[str, str], *tags: str) -> None:
    """Each tagged value is in the output as ``visible`` shows it (each of its lines, whitespace folded)."""
    flat = _flat(output)
    for tag in tags:
        for part in visible(values[tag]).split("\n"):
            assert _flat(part) in flat, f"{hostile.TAGS[tag]} {values[tag]!r} is not shown as {part!r}:\n{output}"


def _cut(value: str, limit: int) -> str:
    """What the timeline shows of a long value (docs/log.md): one line, cut at ``limit`` characters with "…"."""
    text = _flat(visible(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cleanup(path: Path) -> None:
    for stale in (path, path.with_name(path.name + ".wal")):
        stale.unlink(missing_ok=True)


@_hostile(8)
def test_show_prints_a_timeline_of_hostile_values_as_text(folder, text):
    log, values = _log(folder, text)
    try:
        timeline = _run("show", values["run"], "--log", str(log))
        _shows(timeline, values, "run", "t", "a", "m", "c", "o", "x", "f", "v")
        arguments = json.dumps({"note": values["g"], "resourceType": values["r"]}, sort_keys=True)
        assert _cut(arguments, 70) in _flat(timeline), timeline
        failed = _run("show", values["err"], "--log", str(log))
        _shows(failed, values, "err", "t", "a", "e")
        lines = timeline.splitlines()
        verdicts = [index for index, shown in enumerate(lines) if shown.startswith("verdict ")]
        assert verdicts[0] + len(verdicts) == 10, "one line per event and verdict, whatever a value holds"
        reasons = [shown for index, shown in enumerate(lines) if index > verdicts[0] and index not in verdicts]
        assert reasons and set(reasons) == {"    no reason in its evidence"}, "a failed verdict with empty evidence"
    finally:
        _cleanup(log)


@_hostile(6)
def test_runs_and_sql_print_tables_of_hostile_values_as_text(folder, text):
    log, values = _log(folder, text)
    try:
        _shows(_run("runs", "--log", str(log)), values, "run", "t", "a", "s", "err")
        query = "SELECT run_id, task_id, agent, stop_reason, error FROM runs ORDER BY started_at DESC LIMIT 2"
        _shows(_run("sql", query, "--log", str(log)), values, "run", "t", "a", "s", "err", "e")
        lines = _run("sql", "--json", query, "--log", str(log)).splitlines()
        assert [json.loads(line) for line in lines] == [
            {
                "run_id": values["err"],
                "task_id": values["t"],
                "agent": values["a"],
                "stop_reason": values["s"],
                "error": values["e"],
            },
            {
                "run_id": values["run"],
                "task_id": values["t"],
                "agent": values["a"],
                "stop_reason": "answered",
                "error": None,
            },
        ]  # JSON lines carry each value exactly
    finally:
        _cleanup(log)


@_hostile(5)
def test_stats_prints_hostile_configurations_resource_types_and_failure_modes_as_text(folder, text):
    log, values = _log(folder, text)
    try:
        _shows(_run("stats", "--log", str(log)), values, "a", "r", "f")
        csv = _run("stats", "--csv", "--table", "failure_modes", "--log", str(log))
        assert visible(values["f"]).replace('"', '""') in csv
    finally:
        _cleanup(log)


@_hostile(5)
def test_compare_and_rejudge_print_hostile_runs_agents_and_outcomes_as_text(folder, text):
    log, values = _log(folder, text)
    try:
        compared = _run(
            "compare",
            "--judge",
            "ensure_record",
            "--old",
            "",
            "--new",
            "accept_corrections=false",
            "--workers",
            "1",
            "--log",
            str(log),
        )
        _shows(compared, values, "run", "a", "v")
        _run("rejudge", "--workers", "1", "--log", str(log))
    finally:
        _cleanup(log)


@_hostile(2)
def test_report_draws_and_escapes_hostile_labels(folder, text):
    log, values = _log(folder, text)
    page = log.with_suffix(".html")
    try:
        _run("report", "--log", str(log), "--output", str(page))
        written = page.read_text(encoding="utf-8")
        _no_hidden(written)
        for tag in ("a", "r", "f"):
            assert html.escape(visible(values[tag])) in written, f"{hostile.TAGS[tag]} {values[tag]!r}"
        figures = re.findall(r"<svg\b.*?</svg>", written, re.S)
        assert len(figures) >= 8, "every figure drawn, labels and all"
        for figure in figures:
            ElementTree.fromstring(figure)  # well-formed XML: no control character in a label
    finally:
        _cleanup(log)
        page.unlink(missing_ok=True)
