"""Progress on stderr for every long command: a bar at a terminal, quiet elsewhere (a periodic line only for the
commands that run agents), and each long library call tells its steps (report, stats, export, merge, replay)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from fae.cli import progress
from fae.cli.console import Screen
from fae.report.commands import study
from fae.store.export import TABLES, export_parquet
from fae.store.merge import merge_logs
from tests.report.synthetic import build

sys.path.insert(0, str(Path(__file__).parents[1] / "store"))

from logs import finished_run, write_log


def _stderr(monkeypatch, terminal: bool) -> io.StringIO:
    buffer = io.StringIO()
    monkeypatch.setattr(progress, "err", Screen(file=buffer, width=120, force_terminal=terminal, stderr=True))
    return buffer


def test_off_a_terminal_progress_is_quiet_unless_the_command_runs_agents(monkeypatch):
    quiet = _stderr(monkeypatch, terminal=False)
    with progress.steps("exporting") as on_step:
        for done in range(4):
            on_step(done, 3, f"table {done}")
    with progress.progress("rejudging", 3) as step:
        step(3)
    assert quiet.getvalue() == ""
    lines = _stderr(monkeypatch, terminal=False)
    with progress.progress("recording", 2, lines=True) as step:
        step(1, "run-a: finished")
        step(1, "run-b: finished")
    assert lines.getvalue().splitlines() == ["recording: 0/2", "recording: 2/2 (100%) run-b: finished"]


def test_at_a_terminal_steps_show_a_bar_with_the_step_under_way(monkeypatch):
    shown = _stderr(monkeypatch, terminal=True)
    with progress.steps("merging") as on_step:
        on_step(0, 2, "shard-a.duckdb")
        on_step(1, 2, "shard-b.duckdb")
        on_step(2, 2, "shard-\x1b[2Jc.duckdb")  # the bar shows the last step told (it refreshes a few times a second)
    printed = shown.getvalue()
    assert "merging" in printed and "2/2" in printed and "shard-\\u001b[2Jc.duckdb" in printed, printed
    assert "\x1b[2J" not in printed, "a step's name is data: its controls are escaped"


def _told() -> tuple[list[tuple[int, int, str]], object]:
    calls: list[tuple[int, int, str]] = []
    return calls, lambda done, total, name: calls.append((done, total, name))


def _finished_in_order(calls: list[tuple[int, int, str]]) -> None:
    assert calls, "no step was told"
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls)
    assert len({total for _, total, _ in calls}) == 1, calls


def test_stats_tells_each_table_as_it_starts(tmp_path):
    log = build(tmp_path / "study.duckdb")
    calls, on_step = _told()
    found = study(log, on_step=on_step)
    _finished_in_order(calls)
    assert calls[0][2] == "overview" and {name for *_, name in calls} >= set(found.tables)


def test_export_and_merge_tell_each_table_and_shard(tmp_path):
    shard_a = write_log(tmp_path / "a.duckdb", finished_run("r1"))
    shard_b = write_log(tmp_path / "b.duckdb", finished_run("r2"))
    calls, on_step = _told()
    merge_logs([shard_a, shard_b], tmp_path / "all.duckdb", on_step=on_step)
    assert calls == [(0, 2, "a.duckdb"), (1, 2, "b.duckdb"), (2, 2, "merged")]
    calls, on_step = _told()
    export_parquet(tmp_path / "all.duckdb", tmp_path / "pq", on_step=on_step)
    _finished_in_order(calls)
    assert [name for *_, name in calls] == [*TABLES, "bodies", "written"] and calls[-1][0] == calls[-1][1]


@pytest.mark.parametrize("command", [["export", "--parquet", "PQ"], ["stats"]])
def test_a_long_command_writes_nothing_on_stderr_when_it_is_not_a_terminal(tmp_path, command):
    log = build(tmp_path / "study.duckdb")
    words = [str(tmp_path / "pq") if word == "PQ" else word for word in command]
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", *words, "--log", str(log)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
