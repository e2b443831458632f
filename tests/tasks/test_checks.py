"""The check-spec validators on hand-built final states (no server)."""

from __future__ import annotations

import pytest

from fae.tasks.check_spec import read_check
from fae.tasks.checks import diff, judge_light, judge_strict, match
from fae.tasks.state import MemoryState, StateView

PATIENT = {"resourceType": "Patient", "id": "pat-1", "name": [{"family": "Moreau"}]}
DOCTOR = {"resourceType": "Practitioner", "id": "prac-1"}
SLOT = {
    "resourceType": "Slot",
    "id": "slot-1",
    "status": "free",
    "schedule": {"reference": "Schedule/s"},
    "start": "2025-03-10T09:00:00Z",
    "end": "2025-03-10T10:00:00Z",
}
OTHER = {"resourceType": "Patient", "id": "pat-2", "name": [{"family": "Novak"}]}
SEED = [PATIENT, DOCTOR, SLOT, OTHER]

SPEC = read_check(
    {
        "answer": {"APPOINTMENT": {"created": "Appointment"}, "SLOT": {"ids": ["slot-1"]}},
        "creates": [
            {
                "type": "Appointment",
                "fields": {
                    "status": "booked",
                    "participant": {
                        "exactly": [
                            {"actor": {"refs": ["Patient/pat-1"]}, "status": "accepted"},
                            {"actor": {"refs": ["Practitioner/prac-1"]}, "status": "accepted"},
                        ]
                    },
                    "start": {"instant": "2025-03-10T09:00:00Z"},
                    "end": {"instant": "2025-03-10T10:00:00Z"},
                    "slot": {"refs": ["Slot/slot-1"]},
                },
            }
        ],
        "updates": [{"ref": "Slot/slot-1", "fields": {"status": "busy"}}],
    }
)


def appointment(**changes):
    base = {
        "resourceType": "Appointment",
        "id": "appt-9",
        "status": "booked",
        "start": "2025-03-10T10:00:00+01:00",
        "end": "2025-03-10T11:00:00+01:00",
        "slot": [{"reference": "http://fae/sandbox/x/fhir/Slot/slot-1"}],
        "participant": [
            {"actor": {"reference": "Practitioner/prac-1"}, "status": "accepted"},
            {"actor": {"reference": "Patient/pat-1"}, "status": "accepted"},
        ],
    }
    return {**base, **changes}


def final(*extra, slot_status="busy", drop=()):
    resources = [r for r in SEED if r["id"] not in drop and r is not SLOT] + [{**SLOT, "status": slot_status}]
    return MemoryState(resources + list(extra), SEED)


GOOD = "<APPOINTMENT>Appointment/appt-9</APPOINTMENT> <slot>slot-1</slot>"


def test_memory_state_is_a_state_view():
    assert isinstance(final(), StateView)


def test_right_outcome_passes_with_other_offset_order_and_absolute_refs():
    verdict = judge_strict(SPEC, GOOD, final(appointment()))
    assert verdict.passed, verdict.reasons
    assert verdict.evidence["judged"] == {"Appointment": "Appointment/appt-9"}


def test_wrong_instant_fails():
    state = final(appointment(start="2025-03-10T09:00:00+01:00"))
    assert not judge_strict(SPEC, GOOD, state).passed
    assert judge_light(SPEC, GOOD, state).passed  # light does not enforce values


def test_wrong_patient_fails():
    wrong = appointment(
        participant=[
            {"actor": {"reference": "Patient/pat-2"}, "status": "accepted"},
            {"actor": {"reference": "Practitioner/prac-1"}, "status": "accepted"},
        ]
    )
    verdict = judge_strict(SPEC, GOOD, final(wrong))
    assert not verdict.passed and "participant: exactly: no item fits" in " ".join(verdict.reasons)


def test_wrong_id_answered_fails():
    assert not judge_strict(SPEC, GOOD.replace("appt-9", "appt-8"), final(appointment())).passed
    assert not judge_strict(SPEC, GOOD.replace("slot-1</slot>", "slot-2</slot>"), final(appointment())).passed


def test_duplicate_create_fails():
    verdict = judge_strict(SPEC, GOOD, final(appointment(), appointment(id="appt-10")))
    assert not verdict.passed
    assert verdict.reasons == [
        "expected 1 new Appointment, found 2: ['Appointment/appt-10', 'Appointment/appt-9']",
        "unexpected writes (created): ['Appointment/appt-10']",
    ]


