"""ensure_record judged from a recorded AuditEvent trail (``fae record --audit-events``) against the
proxy log, on runs recorded through the real stack: what the trail catches, and what it cannot see."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import anyio
import pytest
from recording import record_runs, scenario_runs
from typer.testing import CliRunner

from fae.cli import app
from fae.judge.rejudge import judge_run, judges_to_run
from fae.judge.trail import audit_trail, recorded_audit_events
from fae.replay.drift import captured_resources
from fae.replay.source import load_run
from fae.store import events as ev
from fae.store.log import EventLog
from fae.tasks.scenarios import TASK_ID
from tests.run_report import why_not_finished

NOW = datetime(2025, 1, 1, tzinfo=UTC)
runner = CliRunner()
SCENARIOS = (
    "writes-right",
    "scripted-fix",
    "other-user-reads-while-wrong",
    "other-user-searches-while-wrong",
    "unrecorded-write-behind-fix",
    "delete-then-recreate",
    "other-user-batch-reads-while-wrong",
    "other-user-batch-searches-while-wrong",
    "acknowledged-create-lost-checked",
    "unrecorded-write-after-check",
)


def _run_id(scenario: str) -> str:
    return f"{TASK_ID}.v0.scenario-{scenario}.r0"


@pytest.fixture(scope="module")
def audited_log(tmp_path_factory):
    """The scenarios recorded by `fae record --audit-events`: the embedded server keeps a trail."""
    log = tmp_path_factory.mktemp("trail") / "audited.duckdb"
    agents = [arg for name in SCENARIOS for arg in ("--agent", f"scenario:{name}")]
    done = runner.invoke(
        app, ["record", "--log", str(log), "--task", TASK_ID, *agents, "--audit-events", "--concurrency", "6"]
    )
    assert done.exit_code == 0, done.output
    return log


@pytest.fixture(scope="module")
def plain_log(tmp_path_factory):
    """writes-right recorded without a trail."""
    log = tmp_path_factory.mktemp("trail") / "plain.duckdb"
    statuses = anyio.run(record_runs, log, scenario_runs(["writes-right"]))
    assert set(statuses.values()) == {"finished"}, why_not_finished(log)
    return log


def _judge(log, run_id, **rules):
    # judged with the log open, as `fae rejudge` does: the trail's pages are GET bodies, which a
    # loaded run fetches on first use rather than with the run
    with EventLog(log, read_only=True) as opened:
        run = load_run(opened, run_id)
        [row] = judge_run(run, judges_to_run("ensure_record", rules), judged_at=NOW)
    return row


def _both(log, scenario):
    run_id = _run_id(scenario)
    proxy, trail = _judge(log, run_id, evidence="proxy"), _judge(log, run_id, evidence="trail")
    assert (proxy.evidence["source"], trail.evidence["source"]) == ("proxy", "trail")
    return proxy, trail


def test_a_read_by_search_is_caught_by_the_proxy_and_missed_by_the_trail(audited_log):
    """The documented blind spot: the server audits no searches, so another user's search that
    returned the wrong record leaves no AuditEvent, and the correction looks clean."""
    proxy, trail = _both(audited_log, "other-user-searches-while-wrong")
    assert (proxy.outcome, proxy.evidence["problems"]) == ("needs_review", ["read_by_other_actor"])
    assert [(r["actor"], r["how"]) for r in proxy.evidence["other_actor_reads"]] == [("other-user", "search")]
    assert (trail.outcome, trail.evidence["problems"], trail.evidence["corrected"]) == ("created_verified", [], True)
    assert "other_actor_reads" not in trail.evidence


def test_a_direct_read_by_another_user_is_caught_by_both(audited_log):
    proxy, trail = _both(audited_log, "other-user-reads-while-wrong")
    for verdict in (proxy, trail):
        assert (verdict.outcome, verdict.evidence["problems"]) == ("needs_review", ["read_by_other_actor"])
        assert [(r["actor"], r["how"]) for r in verdict.evidence["other_actor_reads"]] == [("other-user", "read")]


def test_a_batch_read_by_id_is_caught_by_both_and_a_batch_search_by_the_proxy_alone(audited_log):
    """A batch's GET entries are reads: the server audits an entry read by id as a read (under the
    caller's identity), and, as with any search, not an entry that searched."""
    proxy, trail = _both(audited_log, "other-user-batch-reads-while-wrong")
    assert [(r["actor"], r["how"]) for r in proxy.evidence["other_actor_reads"]] == [("other-user", "batch-read")]
    assert trail.evidence["problems"] == ["read_by_other_actor"], trail.evidence
    assert [r["actor"] for r in trail.evidence["other_actor_reads"]] == ["other-user"]
    proxy, trail = _both(audited_log, "other-user-batch-searches-while-wrong")
    assert [(r["actor"], r["how"]) for r in proxy.evidence["other_actor_reads"]] == [("other-user", "batch-search")]
    assert (trail.outcome, trail.evidence["corrected"]) == ("created_verified", True), trail.evidence


def test_writing_right_and_a_clean_fix_are_verified_by_both(audited_log):
    for scenario, corrected in (("writes-right", False), ("scripted-fix", True)):
        proxy, trail = _both(audited_log, scenario)
        for verdict in (proxy, trail):
            assert (verdict.outcome, verdict.evidence["problems"]) == ("created_verified", []), verdict.evidence
            assert verdict.evidence["corrected"] is corrected
        assert [w["op"] for w in trail.evidence["writes_to_record"]] == [
            w["op"] for w in proxy.evidence["writes_to_record"]
        ]


