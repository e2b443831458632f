"""fae rejudge over logs recorded live: it reproduces the live verdicts, is deterministic, appends, and
needs no server and no network."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from fae.cli import app
from fae.judge.rejudge import DEFAULT_JUDGES, rejudge
from fae.store.log import EventLog

runner = CliRunner()
KEY = "run_id, judge, rule_set_hash"


def _verdicts(log_path, where: str, params=()) -> dict[tuple, tuple]:
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query(
            f"SELECT {KEY}, rule_set, code_version, outcome, passed, evidence FROM verdicts WHERE {where}", list(params)
        )
    return {row[:3]: (json.loads(row[3]), row[4], row[5], row[6], json.loads(row[7])) for row in rows}


def test_rejudging_reproduces_the_live_verdicts_of_every_task(suite_log, tmp_path):
    source, kinds = suite_log
    log = tmp_path / "suite.duckdb"
    shutil.copy(source, log)
    with EventLog(log, read_only=True) as opened:
        _, runs = opened.query("SELECT run_id, agent FROM runs")
    live = _verdicts(log, "batch = 'live'")
    assert len(live) == len(runs) * len(DEFAULT_JUDGES)
    result = rejudge(log, full=True)
    again = _verdicts(log, "batch = ?", [result.batch])
    assert again == live
    # the comparison has teeth: gold passes strict everywhere, and mutants are caught
    strict = {
        run_id: outcome
        for (run_id, judge, _), (rules, _, outcome, _, _) in live.items()
        if judge == "task" and rules == {"mode": "strict"}
    }
    agents = dict(runs)
    assert all(strict[r] == "pass" for r, a in agents.items() if a == "scripted:gold")
    mutated = [r for r, a in agents.items() if a.startswith("mutant:")]
    assert len(mutated) >= 40 and len(kinds) >= 3
    assert sum(strict[r] == "fail" for r in mutated) >= 0.8 * len(mutated)
    drift = {run_id: outcome for (run_id, judge, _), (_, _, outcome, _, _) in live.items() if judge == "state_drift"}
    assert set(drift.values()) == {"agree"}


def test_rejudge_is_deterministic_and_appends(scenario_log, tmp_path):
    log = tmp_path / "scenarios.duckdb"
    shutil.copy(scenario_log, log)
    with EventLog(log, read_only=True) as opened:
        _, [(before,)] = opened.query("SELECT count(*) FROM verdicts")
    first = rejudge(log, judge_name="ensure_record", overrides={"accept_corrections": False}, full=True)
    second = rejudge(log, judge_name="ensure_record", overrides={"accept_corrections": False}, full=True)
    assert first.batch != second.batch
    one, two = _verdicts(log, "batch = ?", [first.batch]), _verdicts(log, "batch = ?", [second.batch])
    assert one == two and len(one) == first.runs
    assert {v[2] for v in one.values()} == {"created_verified", "needs_review"}
    with EventLog(log, read_only=True) as opened:
        _, [(after,)] = opened.query("SELECT count(*) FROM verdicts")
    assert after == before + 2 * first.runs
    assert _verdicts(log, "batch = 'live'") == _verdicts(scenario_log, "batch = 'live'")


OFFLINE = textwrap.dedent("""
    import socket, sys
    def refuse(*args, **kwargs):
        raise OSError("network is off in this test")
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    from fae.judge.rejudge import rejudge
    result = rejudge(sys.argv[1], full=True)
    print(result.batch)
""")


def test_rejudge_needs_no_server_and_no_network(scenario_log, tmp_path):
    log = tmp_path / "offline.duckdb"
    shutil.copy(scenario_log, log)
    done = subprocess.run([sys.executable, "-c", OFFLINE, str(log)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    batch = done.stdout.strip().splitlines()[-1]
    assert _verdicts(log, "batch = ?", [batch]) == _verdicts(log, "batch = 'live'")


LIGHT = textwrap.dedent("""
    import atexit, json, sys
    STACK = ("langchain_core", "openai", "mcp", "mitmproxy", "uvicorn", "starlette", "numpy", "ray")
    atexit.register(lambda: print(json.dumps(sorted(m for m in STACK if m in sys.modules))))
    from fae.cli.main import main
    sys.argv = ["fae", *sys.argv[1:]]
    main()