def test_collateral_write_fails_and_meta_only_change_does_not():
    touched = {**OTHER, "name": [{"family": "Changed"}]}
    state = MemoryState([PATIENT, DOCTOR, {**SLOT, "status": "busy"}, touched, appointment()], SEED)
    verdict = judge_strict(SPEC, GOOD, state)
    assert not verdict.passed and "unexpected writes (updated): ['Patient/pat-2']" in verdict.reasons
    versioned = {**OTHER, "meta": {"versionId": "2"}}
    state = MemoryState([PATIENT, DOCTOR, {**SLOT, "status": "busy"}, versioned, appointment()], SEED)
    assert judge_strict(SPEC, GOOD, state).passed


def test_delete_fails():
    verdict = judge_strict(SPEC, GOOD, final(appointment(), drop=("pat-2",)))
    assert "unexpected writes (deleted): ['Patient/pat-2']" in verdict.reasons


def test_slot_left_as_seeded_fails_strict_and_light():
    """Light asks that the agent wrote the target; a slot the seed already had does not count."""
    state = final(appointment(), slot_status="free")
    for light in (False, True):
        verdict = (judge_light if light else judge_strict)(SPEC, GOOD, state)
        assert not verdict.passed
        assert "Slot/slot-1 was not updated by the agent" in verdict.reasons, verdict.reasons


def test_slot_written_with_a_wrong_value_fails_strict_only():
    state = final(appointment(), slot_status="busy-tentative")
    assert not judge_strict(SPEC, GOOD, state).passed
    assert judge_light(SPEC, GOOD, state).passed


def test_a_write_by_someone_else_is_not_the_agents():
    """The slot is busy in the final state, but the agent's own writes did not touch it."""
    state = final(appointment())
    agent = {"Appointment/appt-9"}
    for light in (False, True):
        verdict = (judge_light if light else judge_strict)(SPEC, GOOD, state, written=agent)
        assert verdict.reasons == ["Slot/slot-1 was not updated by the agent"], verdict.reasons
    both = agent | {"Slot/slot-1"}
    assert judge_light(SPEC, GOOD, state, written=both).passed
    assert judge_strict(SPEC, GOOD, state, written=both).passed
    verdict = judge_light(SPEC, GOOD, state, written={"Slot/slot-1"})
    assert "new Appointment: none created by the agent" in verdict.reasons, verdict.reasons


def test_missing_field_fails_light():
    bare = appointment()
    del bare["participant"]
    verdict = judge_light(SPEC, GOOD, final(bare))
    assert not verdict.passed and "participant: missing" in " ".join(verdict.reasons)


def test_missing_tag_fails_light():
    assert not judge_light(SPEC, "<APPOINTMENT>appt-9</APPOINTMENT>", final(appointment())).passed


def test_a_wrong_answer_value_fails_strict_only():
    """Light asks that each tag is there and consistent, not that its value is right."""
    wrong = GOOD.replace("slot-1</slot>", "slot-2</slot>")
    strict = judge_strict(SPEC, wrong, final(appointment()))
    assert strict.reasons == ["<SLOT> says ['slot-2'], expected ['slot-1']"], strict.reasons
    light = judge_light(SPEC, wrong, final(appointment()))
    assert light.passed, light.reasons
    assert light.evidence["mode"] == "light" and light.evidence["answer"] == {
        "APPOINTMENT": "Appointment/appt-9",
        "SLOT": "slot-2",
    }


def test_diff_sees_creates_updates_deletes():
    state = MemoryState([PATIENT, {**SLOT, "status": "busy"}, appointment()], SEED)
    assert diff(state) == {
        "created": ["Appointment/appt-9"],
        "updated": ["Slot/slot-1"],
        "deleted": ["Patient/pat-2", "Practitioner/prac-1"],
    }


