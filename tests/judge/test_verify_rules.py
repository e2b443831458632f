"""verify()'s table of named rules, each made to fire on a hand-built trail, in the order a verdict lists them.

The inputs are built here rather than recorded: every rule needs its own odd trail (an untimed write, a read by
another actor mid-correction, a twin record), and the expected problem lists are written out, not read from the
table, so a dropped, renamed or reordered rule fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from fae.judge.trail import Access, Trail
from fae.judge.verify import RULE_NAMES, RecordVersion, Window, verify
from fae.tasks.write_targets import WriteTarget

REF = "Patient/p1"
IDENTITY = {"birthDate": "1990-01-01"}
EXPECTED = {"gender": "female"}
RIGHT = {"resourceType": "Patient", "id": "p1", "birthDate": "1990-01-01", "gender": "female"}
CREATE = WriteTarget("Patient", IDENTITY, EXPECTED)
UPDATE = WriteTarget("Patient", IDENTITY, EXPECTED, action="update", record_id="p1")
RULES = {"accept_corrections": True, "settle_s": 1.0}


def _write(seq: int, at: float | None, actor: str = "agent", how: str = "create", ref: str = REF) -> Access:
    return Access(seq, at, actor, "write", how, ref, str(seq))


def _read(seq: int, actor: str, ref: str = REF) -> Access:
    return Access(seq, 50.0 + seq, actor, "read", "read", ref)


def _judge(
    accesses: list[Access],
    *,
    target: WriteTarget = CREATE,
    final: dict[str, Any] | None = None,
    versions: list[RecordVersion] | None = None,
    same_type: list[dict[str, Any]] | None = None,
    rules: dict[str, Any] | None = None,
    record: str | None = REF,
    server: list[dict[str, Any]] | None = None,
    reads_recorded: bool = True,
    window: Window | None = None,
) -> tuple[str, list[str]]:
    written = [a for a in accesses if a.kind == "write" and a.ref == REF]
    found = versions if versions is not None else [RecordVersion(a.version or "1", RIGHT, a.seq) for a in written]
    verdict = verify(
        target,
        Trail("proxy", tuple(accesses), reads_recorded),
        window or Window(0, 10, 100.0, str(len(written)) if written else None),
        lambda ref: found if ref == REF else [],
        lambda kind, rid: (RIGHT if final is None else final) if f"{kind}/{rid}" == REF else None,
        same_type if same_type is not None else [RIGHT],
        {**RULES, **(rules or {})},
        record,
        server=server or [],
    )
    return verdict.outcome, verdict.evidence.get("problems", [])


def test_a_record_written_once_right_is_verified():
    assert _judge([_write(2, 10.0)]) == ("created_verified", [])
    assert _judge([_write(2, 10.0, how="update")], target=UPDATE) == ("updated_verified", [])


def test_the_rules_every_record_is_held_to_fire_in_their_order():
    wrong = {**RIGHT, "gender": "male", "birthDate": "1980-02-02"}
    twin = {**RIGHT, "id": "p3"}
    outcome, problems = _judge(
        [_write(2, 10.0), _write(3, 11.0, ref="Patient/p2"), _write(12, 20.0, actor="nurse", how="update")],
        final=wrong,
        same_type=[wrong, twin],
        server=[
            {"at": "read_back", "difference": "content", "record": REF},
            {"at": "after_check", "difference": "missing_on_server", "record": REF},
        ],
        window=Window(0, 10, 100.0, "5"),
    )
    assert outcome == "needs_review"
    assert problems == [
        "final_values_wrong",
        "wrong_person",
        "differs_at_read_back",
        "missing_after_check",
        "other_record_written",
        "same_person_elsewhere",
        "written_after_check",
        "version_count_mismatch",
    ]


def test_a_record_the_server_lacked_at_the_read_back_is_not_judged_on_the_fold_s_values():
    _, problems = _judge(
        [_write(2, 10.0)],
        final={**RIGHT, "gender": "male"},
        server=[{"at": "read_back", "difference": "missing_on_server", "record": REF}],
    )
    assert problems == ["missing_at_read_back"]


def test_an_accepted_correction_is_held_to_every_condition_in_order():
    intruder = {**RIGHT, "birthDate": "1970-03-03"}
    outcome, problems = _judge(
        [
            _write(2, None),  # untimed
            _read(3, "nurse"),  # read mid-correction by someone who is not the evaluation
            _write(4, 99.9, actor="other", how="create"),  # another actor, a second create, just before the read-back
        ],
        versions=[RecordVersion("1", RIGHT, 2), RecordVersion("2", intruder, 4)],
        rules={"settle_s": 0.5},
        reads_recorded=False,
    )
    assert outcome == "needs_review"
    assert problems == [
        "not_one_write_then_updates",
        "written_by_other_actor",
        "untimed_write",
        "person_changed",
        "read_by_other_actor",
        "no_read_heartbeat",
        "settle_too_short",
        "read_back_before_settling",
    ]


def test_a_correction_is_verified_when_every_condition_holds_and_refused_when_corrections_are_not_accepted():
    corrected = [_write(2, 10.0), _write(4, 20.0, how="update")]
    assert _judge(corrected) == ("created_verified", [])
    # reads mid-correction that expose nothing: another record's, and the evaluation's own
    seen = [corrected[0], _read(3, "nurse", ref="Patient/p9"), _read(3, "harness"), corrected[1]]
    assert _judge(seen) == ("created_verified", [])
    assert _judge(corrected, rules={"accept_corrections": False}) == ("needs_review", ["changed_after_create"])
    updated = [_write(2, 10.0, how="update"), _write(4, 20.0, how="update")]
    assert _judge(updated, target=UPDATE, rules={"accept_corrections": False}) == (
        "needs_review",
        ["changed_after_update"],
    )


def test_no_record_and_an_unwritten_record_are_named():
    assert _judge([], record=None) == ("needs_review", ["no_record_created"])
    assert _judge([], target=UPDATE) == ("needs_review", ["record_not_written"])


def test_a_settle_the_recording_cannot_show_is_unreadable_not_a_failure():
    outcome, problems = _judge(
        [_write(2, 10.0), _write(4, 99.5, how="update")],
        rules={"settle_s": 2.0},
        window=Window(0, 10, 100.0, "2", capture_settle_s=0.5),
    )
    assert (outcome, problems) == ("unreadable", [])


@pytest.mark.parametrize("name", RULE_NAMES)
def test_every_named_rule_fires_in_one_of_these_cases(name):
    """The cases above, between them, make every rule of the table fire (a new rule needs a case here)."""
    assert name in _fired(), f"no case in this file makes {name} fire"


def _fired() -> set[str]:
    """Every problem the cases of this file name (run again here, so the parametrised check reads real output)."""
    wrong = {**RIGHT, "gender": "male", "birthDate": "1980-02-02"}
    intruder = {**RIGHT, "birthDate": "1970-03-03"}
    runs = [
        _judge(
            [_write(2, 10.0), _write(3, 11.0, ref="Patient/p2"), _write(12, 20.0, actor="nurse", how="update")],
            final=wrong,
            same_type=[wrong, {**RIGHT, "id": "p3"}],
            server=[
                {"at": "read_back", "difference": "content", "record": REF},
                {"at": "after_check", "difference": "missing_on_server", "record": REF},
            ],
            window=Window(0, 10, 100.0, "5"),
        ),
        _judge([_write(2, 10.0)], server=[{"at": "read_back", "difference": "missing_on_server", "record": REF}]),
        _judge([_write(2, 10.0)], server=[{"at": "after_check", "difference": "content", "record": REF}]),
        _judge(
            [_write(2, None), _read(3, "nurse"), _write(4, 99.9, actor="other", how="create")],
            versions=[RecordVersion("1", RIGHT, 2), RecordVersion("2", intruder, 4)],
            rules={"settle_s": 0.5},
            reads_recorded=False,
        ),
        _judge([_write(2, 10.0), _write(4, 20.0, how="update")], rules={"accept_corrections": False}),
        _judge(
            [_write(2, 10.0, how="update"), _write(4, 20.0, how="update")],
            target=UPDATE,
            rules={"accept_corrections": False},
        ),
        _judge([], record=None),
        _judge([], target=UPDATE),
    ]
    return {problem for _, problems in runs for problem in problems}
