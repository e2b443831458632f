"""Findings kept in the log (fae/judge/facts.py): live judging keeps what ensure_record found of each run, a rejudge
under new rules decides from them without reading the run, and gives exactly the verdicts read from the events."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.judge import rejudge as rejudge_module
from fae.judge.context import RunContext
from fae.judge.facts import MAX_FACTS_CHARS
from fae.judge.judging import judges_to_run
from fae.judge.registry import CODE_VERSION
from fae.judge.rejudge import rejudge
from fae.replay.source import load_runs
from fae.store.log import EventLog

runner = CliRunner()

RULE_CHANGES = [
    {"accept_corrections": False},
    {"settle_s": 0.0},
    {"settle_s": 3.0},
    {"accept_corrections": False, "settle_s": 2.0},
]
"""The rule changes a kept finding must decide as the events do: corrections refused, settle rules loosened and
tightened (the scenario log has corrections that settled, ones that did not, and reads between)."""


def _copy(log, tmp_path, name: str):
    path = tmp_path / f"{name}.duckdb"
    shutil.copy(log, path)
    return path


def _batch(log, batch: str) -> dict[tuple[str, str, str], tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, judge, rule_set_hash, outcome, passed, CAST(evidence AS VARCHAR) FROM verdicts"
            " WHERE batch = ?",
            [batch],
        )
    return {(r, j, h): (o, p, json.loads(e)) for r, j, h, o, p, e in rows}


def _judged_runs(log) -> list[str]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT run_id FROM runs WHERE status IN ('finished', 'errored') ORDER BY 1")
    return [r for (r,) in rows]


def _facts(log) -> dict[str, str]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, facts FROM judge_facts WHERE judge = 'ensure_record' AND inputs = 'evidence=proxy'"
            " AND code_version = ?",
            [CODE_VERSION],
        )
    return dict(rows)


def test_live_judging_keeps_what_ensure_record_found_of_each_run(scenario_log):
    runs = _judged_runs(scenario_log)
    found = _facts(scenario_log)
    assert sorted(found) == runs and len(runs) > 20
    [judging] = judges_to_run("ensure_record")
    assert judging.finding is not None
    with EventLog(scenario_log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, outcome, passed, CAST(evidence AS VARCHAR) FROM verdicts"
            " WHERE judge = 'ensure_record' AND batch = 'live'"
        )
    live = {r: (o, p, json.loads(e)) for r, o, p, e in rows}
    outcomes = set()
    for run_id, text in found.items():
        verdict = judging.finding.decide(text)
        assert (verdict.outcome, verdict.passed, verdict.evidence) == live[run_id], run_id
        outcomes.add(verdict.outcome)
    assert {"created_verified", "needs_review"} <= outcomes  # the findings are not all alike


@pytest.mark.parametrize("change", RULE_CHANGES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_a_rejudge_from_kept_findings_gives_the_verdicts_read_from_events(scenario_log, tmp_path, change):
    kept, read = _copy(scenario_log, tmp_path, "kept"), _copy(scenario_log, tmp_path, "read")
    runs = _judged_runs(kept)
    # every default judge with the change: only ensure_record's rule set differs, the others' verdicts stand
    from_kept = rejudge(kept, overrides=change, workers=1)
    from_events = rejudge(read, overrides=change, workers=1, from_events=True)
    assert (from_kept.runs, from_kept.from_facts) == (len(runs), len(runs)), "every run decided without reading it"
    assert (from_events.runs, from_events.from_facts) == (len(runs), 0)
    mine, theirs = _batch(kept, from_kept.batch), _batch(read, from_events.batch)
    assert {judge for _, judge, _ in mine} == {"ensure_record"} and len(mine) == len(runs)
    assert mine == theirs
    # and both are what the registered judge's own function says of each loaded run, rules applied to it
    [judging] = judges_to_run("ensure_record", change)
    with EventLog(read, read_only=True) as opened:
        direct = {
            (run.run_id, judging.name, judging.rules_hash): judging.fn(RunContext(run))
            for run in load_runs(opened, runs, lean=True)
        }
    assert mine == {key: (v.outcome, v.passed, json.loads(json.dumps(v.evidence))) for key, v in direct.items()}
    flipped = {key for key, (outcome, *_) in mine.items() if outcome == "needs_review"}
    assert flipped, "the change must change something, or identical verdicts prove little"


def test_a_rejudge_planned_a_few_runs_at_a_time_is_the_rejudge_planned_at_once(scenario_log, tmp_path, monkeypatch):
    """Planning reads standing verdicts and kept findings a window of runs at a time: with windows of 3 runs, the
    same runs are decided from findings or read, the same verdicts stand and the same verdicts are written."""
    logs = {name: _copy(scenario_log, tmp_path, name) for name in ("whole", "windowed")}
    runs = _judged_runs(logs["whole"])
    for log in logs.values():  # some runs without findings: they are read from their events, in any window
        with EventLog(log) as opened:
            opened.con.execute("DELETE FROM judge_facts WHERE run_id IN (SELECT unnest(?))", [runs[::4]])
    change = {"accept_corrections": False}
    whole = rejudge(logs["whole"], overrides=change, workers=1)
    monkeypatch.setattr(rejudge_module, "PLAN_WINDOW", 3)
    windowed = rejudge(logs["windowed"], overrides=change, workers=1)
    assert len(runs) > 10 and 0 < whole.from_facts < whole.runs, whole
    assert (windowed.runs, windowed.from_facts, windowed.considered) == (whole.runs, whole.from_facts, whole.considered)
    assert windowed.stood == whole.stood and windowed.outcomes == whole.outcomes
    stood = {judge: n for (judge, _), n in whole.stood.items()}
    assert stood.pop("ensure_record") == 0 and set(stood.values()) == {len(runs)}, whole.stood  # every window counted
    assert _batch(logs["windowed"], windowed.batch) == _batch(logs["whole"], whole.batch)


def test_a_judge_whose_findings_are_not_kept_reads_the_runs_and_keeps_them(scenario_log, tmp_path):
    """evidence=trail is found from another trail: none kept at first, so the runs are read, and their findings
    kept; the next rule change on that trail decides from them."""
    log = _copy(scenario_log, tmp_path, "trail")
    first = rejudge(log, judge_name="ensure_record", overrides={"evidence": "trail"}, workers=1)
    assert first.from_facts == 0 and first.runs > 20
    second = rejudge(
        log, judge_name="ensure_record", overrides={"evidence": "trail", "accept_corrections": False}, workers=1
    )
    assert second.from_facts == second.runs == first.runs
    read = rejudge(
        _copy(log, tmp_path, "trail-read"),
        judge_name="ensure_record",
        overrides={"evidence": "trail", "accept_corrections": False},
        workers=1,
        from_events=True,
        full=True,
    )
    assert _batch(log, second.batch) == _batch(tmp_path / "trail-read.duckdb", read.batch)


def test_findings_that_cannot_be_read_send_their_run_to_its_events(scenario_log, tmp_path):
    """Damaged findings (of another shape, naming no target, too long) are not trusted to decide: their runs
    are read, and the verdicts are those read from events for every run."""
    log, read = _copy(scenario_log, tmp_path, "damaged"), _copy(scenario_log, tmp_path, "damaged-read")
    runs = _judged_runs(log)
    damaged = {
        runs[0]: '{"targets": 5}',
        runs[1]: "[]",
        runs[2]: '{"targets": [], "creates": []}',
        runs[3]: '{"targets": [{"evidence": {}, "unknown": 1}], "creates": [true]}',
        runs[4]: json.dumps({"not_applicable": "x" * (MAX_FACTS_CHARS + 1)}),
    }
    with EventLog(log) as opened:
        for run_id, text in damaged.items():
            opened.con.execute("UPDATE judge_facts SET facts = ? WHERE run_id = ?", [text, run_id])
    change = {"accept_corrections": False}
    mine = rejudge(log, judge_name="ensure_record", overrides=change, workers=1)
    theirs = rejudge(read, judge_name="ensure_record", overrides=change, workers=1, from_events=True)
    assert mine.from_facts == len(runs) - len(damaged)
    assert _batch(log, mine.batch) == _batch(read, theirs.batch)


def test_from_events_is_not_fooled_by_forged_findings(scenario_log, tmp_path):
    """Findings are trusted as the log's standing verdicts are: whoever writes the log can forge them. A run that
    wrote wrong values given the findings of one that wrote right is verified from the findings, and not from
    its events."""
    log = _copy(scenario_log, tmp_path, "forged")
    found = _facts(log)
    wrong, right = (next(r for r in found if r.endswith(f".{name}")) for name in ("wrong-never-fixed", "writes-right"))
    with EventLog(log) as opened:
        opened.con.execute("UPDATE judge_facts SET facts = ? WHERE run_id = ?", [found[right], wrong])
    change = {"settle_s": 2.0}
    trusted = rejudge(log, judge_name="ensure_record", overrides=change, workers=1, runs=wrong)
    [(outcome, *_)] = _batch(log, trusted.batch).values()
    assert outcome == "created_verified"  # what the forged findings say
    done = runner.invoke(
        app,
        ["rejudge", "--log", str(log), "--judge", "ensure_record", "--rule", "settle_s=2", "--runs", wrong]
        + ["--from-events", "--full", "--workers", "1"],
    )
    assert done.exit_code == 0, done.output
    with EventLog(log, read_only=True) as opened:
        _, [(outcome,)] = opened.query(
            "SELECT outcome FROM verdicts WHERE run_id = ? AND judge = 'ensure_record' ORDER BY judged_at DESC,"
            " batch DESC LIMIT 1",
            [wrong],
        )
    assert outcome == "needs_review"
    assert "decided from the findings" not in done.output


def test_the_cli_says_how_many_runs_were_decided_without_reading_them(scenario_log, tmp_path):
    log = _copy(scenario_log, tmp_path, "cli")
    done = runner.invoke(app, ["rejudge", "--log", str(log), "--rule", "accept_corrections=false", "--workers", "1"])
    assert done.exit_code == 0, done.output
    runs = len(_judged_runs(log))
    assert f"{runs} of them decided from the findings the log keeps" in " ".join(done.output.split())


def test_compare_decides_from_kept_findings_without_reading_the_events(scenario_log, tmp_path):
    """With every event deleted, the comparison of a one-rule change is the intact log's: the old verdicts are the
    live ones, the new ones come from the findings the log keeps."""
    from fae import api

    intact, bare = _copy(scenario_log, tmp_path, "intact"), _copy(scenario_log, tmp_path, "bare")
    with EventLog(bare) as opened:
        opened.con.execute("DELETE FROM events")
    change = "accept_corrections=false"

    def table(log) -> list[tuple]:
        found = api.compare(log, "", change, judge_name="ensure_record", workers=1)
        return [(j.judge, sorted(j.flipped), sorted(map(repr, j.new.items()))) for j in found.judges]

    shown = table(intact)
    assert shown == table(bare)
    assert any(flipped for _, flipped, _ in shown), "the change flips runs, or the test shows little"


def test_findings_holding_a_lone_surrogate_are_kept_as_utf8():
    """A hostile body's ``"\\ud800"`` decodes to a lone surrogate, which neither msgspec's JSON nor DuckDB's takes:
    kept as U+FFFD, so the findings (and the verdict decided from them) can be written at all."""
    from fae.judge.ensure_record import RecordFacts, facts_text

    text = facts_text(RecordFacts(not_applicable=json.loads('"name \\ud800 end"')))
    assert json.loads(text) == {"not_applicable": "name \ufffd end"}
    [judging] = judges_to_run("ensure_record")
    assert judging.finding is not None
    assert judging.finding.decide(text).evidence == {"reason": "name \ufffd end"}
