"""The output layer: markup and emoji codes in data are text, hidden characters are escapes, and every printing
path of fae/cli, fae/report and fae/harness goes through it."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
from rich.table import Table

import fae
from fae.cli import console, progress
from fae.cli.console import Screen, error_line, print_rows
from fae.util.visible import hidden

HOSTILE = "[/bogus][link=https://evil.example]click[/link] :smile: [bold]b[/bold] \x1b]0;title\x07\x1b[2J\u202eevil"
SHOWN = (
    "[/bogus][link=https://evil.example]click[/link] :smile: [bold]b[/bold] \\u001b]0;title\\u0007\\u001b[2J\\u202eevil"
)


def _screen(**options) -> tuple[Screen, io.StringIO]:
    buffer = io.StringIO()
    return Screen(file=buffer, width=200, **options), buffer


def test_a_printed_string_is_shown_as_it_is_stored_with_its_controls_escaped():
    screen, buffer = _screen()
    screen.print(HOSTILE)
    screen.print(HOSTILE, markup=True, emoji=True)  # a caller cannot turn markup back on for data
    assert buffer.getvalue() == f"{SHOWN}\n{SHOWN}\n"


def test_on_a_terminal_only_fae_own_styles_are_escape_sequences():
    screen, buffer = _screen(force_terminal=True, color_system="standard")
    screen.print(HOSTILE)
    printed = buffer.getvalue()
    assert SHOWN in printed and "\x1b]" not in printed and "\x07" not in printed and "\u202e" not in printed


def test_table_cells_titles_and_captions_are_data():
    screen, buffer = _screen()
    shown = Table(title=HOSTILE, caption=HOSTILE)
    shown.add_column(HOSTILE)
    shown.add_row(HOSTILE)
    screen.print(shown)
    assert buffer.getvalue().count(SHOWN) == 4
    assert not any(hidden(char) for char in buffer.getvalue() if char != "\n")


def test_print_rows_and_error_lines(capsys):
    print_rows(["run_id", "answer"], [["r1", HOSTILE], ["r2", None]], title=HOSTILE)
    error_line(HOSTILE)
    printed = capsys.readouterr()
    assert printed.out.count(SHOWN) == 2 and "r2" in printed.out
    assert printed.err == f"error: {SHOWN}\n"


def test_json_written_through_the_layer_stays_json_with_the_same_values(capsys):
    import json

    console.echo(json.dumps({"answer": HOSTILE}, ensure_ascii=False))
    written = capsys.readouterr().out
    assert not any(hidden(char) for char in written if char != "\n")
    assert json.loads(written) == {"answer": HOSTILE}


def test_a_progress_bar_shows_a_run_id_as_text(monkeypatch):
    """The bar's last-run column is data (a run id); markup off and controls escaped there too."""
    screen, buffer = _screen(force_terminal=True, stderr=True)
    monkeypatch.setattr(progress, "err", screen)  # a real console on a buffer, as a terminal: the bar path
    with progress.progress("recording", 1) as step:
        step(1, HOSTILE)
    printed = buffer.getvalue()
    assert "\\u001b]0;title" in printed and "[link=https://evil.example]" in printed and "\x1b]0" not in printed


ROOT = Path(fae.__file__).parent
LAYER = ROOT / "cli" / "console.py"
# a pipe to fae's own parent process, not a person: the child's JSON handshake and the drawing child's pickle
PIPES = {ROOT / "harness" / "upstream_process.py", ROOT / "report" / "drawing.py"}


def _printing(path: Path, root: Path = ROOT.parent) -> list[str]:
    """Each call in ``path`` that prints around the output layer: print, typer/click echo, a console made here,
    a write to stdout or stderr, markup parsed or turned on."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if (
            name in ("print", "typer.echo", "click.echo", "Console", "Text.from_markup", "render_markup")
            or name.endswith(("stdout.write", "stderr.write", "stdout.buffer.write"))
            or any(k.arg == "markup" and ast.unparse(k.value) == "True" for k in node.keywords)
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
    return found


def test_nothing_prints_around_the_output_layer():
    problems = [
        problem
        for package in ("cli", "report", "harness")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != LAYER and path not in PIPES
        for problem in _printing(path)
    ]
    assert not problems, "printing that skips fae/cli/console.py:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        "print(x)\n",
        "import typer\ntyper.echo(x)\n",
        "from rich.console import Console\nConsole().print(x)\n",
        "import sys\nsys.stdout.write(x)\n",
        "out.print(x, markup=True)\n",
    ],
)
def test_the_check_sees_each_way_around(tmp_path, source):
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert _printing(path, tmp_path)
