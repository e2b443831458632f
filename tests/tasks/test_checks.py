"""The check-spec validators on hand-built final states (no server)."""

from __future__ import annotations

from fae.tasks.checks import diff, judge, match
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

SPEC = {
    "answer": {"APPOINTMENT": {"created": "Appointment"}, "SLOT": {"ids": ["slot-1"]}},
    "creates": [
        {
            "type": "Appointment",
            "fields": {
                "status": "booked",
                "participant.actor": {"refs": ["Patient/pat-1", "Practitioner/prac-1"]},
                "start": {"instant": "2025-03-10T09:00:00Z"},
                "slot": {"refs": ["Slot/slot-1"]},
            },
        }
    ],
    "updates": [{"ref": "Slot/slot-1", "fields": {"status": "busy"}}],
}


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
    resources = [r for r in SEED if r["id"] not in drop and r is not SLOT] + [
        {**SLOT, "status": slot_status}
    ]
    return MemoryState(resources + list(extra), SEED)


GOOD = "<APPOINTMENT>Appointment/appt-9</APPOINTMENT> <slot>slot-1</slot>"


def test_memory_state_is_a_state_view():
    assert isinstance(final(), StateView)


def test_right_outcome_passes_with_other_offset_order_and_absolute_refs():
    verdict = judge(SPEC, GOOD, final(appointment()), light=False)
    assert verdict.passed, verdict.reasons
    assert verdict.evidence["judged"] == {"Appointment": "Appointment/appt-9"}


def test_wrong_instant_fails():
    state = final(appointment(start="2025-03-10T09:00:00+01:00"))
    assert not judge(SPEC, GOOD, state, light=False).passed
    assert judge(SPEC, GOOD, state, light=True).passed  # light does not enforce values


def test_wrong_patient_fails():
    wrong = appointment(
        participant=[
            {"actor": {"reference": "Patient/pat-2"}, "status": "accepted"},
            {"actor": {"reference": "Practitioner/prac-1"}, "status": "accepted"},
        ]
    )
    verdict = judge(SPEC, GOOD, final(wrong), light=False)
    assert not verdict.passed and "participant.actor" in " ".join(verdict.reasons)


def test_wrong_id_answered_fails():
    assert not judge(
        SPEC, GOOD.replace("appt-9", "appt-8"), final(appointment()), light=False
    ).passed
    assert not judge(
        SPEC, GOOD.replace("slot-1</slot>", "slot-2</slot>"), final(appointment()), light=False
    ).passed


def test_duplicate_create_fails():
    verdict = judge(SPEC, GOOD, final(appointment(), appointment(id="appt-10")), light=False)
    assert not verdict.passed
    assert verdict.reasons == [
        "expected 1 new Appointment, found 2: ['Appointment/appt-10', 'Appointment/appt-9']",
        "unexpected writes (created): ['Appointment/appt-10']",
    ]


def test_collateral_write_fails_and_meta_only_change_does_not():
    touched = {**OTHER, "name": [{"family": "Changed"}]}
    state = MemoryState([PATIENT, DOCTOR, {**SLOT, "status": "busy"}, touched, appointment()], SEED)
    verdict = judge(SPEC, GOOD, state, light=False)
    assert (
        not verdict.passed and "unexpected writes (updated): ['Patient/pat-2']" in verdict.reasons
    )
    versioned = {**OTHER, "meta": {"versionId": "2"}}
    state = MemoryState(
        [PATIENT, DOCTOR, {**SLOT, "status": "busy"}, versioned, appointment()], SEED
    )
    assert judge(SPEC, GOOD, state, light=False).passed


def test_delete_fails():
    verdict = judge(SPEC, GOOD, final(appointment(), drop=("pat-2",)), light=False)
    assert "unexpected writes (deleted): ['Patient/pat-2']" in verdict.reasons


def test_slot_left_as_seeded_fails_strict_and_light():
    """Light asks that the agent wrote the target; a slot the seed already had does not count."""
    state = final(appointment(), slot_status="free")
    for light in (False, True):
        verdict = judge(SPEC, GOOD, state, light=light)
        assert not verdict.passed
        assert "Slot/slot-1 was not updated by the agent" in verdict.reasons, verdict.reasons


def test_slot_written_with_a_wrong_value_fails_strict_only():
    state = final(appointment(), slot_status="busy-tentative")
    assert not judge(SPEC, GOOD, state, light=False).passed
    assert judge(SPEC, GOOD, state, light=True).passed


def test_a_write_by_someone_else_is_not_the_agents():
    """The slot is busy in the final state, but the agent's own writes did not touch it."""
    state = final(appointment())
    agent = {"Appointment/appt-9"}
    for light in (False, True):
        verdict = judge(SPEC, GOOD, state, light=light, written=agent)
        assert verdict.reasons == ["Slot/slot-1 was not updated by the agent"], verdict.reasons
    both = agent | {"Slot/slot-1"}
    assert judge(SPEC, GOOD, state, light=True, written=both).passed
    assert judge(SPEC, GOOD, state, light=False, written=both).passed
    verdict = judge(SPEC, GOOD, state, light=True, written={"Slot/slot-1"})
    assert "new Appointment: none created by the agent" in verdict.reasons, verdict.reasons


def test_missing_field_fails_light():
    bare = appointment()
    del bare["participant"]
    verdict = judge(SPEC, GOOD, final(bare), light=True)
    assert not verdict.passed and "participant.actor: missing" in " ".join(verdict.reasons)


def test_missing_tag_fails_light():
    assert not judge(
        SPEC, "<APPOINTMENT>appt-9</APPOINTMENT>", final(appointment()), light=True
    ).passed


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
    spec = {"answer": {"COVERAGE": {"none": True}, "COUNT": {"count": 3}, "IDS": {"ids": "NONE"}}}
    state = MemoryState(SEED, SEED)
    assert judge(
        spec,
        "<COVERAGE>No coverage found</COVERAGE><COUNT>3</COUNT><IDS>none</IDS>",
        state,
        light=False,
    ).passed
    assert not judge(
        spec, "<COVERAGE>cov-1</COVERAGE><COUNT>3</COUNT><IDS>none</IDS>", state, light=False
    ).passed
    assert not judge(
        spec, "<COVERAGE>NONE</COVERAGE><COUNT>4</COUNT><IDS>none</IDS>", state, light=False
    ).passed
    assert not judge(
        spec, "<COVERAGE>NONE</COVERAGE><COUNT>3</COUNT><IDS>slot-1</IDS>", state, light=False
    ).passed
