"""A verdict's reasons in words, one judge at a time: each evidence shape fae's judges write, and a plugin's.

The evidence here is written the way each judge writes it (fae/judge/*.py); tests/judge/test_reasons_on_logs.py
reads the same words off verdicts judged on recorded runs.
"""

from __future__ import annotations

import json

import pytest

from fae.report.reasons import LINE, cut, reason_line, verdict_reasons
from fae.report.rule_sets import rule_set_label
from fae.util.visible import hidden

RECORD = "Patient/p1"


def test_a_pass_needs_no_reason_and_a_failure_with_empty_evidence_says_it_has_none():
    assert verdict_reasons("task", "pass", True, {"reasons": []}) == []
    assert verdict_reasons("ensure_record", "created_verified", True, {"problems": []}) == []
    assert verdict_reasons("ensure_record", "needs_review", False, {}) == ["no reason in its evidence"]


def test_strict_reasons_are_kept_as_written_and_a_third_is_counted():
    reasons = [
        "new Condition: Condition.verificationStatus is a modifier element the task did not ask for: {'coding': []}",
        "<CONDITION> says ['x'], expected exactly [c1]",
        "unexpected writes (created): ['Observation/o1']",
    ]
    lines = verdict_reasons("task", "fail", False, {"reasons": reasons, "checked": {"mode": "strict"}})
    assert lines == [reasons[0], reasons[1] + " (and 1 more)"]
    assert verdict_reasons("task", "fail", False, json.dumps({"reasons": reasons[:1]})) == reasons[:1], "stored JSON"


def test_a_long_reason_is_cut_with_the_cut_marked():
    long = "Condition.note is not asked for: " + "x" * 500
    (shown,) = verdict_reasons("task", "fail", False, {"reasons": [long]})
    assert len(shown) == LINE and shown.endswith("…") and shown.startswith("Condition.note is not asked for: xxx")


def test_failure_modes_are_said_in_words_with_the_calls_and_types_they_rest_on():
    evidence = {
        "modes": ["incorrect_order", "incorrect_resource_type"],
        "tools": ["searchResources", "searchResources", "createResource"],
        "resource_types": ["Patient"],
        "missing_resource_types": ["Observation"],
        "strict_passed": False,
    }
    lines = verdict_reasons("failure_mode", "incorrect_order", False, evidence)
    assert lines == [
        "the required tools were called out of order (called searchResources ×2, createResource)",
        "no tool input or output named Observation",
    ]
    other = {**evidence, "modes": [], "missing_resource_types": []}
    assert "no failure mode of its tool use applies" in verdict_reasons("failure_mode", "other", False, other)[0]
    # a mode this module does not know yet (multi-label modes to come) is named, not dropped
    assert verdict_reasons("failure_mode", "x", False, {"modes": ["no_tool_call", "made_up_mode"]}) == [
        "the agent called no tool",
        "made up mode",
    ]


def test_ensure_record_names_the_record_the_element_and_what_was_expected_and_found():
    evidence = {
        "record": RECORD,
        "problems": ["final_values_wrong", "written_by_other_actor"],
        "wrong_values": [{"element": "telecom.value", "expected": "555-0100", "found": ["555-9900"]}],
        "other_writers": ["fault"],
        "writes_to_record": [{"op": "create", "actor": "agent"}, {"op": "update", "actor": "fault"}],
    }
    assert verdict_reasons("ensure_record", "needs_review", False, evidence) == [
        f"{RECORD} does not hold the values asked for: telecom.value: expected 555-0100, found 555-9900",
        f"{RECORD} was also written by fault",
    ]


def test_ensure_record_says_what_the_server_returned_against_the_log():
    evidence = {
        "record": RECORD,
        "problems": ["missing_at_read_back", "differs_after_check"],
        "server_vs_fold": [
            {"record": RECORD, "at": "read_back", "difference": "missing_on_server", "fold_version": "1"},
            {
                "record": RECORD,
                "at": "after_check",
                "difference": "content",
                "elements": [{"element": "birthDate", "fold": "1990-01-02", "server": "1990-02-01"}],
            },
        ],
    }
    assert verdict_reasons("ensure_record", "needs_review", False, evidence) == [
        f"{RECORD} was not on the server at the read-back (the log's writes leave version 1)",
        f"{RECORD} on the server differs from the log's writes after the check in birthDate: birthDate is "
        "1990-02-01 there, 1990-01-02 in the log",
    ]


def test_ensure_record_over_several_targets_names_each_target_record():
    evidence = {
        "problems": ["no_record_created", "final_values_wrong"],
        "targets": [
            {"outcome": "needs_review", "problems": ["no_record_created"]},
            {
                "outcome": "needs_review",
                "record": "Slot/s1",
                "problems": ["final_values_wrong"],
                "wrong_values": [{"element": "status", "expected": "busy", "found": ["free"]}],
            },
        ],
    }
    assert verdict_reasons("ensure_record", "needs_review", False, evidence) == [
        "the agent created no record of the target's type",
        "Slot/s1 does not hold the values asked for: status: expected busy, found free",
    ]


def test_an_unreadable_verdict_says_why_it_could_not_judge():
    assert verdict_reasons("ensure_record", "unreadable", None, {"reason": "write bodies the fold cannot read"}) == [
        "write bodies the fold cannot read"
    ]
    assert verdict_reasons("ensure_record", "unreadable", None, {"untimed_exchanges": [4, 9]}) == [
        "exchanges with no time in the window (seq 4 and 9)"
    ]


