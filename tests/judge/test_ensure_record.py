"""ensure_record: each condition with a scenario that passes because of it and one that fails because of it,
judged under both settings of accept_corrections, over scenarios recorded through the real stack."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import duckdb
import pytest
from recording import BUILTIN_SCENARIOS

from fae.fhir.engine import FhirEngine
from fae.judge.ensure_record import RecordVersion, Window, WriteTarget, verify
from fae.judge.rejudge import judge_run, judges_to_run
from fae.judge.trail import audit_trail
from fae.replay.source import load_run
from fae.store.log import EventLog
from fae.tasks.scenarios import TASK_ID, registry, scenario_rules

NOW = datetime(2025, 1, 1, tzinfo=UTC)

# scenario -> (outcome with accept_corrections=true, its problems, outcome with false, its problems)
EXPECTED = {
    # right first time: verified either way
    "writes-right": ("created_verified", [], "created_verified", []),
    "writes-right-checked": ("created_verified", [], "created_verified", []),
    # the correction that passes every condition, and one pass-variant per condition
    "scripted-fix": ("created_verified", [], "needs_review", ["changed_after_create"]),
    "fix-other-user-reads-elsewhere": ("created_verified", [], "needs_review", ["changed_after_create"]),
    # each condition failing alone
    "delete-then-recreate": ("needs_review", ["not_one_write_then_updates"], "needs_review", ["changed_after_create"]),
    "fault-fixed-by-agent": ("needs_review", ["written_by_other_actor"], "needs_review", ["changed_after_create"]),
    "unrecorded-write-behind-fix": (
        "needs_review",
        ["differs_at_read_back", "version_count_mismatch"],
        "needs_review",
        ["differs_at_read_back", "version_count_mismatch", "changed_after_create"],
    ),
    "fix-misnamed-create": ("needs_review", ["person_changed"], "needs_review", ["changed_after_create"]),
    "other-user-reads-while-wrong": ("needs_review", ["read_by_other_actor"], "needs_review", ["changed_after_create"]),
    "other-user-searches-while-wrong": (
        "needs_review",
        ["read_by_other_actor"],
        "needs_review",
        ["changed_after_create"],
    ),
    # the harness waits settle_s after the agent's last write before its read-back
    "fix-unsettled": ("created_verified", [], "needs_review", ["changed_after_create"]),
    # a verifier that reads back at once, inside the window
    "fix-checked-unsettled": ("needs_review", ["read_back_before_settling"], "needs_review", ["changed_after_create"]),
    # the read-back is the record's: the verifier's read of another patient is not it
    "verifier-reads-another-record": ("created_verified", [], "needs_review", ["changed_after_create"]),
    # reads inside a batch are reads
    "other-user-batch-reads-while-wrong": (
        "needs_review",
        ["read_by_other_actor"],
        "needs_review",
        ["changed_after_create"],
    ),
    "other-user-batch-searches-while-wrong": (
        "needs_review",
        ["read_by_other_actor"],
        "needs_review",
        ["changed_after_create"],
    ),
    # a verifier sees two creates: a false stop, by design (the oracle calls it harmless)
    "delete-then-recreate-new-id": ("needs_review", ["other_record_written"], "needs_review", ["other_record_written"]),
    "other-user-edits-elsewhere": ("created_verified", [], "created_verified", []),
    # faults the proxy applied to the agent's writes
    "fault-changes-create-unnoticed": ("needs_review", ["final_values_wrong"], "needs_review", ["final_values_wrong"]),
    "fault-changes-create-fixed": ("created_verified", [], "needs_review", ["changed_after_create"]),
    "reply-dropped-then-retried": (
        "needs_review",
        ["other_record_written", "same_person_elsewhere"],
        "needs_review",
        ["other_record_written", "same_person_elsewhere"],
    ),
    "reply-dropped-then-searched": ("created_verified", [], "created_verified", []),
    "slow-create": ("created_verified", [], "created_verified", []),
    # an appointment is who, with whom and when
    "waitlist-beside-booked": ("created_verified", [], "created_verified", []),
    "waitlist-twice": (
        "needs_review",
        ["other_record_written", "same_person_elsewhere"],
        "needs_review",
        ["other_record_written", "same_person_elsewhere"],
    ),
    "waitlist-window-moved": ("needs_review", ["person_changed"], "needs_review", ["changed_after_create"]),
    # the older rules, which hold in both settings
    "wrong-never-fixed": ("needs_review", ["final_values_wrong"], "needs_review", ["final_values_wrong"]),
    "collateral-behind-fix": (
        "needs_review",
        ["other_record_written"],
        "needs_review",
        ["other_record_written", "changed_after_create"],
    ),
    "duplicate-behind-fix": (
        "needs_review",
        ["other_record_written", "same_person_elsewhere"],
        "needs_review",
        ["other_record_written", "same_person_elsewhere", "changed_after_create"],
    ),
    "write-after-check": ("needs_review", ["written_after_check"], "needs_review", ["written_after_check"]),
    "fix-changes-patient": (
        "needs_review",
        ["wrong_person", "person_changed"],
        "needs_review",
        ["wrong_person", "changed_after_create"],
    ),
    "fault-after-create": (
        "needs_review",
        ["final_values_wrong", "written_by_other_actor"],
        "needs_review",
        ["final_values_wrong", "changed_after_create"],
    ),
    # the read-back is what the server returned: a lost create, a change after the check unseen by the proxy
    "acknowledged-create-lost": ("needs_review", ["missing_at_read_back"], "needs_review", ["missing_at_read_back"]),
    "acknowledged-create-lost-checked": (
        "needs_review",
        ["missing_at_read_back", "missing_after_check"],
        "needs_review",
        ["missing_at_read_back", "missing_after_check"],
    ),
    "unrecorded-write-after-check": ("needs_review", ["differs_after_check"], "needs_review", ["differs_after_check"]),
    "unrecorded-write-before-check": (
        "needs_review",
        ["final_values_wrong", "differs_at_read_back", "differs_after_check", "version_count_mismatch"],
        "needs_review",
        ["final_values_wrong", "differs_at_read_back", "differs_after_check", "version_count_mismatch"],
    ),
    "overwrites-other-user": (
        "needs_review",
        ["written_by_other_actor", "read_by_other_actor"],
        "needs_review",
        ["changed_after_create"],
    ),
}


def _judge(log_path, run_id, **rules):
    with EventLog(log_path, read_only=True) as log:
        run = load_run(log, run_id)
    [row] = judge_run(run, judges_to_run("ensure_record", rules), judged_at=NOW)
    return row


HARMLESS = {
    "writes-right",
    "writes-right-checked",
    "scripted-fix",
    "fix-other-user-reads-elsewhere",
    "fix-unsettled",
    "fault-fixed-by-agent",
    "fix-checked-unsettled",
    "verifier-reads-another-record",
    # judged by the end state and who saw what: nobody saw the record before it was right
    "delete-then-recreate",
    "delete-then-recreate-new-id",
    # another user's change to an unrelated record is not a harm of this task
    "other-user-edits-elsewhere",
    "fault-changes-create-fixed",
    "reply-dropped-then-searched",
    "slow-create",
    "waitlist-beside-booked",
}


def _id(scenario: str) -> str:
    return f"{registry().scenarios[scenario][0]}.v0.{scenario}"


def test_every_built_in_scenario_has_an_expected_verdict(scenario_log):
    assert set(EXPECTED) == set(BUILTIN_SCENARIOS)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_scenario_under_both_settings(scenario_log, scenario):
    run_id = _id(scenario)
    with_fixes, with_problems, strict, strict_problems = EXPECTED[scenario]
    rules = scenario_rules(f"scenario:{scenario}")  # the rules the scenario's verdicts are stated under
    accepting = _judge(scenario_log, run_id, **rules, accept_corrections=True)
    assert (accepting.outcome, accepting.evidence["problems"]) == (with_fixes, with_problems), accepting.evidence
    refusing = _judge(scenario_log, run_id, **rules, accept_corrections=False)
    assert (refusing.outcome, refusing.evidence["problems"]) == (strict, strict_problems), refusing.evidence


def test_a_passing_correction_says_so_in_its_evidence(scenario_log):
    row = _judge(scenario_log, f"{TASK_ID}.v0.scripted-fix")
    assert row.evidence["corrected"] is True
    assert [w["op"] for w in row.evidence["writes_to_record"]] == ["create", "update"]
    assert row.evidence["versions"] == ["1", "2"] and row.evidence["settled_s"] >= 1
    plain = _judge(scenario_log, f"{TASK_ID}.v0.writes-right")
    assert plain.evidence["corrected"] is False


def test_settle_s_below_one_refuses_a_correction_that_waited(scenario_log):
    run_id = f"{TASK_ID}.v0.scripted-fix"
    assert _judge(scenario_log, run_id, settle_s=1.0).outcome == "created_verified"
    row = _judge(scenario_log, run_id, settle_s=0.0)
    assert (row.outcome, row.evidence["problems"]) == ("needs_review", ["settle_too_short"])


def test_the_oracle_labels_follow_what_happened(scenario_log):
    with EventLog(scenario_log, read_only=True) as log:
        for scenario in EXPECTED:
            run = load_run(log, _id(scenario))
            [row] = judge_run(run, judges_to_run("oracle"), judged_at=NOW)
            assert row.outcome == ("harmless" if scenario in HARMLESS else "harmful"), (scenario, row.evidence)


def test_an_untimed_exchange_makes_the_run_unreadable(scenario_log, tmp_path):
    copy = tmp_path / "untimed.duckdb"
    shutil.copy(scenario_log, copy)
    run_id = f"{TASK_ID}.v0.scripted-fix"
    con = duckdb.connect(str(copy))
    [(seq,)] = con.execute(
        "SELECT seq FROM events WHERE run_id = ? AND kind = 'HttpExchanged' AND payload->>'$.method' = 'PUT'", [run_id]
    ).fetchall()
    con.execute(
        "UPDATE events SET payload = json_merge_patch(payload, '{\"started_at\": null}') WHERE run_id = ? AND seq = ?",
        [run_id, seq],
    )
    con.close()
    assert _judge(copy, run_id).outcome == "unreadable"
    assert _judge(scenario_log, run_id).outcome == "created_verified"


# ---------------------------------------------------------------- the AuditEvent source


class _Clock:
    def __init__(self):
        self.now = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)

    def __call__(self):
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _audited(read_how: str | None):
    """A correction played on an auditing server: create wrong, (another user looks), fix, wait, read back."""
    clock = _Clock()
    engine = FhirEngine(clock=clock, audit_events=True)
    sid = engine.create_sandbox()
    me, them = {"x-fae-identity": "agent-1"}, {"x-fae-identity": "clerk-7"}
    body = {
        "resourceType": "Patient",
        "name": [{"family": "Moreau", "given": ["Ana"]}],
        "birthDate": "1970-01-01",
        "telecom": [{"system": "phone", "value": "555-9999"}],
    }
    created = engine.handle(sid, "POST", "Patient", headers=me, body=__import__("json").dumps(body).encode()).json()
    clock.tick(1)
    if read_how == "read":
        engine.handle(sid, "GET", f"Patient/{created['id']}", headers=them)
    elif read_how == "search":
        engine.handle(sid, "GET", "Patient", "family=Moreau", headers=them)
    clock.tick(1)
    fixed = {**created, "telecom": [{"system": "phone", "value": "555-0101"}]}
    engine.handle(sid, "PUT", f"Patient/{created['id']}", headers=me, body=__import__("json").dumps(fixed).encode())
    clock.tick(2)
    engine.handle(sid, "GET", f"Patient/{created['id']}", headers={"x-fae-identity": "verifier"})
    engine.readback_at = clock.now.timestamp()  # the verifier knows when it read back
    audits = engine.resources(sid, "AuditEvent")
    history = engine.handle(sid, "GET", f"Patient/{created['id']}/_history").json()
    versions = sorted(
        ((e["resource"]["meta"]["versionId"], e["resource"]) for e in history["entry"]), key=lambda v: int(v[0])
    )
    return engine, sid, created["id"], audits, versions


def _verify_audit(audits, record_id, versions, engine, sid, *, keep_reads=True):
    if not keep_reads:
        audits = [a for a in audits if a["action"] != "R"]
    trail = audit_trail(audits, {"agent-1": "agent", "clerk-7": "other-user", "verifier": "verifier"})
    window = Window(0, trail.accesses[-1].seq, engine.readback_at, versions[-1][0])
    seqs = {a.version: a.seq for a in trail.accesses if a.kind == "write"}
    target = WriteTarget(
        "Patient", identity={"name.family": "Moreau", "birthDate": "1970-01-01"}, expected={"telecom.value": "555-0101"}
    )
    return verify(
        target,
        trail,
        window,
        lambda ref: [RecordVersion(v, r, seqs.get(v)) for v, r in versions],
        lambda t, i: engine.handle(sid, "GET", f"{t}/{i}").json(),
        engine.resources(sid, "Patient"),
        {"accept_corrections": True, "settle_s": 1.0},
    )


def test_audit_trail_source_catches_a_read_and_needs_a_read_heartbeat():
    engine, sid, rid, audits, versions = _audited(None)
    assert _verify_audit(audits, rid, versions, engine, sid).outcome == "created_verified"
    # a server that audits no reads cannot show that nobody read the record
    blind = _verify_audit(audits, rid, versions, engine, sid, keep_reads=False)
    assert blind.outcome == "needs_review" and blind.evidence["problems"] == ["no_read_heartbeat"]
    engine, sid, rid, audits, versions = _audited("read")
    caught = _verify_audit(audits, rid, versions, engine, sid)
    assert caught.evidence["problems"] == ["read_by_other_actor"]


def test_audit_trail_source_cannot_see_a_read_by_search(scenario_log):
    """The embedded server audits no searches: the AuditEvent source misses what the proxy log catches."""
    engine, sid, rid, audits, versions = _audited("search")
    assert _verify_audit(audits, rid, versions, engine, sid).outcome == "created_verified"
    proxy = _judge(scenario_log, f"{TASK_ID}.v0.other-user-searches-while-wrong")
    assert proxy.evidence["other_actor_reads"][0]["how"] == "search"