def test_matchers():
    coding = [{"system": "http://snomed.info/sct", "code": "1"}]
    assert match(coding, {"coding": "http://snomed.info/sct|1"}) is None
    assert match(coding, {"coding": "http://loinc.org|1"}) is not None
    assert match([52], 52) is None and match([52.0], 52) is None and match(["52"], 52) is not None
    assert match(["Colon Cancer"], {"words": "colon cancer"}) is None
    assert match(["2025-03-10T09:00:00-05:00"], {"day": "2025-03-10"}) is None
    assert match([], {"absent": True}) is None and match(["x"], {"absent": True}) is not None
    assert match(["Patient/a", "Practitioner/b"], {"has_refs": ["Patient/a"]}) is None
    assert match(["Patient/a", "Practitioner/b"], {"refs": ["Patient/a"]}) is not None
    assert (
        match(
            [{"reference": "RelatedPerson/r"}],
            {"created": "RelatedPerson"},
            {"RelatedPerson": "RelatedPerson/r"},
        )
        is None
    )
    assert match([True], True) is None and match([1], True) is not None


def test_none_and_count_answers():
    spec = read_check({"answer": {"COVERAGE": {"none": True}, "COUNT": {"count": 3}, "IDS": {"ids": "NONE"}}})
    state = MemoryState(SEED, SEED)
    assert judge_strict(spec, "<COVERAGE>No coverage found</COVERAGE><COUNT>3</COUNT><IDS>none</IDS>", state).passed
    assert not judge_strict(spec, "<COVERAGE>cov-1</COVERAGE><COUNT>3</COUNT><IDS>none</IDS>", state).passed
    assert not judge_strict(spec, "<COVERAGE>NONE</COVERAGE><COUNT>4</COUNT><IDS>none</IDS>", state).passed
    assert not judge_strict(spec, "<COVERAGE>NONE</COVERAGE><COUNT>3</COUNT><IDS>slot-1</IDS>", state).passed


# ---------------------------------------------------------------- answer checks by kind


def _answer(want, text):
    verdict = judge_strict(read_check({"answer": {"X": want}}), text, MemoryState(SEED, SEED))
    return verdict.passed, verdict.reasons


@pytest.mark.parametrize(
    ("want", "text", "passes"),
    [
        # single id: exactly one, the right one
        ({"id": "sr-1"}, "<X>sr-1</X>", True),
        ({"id": "sr-1"}, "<X>ServiceRequest/sr-1</X>", True),
        ({"id": "sr-1"}, "<X>sr-2, sr-1, sr-3</X>", False),
        ({"id": "sr-1"}, "<X>sr-1 sr-1</X>", True),
        ({"id": "sr-1"}, "<X>NONE</X>", False),
        ({"id": "NONE"}, "<X>NONE</X>", True),
        ({"id": "NONE"}, "<X>sr-1</X>", False),
        ({"id": "NONE"}, "<X></X>", False),
        # hedging: right then wrong, wrong then right
        ({"id": "sr-1"}, "<X>sr-1</X> <X>NONE</X>", False),
        ({"id": "sr-1"}, "<X>NONE</X> <X>sr-1</X>", False),
        # lists: the same set; an empty tag is not NONE
        ({"ids": "a-1, b-2"}, "<X>b-2, a-1</X>", True),
        ({"ids": "a-1, b-2"}, "<X>a-1</X>", False),
        ({"ids": "NONE"}, "<X>NONE</X>", True),
        ({"ids": "NONE"}, "<X></X>", False),
        ({"none": True}, "<X>  </X>", False),
        # numbers as numbers, unit optional
        ({"number": "6.5"}, "<X>6.5</X>", True),
        ({"number": "6.5"}, "<X>6.5 %</X>", True),
        ({"number": "6.5"}, "<X>5.6</X>", False),
        ({"number": "6.6"}, "<X>6.8</X>", False),
        ({"number": "7.0"}, "<X>7 %</X>", True),
        ({"number": "7.0"}, "<X>7.0 or 7.1</X>", False),
        ({"number": 6.5}, "<X>6.50</X>", True),
        # one term out of a vocabulary
        ({"term": "CFTR", "among": ["BRCA2", "CFTR"]}, "<X>Pathogenic variant in CFTR.</X>", True),
        ({"term": "CFTR", "among": ["BRCA2", "CFTR"]}, "<X>BRCA2, CFTR</X>", False),
        ({"term": "CFTR", "among": ["BRCA2", "CFTR"]}, "<X>BRCA2</X>", False),
        # counts: exactly one whole number
        ({"count": 3}, "<X>3 slots</X>", True),
        ({"count": 3}, "<X>3 or 4</X>", False),
    ],
)
def test_answer_kinds(want, text, passes):
    passed, reasons = _answer(want, text)
    assert passed is passes, reasons


