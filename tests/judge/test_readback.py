"""The write verifier's read-back is what the server returned: a record the server does not hold, or holds
otherwise than the fold predicts, at the read-back or in the capture after the check, is never verified; the
state_drift judge sees the same differences; and a verifier that ignores the read-back is caught by the
scenarios written for it. Over scenarios recorded through the real stack (proxy, embedded FHIR, MCP)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from recording import BUILTIN_SCENARIOS

from fae.judge.compare import Judged, stopped
from fae.judge.readback import ServerRead, difference
from fae.judge.rejudge import judge_run, judges_to_run
from fae.judge.verifier_mutants import MUTANTS, mutant_judging
from fae.replay.fold import FoldedState, FoldedVersion, fhir_exchanges
from fae.replay.source import load_run
from fae.store import events as ev
from fae.store.log import EventLog
from fae.tasks.scenarios import params_for, registry

NOW = datetime(2025, 1, 1, tzinfo=UTC)
PHONE, WRONG = params_for(0)["phone"], params_for(0)["wrong_phone"]
# state_drift's name for each kind of difference ensure_record finds in the capture
DRIFT_KIND = {
    "missing_on_server": "only_in_fold",
    "only_on_server": "only_in_capture",
    "content": "content",
    "version": "version",
}


def _id(scenario: str) -> str:
    return f"{registry().scenarios[scenario][0]}.v0.{scenario}"


def _verdicts(log_path, scenario, plan):
    with EventLog(log_path, read_only=True) as log:
        run = load_run(log, _id(scenario))
        return judge_run(run, plan, judged_at=NOW), run


def _judge(log_path, scenario, judge="ensure_record", **rules):
    [row], _ = _verdicts(log_path, scenario, judges_to_run(judge, rules))
    return row


def _stops(outcome: str) -> bool:
    return stopped(Judged(outcome, outcome.endswith("_verified")))


# ------------------------------------------------------------------ an acknowledged write the server lost


def test_an_acknowledged_create_the_server_lost_is_missing_at_the_read_back(scenario_log):
    row = _judge(scenario_log, "acknowledged-create-lost")
    assert (row.outcome, row.evidence["problems"]) == ("needs_review", ["missing_at_read_back"]), row.evidence
    [found] = row.evidence["server_vs_fold"]
    assert found["record"] == row.evidence["record"]
    assert (found["at"], found["by"], found["difference"]) == ("read_back", "capture", "missing_on_server")
    assert (found["fold_version"], found["server"]) == ("1", None)
    # the agent was told 201 with the record; the log keeps that, and says the proxy made it
    _, run = _verdicts(scenario_log, "acknowledged-create-lost", [])
    [create] = [x for x in fhir_exchanges(run) if x.actor == "agent" and x.method == "POST"]
    assert create.status == 201 and f"{create.resource_type}/{create.resource_id}" == found["record"]
    [http] = [
        r.event
        for r in run.of(ev.HttpExchanged)
        if r.actor == "agent" and r.event.method == "POST" and r.event.url.endswith("/fhir/Patient")
    ]
    assert http.fault and "never passed to the server" in http.fault, http.fault


def test_the_verifiers_read_answered_404_is_the_read_back(scenario_log):
    row = _judge(scenario_log, "acknowledged-create-lost-checked")
    assert row.evidence["problems"] == ["missing_at_read_back", "missing_after_check"], row.evidence
    _, run = _verdicts(scenario_log, "acknowledged-create-lost-checked", [])
    [read] = [x for x in fhir_exchanges(run) if x.actor == "verifier"]
    assert read.status == 404 and row.evidence["read_back"]["seq"] == read.seq
    at_check, after = row.evidence["server_vs_fold"]
    assert (at_check["by"], at_check["seq"]) == ("verifier", read.seq)
    assert (after["at"], after["by"]) == ("after_check", "capture")
    # not judged on values the fold holds and the server does not
    assert "final_values_wrong" not in row.evidence["problems"]


# ------------------------------------------------------------------ a write that bypassed the proxy after the check


def test_a_change_unseen_by_the_proxy_after_the_check_is_never_verified(scenario_log):
    row = _judge(scenario_log, "unrecorded-write-after-check")
    assert (row.outcome, row.evidence["problems"]) == ("needs_review", ["differs_after_check"]), row.evidence
    [found] = row.evidence["server_vs_fold"]
    assert (found["at"], found["by"], found["difference"]) == ("after_check", "capture", "content")
    assert (found["fold_version"], found["server_version"]) == ("1", "2")
    [element] = found["elements"]
    assert element["element"] == "telecom"
    assert (element["fold"][0]["value"], element["server"][0]["value"]) == (PHONE, WRONG)
    # the verifier's own read-back agreed with the fold: that read alone would have verified it
    assert row.evidence["read_back"]["version"] == "1"


def test_the_values_judged_at_the_check_are_those_the_server_returned(scenario_log):
    """A change unseen by the proxy before the verifier's read: the verifier read the wrong phone, and the
    record is judged on it, not on the right phone the fold still predicts."""
    row = _judge(scenario_log, "unrecorded-write-before-check")
    assert row.evidence["problems"][:2] == ["final_values_wrong", "differs_at_read_back"], row.evidence
    at_check, after = row.evidence["server_vs_fold"]
    assert (at_check["by"], at_check["seq"]) == ("verifier", row.evidence["read_back"]["seq"])
    assert at_check["elements"][0]["server"][0]["value"] == WRONG
    # the capture still differs from the fold after the check: the same change, seen again
    assert (after["by"], after["elements"]) == ("capture", at_check["elements"])


def test_an_honest_run_read_back_by_the_verifier_has_no_difference(scenario_log):
    row = _judge(scenario_log, "writes-right-checked")
    assert (row.outcome, row.evidence["problems"]) == ("created_verified", []), row.evidence
    assert "server_vs_fold" not in row.evidence


# ------------------------------------------------------------------ state_drift and ensure_record agree


@pytest.mark.parametrize("scenario", sorted(BUILTIN_SCENARIOS))
def test_state_drift_and_ensure_record_agree_on_the_record_under_check(scenario_log, scenario):
    """Where the capture differs from the fold on the record under check, both judges say so, the same way;
    where state_drift finds the record as the fold predicts, ensure_record finds no difference in the capture."""
    (verdict, drift), _ = _verdicts(
        scenario_log, scenario, judges_to_run("ensure_record") + judges_to_run("state_drift")
    )
    targets = verdict.evidence.get("targets") or [verdict.evidence]
    for target in targets:
        record = target.get("record")
        if record is None:
            continue
        mine = [d for d in target.get("server_vs_fold", []) if d["by"] == "capture"]
        theirs = [d for d in drift.evidence["differences"] if d["ref"] == record]
        assert [DRIFT_KIND[d["difference"]] for d in mine] == [d["difference"] for d in theirs], (verdict, drift)
        for m, t in zip(mine, theirs, strict=True):
            assert [e["element"] for e in m.get("elements", [])] == t.get("elements", []), (m, t)
        if theirs:
            assert verdict.outcome == "needs_review" and drift.outcome == "state_drift", (verdict, drift)


def test_the_new_scenarios_drift_as_the_verifier_says(scenario_log):
    """The agreement above is not vacuous: the four read-back scenarios drift on the record under check."""
    for scenario in (
        "acknowledged-create-lost",
        "acknowledged-create-lost-checked",
        "unrecorded-write-after-check",
        "unrecorded-write-before-check",
    ):
        (verdict, drift), _ = _verdicts(
            scenario_log, scenario, judges_to_run("ensure_record") + judges_to_run("state_drift")
        )
        assert drift.outcome == "state_drift", drift.evidence
        assert [d["ref"] for d in drift.evidence["differences"]] == [verdict.evidence["record"]]


# ------------------------------------------------------------------ verifier mutants


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_a_verifier_that_ignores_the_read_back_is_caught(scenario_log, mutant):
    for scenario in mutant.written_for:
        real, lax, oracle = _verdicts(
            scenario_log, scenario, judges_to_run("ensure_record") + [mutant_judging(mutant)] + judges_to_run("oracle")
        )[0]
        assert oracle.outcome == "harmful", oracle.evidence
        assert _stops(real.outcome), real.evidence
        assert lax.outcome == "created_verified", (scenario, lax.evidence)


HARMLESS = ("writes-right", "writes-right-checked", "scripted-fix", "reply-dropped-then-searched", "slow-create")


def test_comparing_the_read_back_adds_no_false_stop(scenario_log):
    """On harmless runs the server's answers are what the fold predicts: the verdicts are the mutants'."""
    for scenario in HARMLESS:
        plan = judges_to_run("ensure_record") + [mutant_judging(m) for m in MUTANTS]
        verdicts, _ = _verdicts(scenario_log, scenario, plan)
        assert {v.outcome for v in verdicts} == {"created_verified"}, [(v.judge, v.evidence) for v in verdicts]


# ------------------------------------------------------------------ the comparison itself


def _fold(resource):
    fold = FoldedState(seed_resources=[])
    fold.apply(FoldedVersion("Patient", "p1", "1", resource, 5, "agent", 1.0))
    return fold


RIGHT = {"resourceType": "Patient", "id": "p1", "meta": {"versionId": "1"}, "telecom": [{"value": PHONE}]}


def test_a_difference_names_the_element_with_the_fold_and_the_server_value():
    server = {**RIGHT, "meta": {"versionId": "1", "lastUpdated": "x"}, "telecom": [{"value": WRONG}]}
    found = difference("Patient/p1", ServerRead("verifier", 9, None, True, server, "1"), _fold(RIGHT), "read_back")
    assert found is not None and found["difference"] == "content"
    assert found["elements"] == [{"element": "telecom", "fold": [{"value": PHONE}], "server": [{"value": WRONG}]}]
    # meta is the server's own: a new lastUpdated alone is no difference
    same = {**RIGHT, "meta": {"versionId": "1", "lastUpdated": "y"}}
    assert difference("Patient/p1", ServerRead("verifier", 9, None, True, same, "1"), _fold(RIGHT), "read_back") is None
    # another version with the same content is one
    bumped = difference("Patient/p1", ServerRead("capture", 9, None, True, same, "2"), _fold(RIGHT), "after_check")
    assert bumped is not None and (bumped["difference"], bumped["server_version"]) == ("version", "2")
    # before the create the fold holds nothing: a server that holds nothing agrees
    assert difference("Patient/p1", ServerRead("verifier", 3, None, False), _fold(RIGHT), "read_back") is None


def test_a_body_returned_in_part_is_compared_on_what_it_carries():
    tag = {"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "SUBSETTED"}
    part = {"resourceType": "Patient", "id": "p1", "meta": {"versionId": "1", "tag": [tag]}}
    read = ServerRead("verifier", 9, None, True, part, "1")
    assert difference("Patient/p1", read, _fold(RIGHT), "read_back") is None
    wrong = ServerRead("verifier", 9, None, True, {**part, "telecom": [{"value": WRONG}]}, "1")
    assert difference("Patient/p1", wrong, _fold(RIGHT), "read_back")["elements"][0]["element"] == "telecom"