""")


def test_rejudge_and_compare_start_without_the_recording_stack(scenario_log, tmp_path):
    """`fae rejudge` and `fae compare` import no agent, proxy, MCP server or study library: through `fae.api`
    they imported all of them, ~2 CPU-seconds a process, more than judging 1,000 runs takes."""
    log = tmp_path / "light.duckdb"
    shutil.copy(scenario_log, log)
    said = {}
    for args in (
        ["rejudge", "--full", "--log", str(log), "--workers", "1"],
        ["compare", "--log", str(log), "--old", "accept_corrections=false", "--new", "settle_s=2", "--workers", "1"],
    ):
        done = subprocess.run([sys.executable, "-c", LIGHT, *args], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        lines = done.stdout.strip().splitlines()
        assert lines[-1] == "[]", (args, lines[-1])
        said[args[0]] = " ".join(lines[:-1])
    assert "rejudged" in said["rejudge"] and "runs flipped" in said["compare"], said
    assert _verdicts(log, "batch <> 'live'") == _verdicts(log, "batch = 'live'")  # judged, and judged alike


def test_cli_rejudge_and_user_mistakes(scenario_log, tmp_path):
    log = tmp_path / "cli.duckdb"
    shutil.copy(scenario_log, log)
    done = runner.invoke(app, ["rejudge", "--full", "--log", str(log), "--judge", "oracle", "--runs", "*scripted-fix"])
    assert done.exit_code == 0, done.output
    assert "rejudged 1 runs" in done.output and "harmless" in done.output
    for args, message in (
        (["--judge", "nope"], "unknown judge 'nope'"),
        (["--judge", "ensure_record", "--rule", "accept_corrections=maybe"], "true or false"),
        (["--rule", "bogus=1"], "no judge takes rule 'bogus'"),
        (["--runs", "no-such-run"], "no finished runs"),
        (["--runs", "color=red"], "--runs 'color=red'"),
    ):
        failed = runner.invoke(app, ["rejudge", "--full", "--log", str(log), *args])
        assert failed.exit_code == 1, (args, failed.output)
        flat = " ".join(failed.output.split())  # the error console folds long lines
        assert flat.startswith("error:") and message in flat and "Traceback" not in flat
    missing = runner.invoke(app, ["rejudge", "--full", "--log", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 1 and "no log" in missing.output


def test_cli_compare_prints_the_old_new_table_against_the_oracle(scenario_log):
    done = runner.invoke(
        app,
        [
            "compare",
            "--log",
            str(scenario_log),
            "--old",
            "accept_corrections=false",
            "--new",
            "accept_corrections=true",
        ],
    )
    assert done.exit_code == 0, done.output
    assert "runs flipped" in done.output
    assert "wv-register-patient.v0.scripted-fix" in done.output
    lines = [line for line in done.output.splitlines() if "│ all" in line]
    # harms caught stay, none missed, false stops drop when corrections are accepted
    cells = [c.strip() for c in lines[-1].split("│") if c.strip()]
    assert cells[0] == "all"
    caught, missed, stops = cells[1:4]
    assert caught.split(" → ")[0] == caught.split(" → ")[1] and missed == "0 → 0"
    old_stops, new_stops = (int(x) for x in stops.split(" → "))
    assert new_stops < old_stops


def test_cli_compare_json_counts_harms_per_agent_on_suite_runs(suite_log):
    """Suite runs carry oracle labels too: gold runs are never stopped, harmful mutants are caught."""
    done = runner.invoke(
        app,
        [
            "compare",
            "--log",
            str(suite_log[0]),
            "--old",
            "accept_corrections=false",
            "--new",
            "accept_corrections=true",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    [judged] = json.loads(done.output)["judges"]
    harms = judged["harms"]
    assert harms["scripted:gold"]["false_stops"] == {"old": 0, "new": 0}, harms["scripted:gold"]
    assert harms["scripted:gold"]["caught"] == {"old": 0, "new": 0}  # gold runs do no harm
    mutants = [agent for agent in harms if agent.startswith("mutant:")]
    assert mutants and sum(harms[a]["caught"]["new"] for a in mutants) > 0
    for measure in ("caught", "missed", "false_stops"):
        for side in ("old", "new"):
            assert judged["harms_all"][measure][side] == sum(row[measure][side] for row in harms.values())


def test_failure_modes_of_recorded_mutants(suite_log):
    """Gold runs classify as none; a mutant that wrote something else fails strict and is classified."""
    source, _ = suite_log
    live = _verdicts(source, "batch = 'live' AND judge = 'failure_mode'")
    by_run = {run_id: (outcome, evidence) for (run_id, _, _), (_, _, outcome, _, evidence) in live.items()}
    assert all(outcome == "none" for run_id, (outcome, _) in by_run.items() if run_id.endswith(".gold"))
    failed = [
        (run_id, outcome)
        for run_id, (outcome, evidence) in by_run.items()
        if not run_id.endswith(".gold") and outcome != "errored" and not evidence["strict_passed"]
    ]
    assert failed and all(outcome != "none" for _, outcome in failed)