# ---------------------------------------------------------------- nothing else changed, FHIR-aware

COVERAGE = {
    "resourceType": "Coverage",
    "id": "cov-1",
    "status": "active",
    "period": {"start": "2024-01-01", "end": "2025-12-31"},
    "payor": [{"reference": "Organization/org-1"}],
    "beneficiary": {"reference": "Patient/pat-1"},
    "class": [{"type": {"coding": [{"system": "s", "code": "group"}]}, "value": "GRP-1"}],
}
CANCEL = read_check(
    {"updates": [{"ref": "Coverage/cov-1", "fields": {"status": "cancelled", "period.end": {"day": "2025-03-03"}}}]}
)


def _cancelled(**changes):
    cancelled = {**COVERAGE, "status": "cancelled", "period": {"start": "2024-01-01", "end": "2025-03-03"}}
    return MemoryState([PATIENT, {**cancelled, **changes}], [PATIENT, COVERAGE])


def test_cancel_with_nothing_else_changed_passes():
    verdict = judge_strict(CANCEL, None, _cancelled())
    assert verdict.passed, verdict.reasons


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"period": {"start": "2024-02-01", "end": "2025-03-03"}}, "period.start"),
        ({"class": [*COVERAGE["class"], {"value": "PLN-9"}]}, "class"),
        (
            {"class": [{"type": {"coding": [{"system": "s", "code": "group"}, {"code": "x"}]}, "value": "GRP-1"}]},
            "class.type.coding",
        ),
        ({"payor": [{"reference": "Organization/org-2"}]}, "payor.reference"),
        ({"subscriberId": "M1"}, "subscriberId"),
    ],
)
def test_a_nested_change_the_task_leaves_alone_fails_strict(changes, where):
    verdict = judge_strict(CANCEL, None, _cancelled(**changes))
    assert f"Coverage/cov-1 {where}: changed, but the task leaves it alone" in verdict.reasons, verdict.reasons
    assert judge_light(CANCEL, None, _cancelled(**changes)).passed


def test_an_extra_telecom_entry_fails_strict():
    spec = read_check(
        {"updates": [{"ref": "Patient/pat-1", "fields": {"telecom.where(system='phone').value": "555-1"}}]}
    )
    seed = {**PATIENT, "telecom": [{"system": "phone", "value": "555-0"}]}
    replaced = {**PATIENT, "telecom": [{"system": "phone", "value": "555-1"}]}
    assert judge_strict(spec, None, MemoryState([replaced], [seed])).passed
    added = {**PATIENT, "telecom": [{"system": "phone", "value": "555-1"}, {"system": "email", "value": "a@b"}]}
    verdict = judge_strict(spec, None, MemoryState([added], [seed]))
    assert "Patient/pat-1 telecom: changed, but the task leaves it alone" in verdict.reasons, verdict.reasons


def test_equivalent_forms_are_no_change():
    """Instants as instants, decimals as numbers, server meta and narrative ignored."""
    written = {
        **SLOT,
        "start": "2025-03-10T09:00:00.000+00:00",
        "end": "2025-03-10T11:00:00+01:00",
        "meta": {"versionId": "7", "lastUpdated": "2025-03-10T08:00:00Z"},
        "text": {"status": "generated", "div": "<div/>"},
    }
    state = MemoryState([PATIENT, DOCTOR, written, OTHER], SEED)
    assert diff(state) == {"created": [], "updated": [], "deleted": []}
    moved = {**SLOT, "start": "2025-03-10T09:00:01Z"}
    assert diff(MemoryState([PATIENT, DOCTOR, moved, OTHER], SEED))["updated"] == ["Slot/slot-1"]
    weighed = {"resourceType": "Observation", "id": "o", "valueQuantity": {"value": 7}}
    assert diff(MemoryState([{**weighed, "valueQuantity": {"value": 7.0}}], [weighed]))["updated"] == []
    assert diff(MemoryState([{**weighed, "valueQuantity": {"value": 7.01}}], [weighed]))["updated"] == ["Observation/o"]
    tagged = {**weighed, "meta": {"tag": [{"code": "x"}]}}
    assert diff(MemoryState([tagged], [weighed]))["updated"] == ["Observation/o"]