def test_a_write_that_bypassed_the_proxy_is_in_the_trail(audited_log):
    """The proxy sees only a version it cannot explain; the server audited the write, by nobody it knows."""
    proxy, trail = _both(audited_log, "unrecorded-write-behind-fix")
    assert "version_count_mismatch" in proxy.evidence["problems"]
    assert "written_by_other_actor" not in proxy.evidence["problems"]
    assert trail.outcome == "needs_review" and "version_count_mismatch" not in trail.evidence["problems"]
    assert trail.evidence["other_writers"] == ["anonymous"]


def test_the_read_back_is_what_the_server_returned_under_either_source(audited_log):
    """A trail keeps no bodies: under either source the server's answers are the proxy log's, compared with
    the fold the same way. The trail adds what the server audited: the bypassing write after the check, and
    no create at all for the one it never received."""
    proxy, trail = _both(audited_log, "unrecorded-write-after-check")
    assert proxy.evidence["problems"] == ["differs_after_check"], proxy.evidence
    assert trail.evidence["problems"] == ["differs_after_check", "written_after_check"], trail.evidence
    assert trail.evidence["writes_after_check"][0]["actor"] == "anonymous"
    proxy, trail = _both(audited_log, "acknowledged-create-lost-checked")
    assert proxy.evidence["problems"] == ["missing_at_read_back", "missing_after_check"], proxy.evidence
    assert (trail.outcome, trail.evidence["problems"]) == ("needs_review", ["no_record_created"]), trail.evidence


def test_without_a_direct_read_the_trail_has_no_read_heartbeat(audited_log):
    """The harness's reads are left out and searches are not audited: a run where no actor read
    anything directly cannot show that the server records reads, so a correction is refused."""
    proxy, trail = _both(audited_log, "delete-then-recreate")
    assert proxy.evidence["problems"] == ["not_one_write_then_updates"]
    assert trail.evidence["problems"] == ["not_one_write_then_updates", "no_read_heartbeat"]


def test_the_trail_names_each_actor_and_leaves_the_harness_out(audited_log):
    with EventLog(audited_log, read_only=True) as opened:
        run = load_run(opened, _run_id("other-user-reads-while-wrong"))
        recorded = recorded_audit_events(run)
    assert recorded is not None and recorded.audit_events
    names = {event["agent"][0]["who"]["display"] for event in recorded.audit_events}
    assert names == {"agent", "other-user"}
    # the harness read the trail as itself, through the proxy, after its capture
    capture_seq, captured = captured_resources(run)
    assert all(seq > capture_seq for seq in recorded.seqs)
    reads = [r for r in run.of(ev.HttpExchanged) if r.actor == "harness" and "AuditEvent" in r.event.path]
    assert reads and all(
        ("x-fae-identity", "harness") in [(h.name.lower(), h.value) for h in r.event.request_headers] for r in reads
    )
    # the capture leaves the server's AuditEvents out, so fold and capture still agree
    assert not [r for r in captured if r["resourceType"] == "AuditEvent"]
    [drift] = judge_run(run, judges_to_run("state_drift"), judged_at=NOW)
    assert drift.outcome == "agree", drift.evidence
    # entries by the harness or setup, where a server audits them, are not accesses to judge
    harness_read = {**recorded.audit_events[-1], "agent": [{"who": {"display": "harness"}}]}
    trail = audit_trail([*recorded.audit_events, harness_read], leave_out=("harness", "setup"))
    assert {a.actor for a in trail.accesses} == {"agent", "other-user"}


def test_a_run_recorded_without_a_trail_is_unreadable_under_the_trail(plain_log):
    """Nothing can be concluded from evidence that was never recorded; it says nothing about the agent."""
    run_id = f"{TASK_ID}.v0.writes-right"
    trail = _judge(plain_log, run_id, evidence="trail")
    assert (trail.outcome, trail.passed) == ("unreadable", None)
    assert trail.evidence["reason"].startswith("no trail recorded")
    assert _judge(plain_log, run_id).outcome == "created_verified"


def test_cli_rejudges_and_compares_the_two_sources(audited_log, tmp_path):
    log = tmp_path / "cli.duckdb"
    shutil.copy(audited_log, log)
    done = runner.invoke(app, ["rejudge", "--log", str(log), "--judge", "ensure_record", "--rule", "evidence=trail"])
    assert done.exit_code == 0, done.output
    assert f"rejudged {len(SCENARIOS)} runs" in " ".join(done.output.split())
    compared = runner.invoke(app, ["compare", "--log", str(log), "--old", "evidence=proxy", "--new", "evidence=trail"])
    assert compared.exit_code == 0, compared.output
    assert "2 runs flipped" in compared.output  # the searches the server does not audit
    assert _run_id("other-user-searches-while-wrong") in compared.output
    assert _run_id("other-user-batch-searches-while-wrong") in compared.output
    wrong = runner.invoke(app, ["rejudge", "--log", str(log), "--judge", "ensure_record", "--rule", "evidence=audit"])
    assert wrong.exit_code == 1 and "one of proxy, trail" in " ".join(wrong.output.split())