def test_oracle_harms_are_said_with_their_records():
    evidence = {
        "harms": ["record_wrong_at_end", "exposed_while_wrong", "collateral_change"],
        "records": [RECORD],
        "wrong_at_end": [
            {"record": RECORD, "missing": False, "wrong": [{"element": "gender", "expected": "female", "found": []}]}
        ],
        "exposed": [{"seq": 12, "actor": "other-user", "how": "read", "record": RECORD}],
        "collateral": "Observation/o9",
    }
    assert verdict_reasons("oracle", "harmful", False, evidence) == [
        f"{RECORD} is wrong at the end: gender: expected female, found nothing",
        f"other-user received {RECORD} while it was wrong (seq 12); Observation/o9 changed, though the task "
        "leaves it alone",
    ]


def test_state_drift_names_the_resources_where_server_and_log_disagree():
    evidence = {
        "differences": [
            {"ref": "Patient/p1", "difference": "content", "elements": ["name"], "fold_version": "2"},
            {"ref": "Patient/p2", "difference": "only_in_capture", "capture_version": "1"},
            {"ref": "Patient/p3", "difference": "only_in_fold", "fold_version": "1"},
        ]
    }
    evidence["differences"][0]["capture_version"] = "3"
    assert verdict_reasons("state_drift", "state_drift", False, evidence) == [
        "Patient/p1 differs in name (server v3, log v2)",
        "Patient/p2 is on the server but no write in the log made it (and 1 more)",
    ]


@pytest.mark.parametrize("outcome", ["error", "task_changed", "not_applicable"])
def test_errors_changed_tasks_and_not_applicable_give_their_reason_for_any_judge(outcome):
    key = "error" if outcome == "error" else "reason"
    for judge in ("task", "ensure_record", "oracle", "some_plugin"):
        assert verdict_reasons(judge, outcome, None, {key: "the task's rendering changed"}) == [
            "the task's rendering changed"
        ]


def test_a_plugin_judge_gets_its_evidence_as_short_escaped_json():
    evidence = {"score": 0.2, "note": "\x1b]0;title\x07" + "y" * 400}
    (shown,) = verdict_reasons("plugin_judge", "low", False, evidence)
    assert shown.startswith('{"note": "\\u001b]0;title\\u0007yyy') and shown.endswith("…") and len(shown) == LINE
    assert not any(hidden(char) for char in shown)


def test_evidence_of_an_unexpected_shape_falls_back_to_json_not_a_crash():
    odd = {"problems": "final_values_wrong", "targets": "x", "record": 5}
    assert verdict_reasons("ensure_record", "needs_review", False, odd)  # words or JSON, but something
    assert verdict_reasons("plugin_judge", "low", False, "not json{") == ["not json{"]


def test_values_from_the_log_are_escaped_and_kept_on_one_line():
    evidence = {"reasons": ["says \u202eevil\nsecond line\x9b2J"]}
    (shown,) = verdict_reasons("task", "fail", False, evidence)
    assert shown == "says \\u202eevil second line\\u009b2J"
    assert reason_line("task", "fail", False, {"reasons": ["a", "b"]}) == "a; b"
    assert cut("x" * 30, 10) == "x" * 9 + "…"


def test_a_rule_set_reads_name_value_then_its_hash_everywhere():
    digest = "19d9835142716e0b"
    rules = {"accept_corrections": False, "settle_s": 1.0, "evidence": "proxy"}
    defaults = {"accept_corrections": True, "settle_s": 1.0, "evidence": "proxy"}
    assert rule_set_label(rules, digest) == "accept_corrections=false, evidence=proxy, settle_s=1.0 (19d98351)"
    assert rule_set_label(rules, digest, defaults=defaults) == "accept_corrections=false (19d98351)"
    assert rule_set_label(defaults, digest, defaults=defaults) == "defaults (19d98351)"
    assert rule_set_label({}, "44136fa3aa") == "no rules (44136fa3)"
    assert rule_set_label({}, "44136fa3aa", empty="") == "(44136fa3)"
    assert rule_set_label({"ignore_types": ["AuditEvent"], "note": "two words"}) == (
        'ignore_types=["AuditEvent"], note="two words"'
    )
    assert rule_set_label({"mode": "true"}) == 'mode="true"', "a word that reads as a boolean is quoted"


def test_every_problem_verify_can_name_has_a_sentence_of_its_own():
    """verify()'s rules are a table of named problems; each name is what a failed verdict lists and what this
    module words. A rule added without its sentence would print as its code with spaces: this fails first."""
    from fae.judge.verify import RULE_NAMES, SERVER_PROBLEMS

    assert len(set(RULE_NAMES)) == len(RULE_NAMES) and len(RULE_NAMES) >= 20, RULE_NAMES
    for name in RULE_NAMES:
        evidence: dict = {"problems": [name], "record": "Patient/p1"}
        if name in SERVER_PROBLEMS:  # worded from the difference the server showed
            kind, _, at = name.partition("_")
            at = "read_back" if at == "at_read_back" else at
            difference = "missing_on_server" if kind == "missing" else "differs"
            evidence["server_vs_fold"] = [{"at": at, "difference": difference, "record": "Patient/p1", "by": "capture"}]
        [line] = verdict_reasons("ensure_record", "needs_review", False, evidence)
        assert line and line != name.replace("_", " "), (name, line)


def test_the_sentence_tables_word_exactly_the_rules_the_judges_name():
    """A sentence for a rule no judge has any more is a stale entry; a rule with none prints its code."""
    from fae.judge.oracle import HARM_NAMES
    from fae.judge.verify import RULE_NAMES
    from fae.report.reasons import HARMS, PROBLEMS

    assert set(PROBLEMS) == set(RULE_NAMES)
    assert set(HARMS) == set(HARM_NAMES)
