"""`fae runs` as lines: readable from 100 columns up, an id never wrapped, a why line under a run that did not pass."""

from __future__ import annotations

from fae.cli.runs import runs_lines
from fae.util.visible import hidden

LONG = "sched-book-appointment.v12.langchain-memory-spec-specs-openai-gpt-4-1-mini.r3"


def _row(run: str, strict: str = "pass", why: str = "") -> dict:
    return {
        "run": run,
        "task": run.split(".")[0],
        "agent": "langchain:memory-spec+specs@openai/gpt-4.1-mini",
        "status": "finished",
        "stop": "answered",
        "strict": strict,
        "failure mode": "none" if strict == "pass" else "incorrect_tool_selection",
        "tools": 7,
        "llm": 8,
        "tokens": 31207,
        "why": why,
    }


ROWS = [
    _row("rec-create-patient.v0.gold.r0"),
    _row(LONG, "fail", "<SLOT> must hold exactly one id, slot-0218c3; says ['wrong-f6421926'] " + "x" * 300),
]


def test_at_200_columns_the_ids_and_verdicts_show_whole_and_no_line_is_wider():
    lines = runs_lines(ROWS, 200)
    assert all(len(line) <= 200 for line in lines), [len(line) for line in lines]
    assert lines[0].split()[:4] == ["run", "task", "agent", "status"] and "strict" in lines[0], lines[0]
    assert "failure mode" in lines[0] and "incorrect_tool_selection" in "".join(lines)
    wide = runs_lines(ROWS, 260)[0].split()
    assert wide == ["run", "task", "agent", "status", "stop", "strict", "failure", "mode", "tools", "llm", "tokens"]
    assert any(line.startswith(LONG + " ") for line in lines), "the run id whole"
    why = lines[lines.index(next(line for line in lines if line.startswith(LONG))) + 1]
    assert why.startswith("    <SLOT> must hold exactly one id") and why.endswith("…") and len(why) <= 200


def test_at_100_columns_columns_give_way_and_a_long_run_id_is_cut_in_its_middle():
    lines = runs_lines(ROWS, 100)
    assert all(len(line) <= 100 for line in lines), lines
    header = lines[0].split()
    assert header[:1] == ["run"] and "strict" in header and "failure" in header and "llm" not in header, header
    row = next(line for line in lines if line.startswith("sched-"))
    assert "…" in row.split()[0] and row.split()[0].endswith(".r3"), "both ends of the id kept"
    assert "rec-create-patient.v0.gold.r0" in lines[2], "a short id stays whole"
    assert lines[lines.index(row) + 1].startswith("    <SLOT> must hold"), "why under its run"
    assert sum(1 for line in lines if line.startswith("    ")) == 1, "no why under a run that passed"


def test_values_are_shown_on_one_line_with_hidden_characters_escaped():
    hostile = _row("run-\x1b]0;t\x07", "fail", "why\nsecond line \u202e")
    lines = runs_lines([hostile], 200)
    assert not any(hidden(char) for line in lines for char in line)
    assert lines[2].startswith("run-\\u001b]0;t\\u0007") and lines[3] == "    why second line \\u202e"
