"""A created resource judged whole: what the check looked at, the benign additions, and everything else failing."""

from __future__ import annotations

import pytest

from fae.fhir.elements import locate
from fae.tasks.check_spec import read_check
from fae.tasks.checks import judge_light, judge_strict
from fae.tasks.state import MemoryState
from fae.tasks.whole import additions, uninvited

PATIENT = {"resourceType": "Patient", "id": "pat-1"}
SNOMED = "http://snomed.info/sct"
CLINICAL = "http://terminology.hl7.org/CodeSystem/condition-clinical"
FIELDS = {
    "subject": {"refs": ["Patient/pat-1"]},
    "code.coding": {"coding": f"{SNOMED}|59621000"},
    "clinicalStatus.coding": {"coding": f"{CLINICAL}|active"},
}


def condition(**extra):
    return {
        "resourceType": "Condition",
        "id": "c-1",
        "meta": {"versionId": "1", "lastUpdated": "2025-03-03T08:00:00Z"},
        "text": {"status": "generated", "div": "<div>narrative is the server's</div>"},
        "subject": {"reference": "Patient/pat-1"},
        "code": {"coding": [{"system": SNOMED, "code": "59621000"}]},
        "clinicalStatus": {"coding": [{"system": CLINICAL, "code": "active"}]},
        **extra,
    }


def problems(resource, fields=FIELDS, **kw):
    return uninvited(resource["resourceType"], resource, fields, created={}, **kw)


def strict(resource, spec_entry=None):
    entry = spec_entry or {"type": "Condition", "fields": FIELDS}
    return judge_strict(read_check({"creates": [entry]}), None, MemoryState([PATIENT, resource], [PATIENT]))


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"meta": {"tag": [{"system": "http://example.org/tags", "code": "triaged"}], "profile": ["http://x/p"]}},
        {"identifier": [{"system": "urn:agent", "value": "1"}]},
        {"recordedDate": "2025-03-03"},
        {"note": [{"text": "reported by the patient"}]},
        {"extension": [{"url": "http://example.org/ext", "valueString": "x"}]},
        {"code": {"coding": [{"system": SNOMED, "code": "59621000", "display": "Hypertension"}], "text": "HTN"}},
        {"subject": {"reference": "Patient/pat-1", "display": "Jane", "type": "Patient"}},
        {"_recordedDate": {"extension": [{"url": "http://example.org/e", "valueCode": "x"}]}, "recordedDate": "2025"},
    ],
    ids=[
        "as-asked",
        "meta",
        "identifier",
        "recorded-date",
        "note",
        "extension",
        "display-text",
        "ref-display",
        "primitive-extension",
    ],
)
def test_benign_additions_pass(extra):
    assert problems(condition(**extra)) == []
    assert strict(condition(**extra)).passed


@pytest.mark.parametrize(
    ("extra", "element", "modifier"),
    [
        ({"verificationStatus": {"coding": [{"code": "refuted"}]}}, "verificationStatus", True),
        ({"verificationStatus": {"text": "refuted"}}, "verificationStatus", True),
        ({"implicitRules": "http://example.org/reversed"}, "implicitRules", True),
        ({"modifierExtension": [{"url": "http://example.org/not", "valueBoolean": True}]}, "modifierExtension", True),
        ({"identifier": [{"value": "1", "use": "old"}]}, "identifier.use", True),
        ({"onsetDateTime": "2020-01-01"}, "onsetDateTime", False),
        ({"severity": {"text": "severe"}}, "severity", False),
        ({"meta": {"security": [{"code": "R"}]}}, "meta.security", False),
        ({"contained": [{"resourceType": "Patient", "id": "x"}]}, "contained", False),
        ({"bogusElement": 1}, "bogusElement", False),
    ],
)
def test_anything_else_fails_and_names_the_element(extra, element, modifier):
    found = problems(condition(**extra))
    assert len(found) == 1, found
    assert found[0].startswith(f"Condition.{element} "), found
    assert ("modifier element" in found[0]) is modifier, found
    verdict = strict(condition(**extra))
    assert not verdict.passed and element in " ".join(verdict.reasons)


def test_a_modifier_inside_a_checked_element_still_fails():
    """The check looked at the age as a quantity; a comparator (``<52``) changes what it means."""
    fields = {"condition": {"exactly": [{"onsetAge": {"quantity": "52 a"}}]}}
    age = {"value": 52, "unit": "years", "system": "http://unitsofmeasure.org", "code": "a"}
    relative = {"resourceType": "FamilyMemberHistory", "id": "f", "condition": [{"onsetAge": age}]}
    assert problems(relative, fields) == []
    shifted = {**relative, "condition": [{"onsetAge": {**age, "comparator": "<"}}]}
    assert any("condition.onsetAge.comparator" in p for p in problems(shifted, fields))


def test_a_filter_vouches_for_the_items_it_selected_only():
    """``telecom.where(system='phone')`` looked at the phone entry, not at an e-mail beside it."""
    fields = {"telecom.where(system='phone').value": "555-0100"}
    phone = {"system": "phone", "value": "555-0100"}
    patient = {"resourceType": "Patient", "id": "p", "telecom": [phone]}
    assert problems(patient, fields) == []
    found = problems({**patient, "telecom": [phone, {"system": "email", "value": "x@example.org"}]}, fields)
    assert found and found[0].startswith("Patient.telecom "), found


def test_an_allowance_with_a_value_allows_only_that_value():
    request = {
        "resourceType": "ServiceRequest",
        "id": "sr",
        "status": "active",
        "intent": "order",
        "subject": {"reference": "Patient/pat-1"},
    }
    fields = {"status": "active", "intent": "order", "subject": {"refs": ["Patient/pat-1"]}}
    assert problems({**request, "priority": "routine"}, fields) == []
    assert problems({**request, "priority": "stat"}, fields) == [
        "ServiceRequest.priority is not asked for by the task: 'stat'"
    ]
    assert problems({**request, "doNotPerform": True}, fields) == [
        "ServiceRequest.doNotPerform is a modifier element the task did not ask for: True"
    ]


def test_a_tasks_own_allow_list_and_optional_fields():
    entry = {"type": "Condition", "fields": FIELDS, "allow": ["onsetDateTime"]}
    assert strict(condition(onsetDateTime="2020"), entry).passed
    status = "http://terminology.hl7.org/CodeSystem/condition-ver-status"
    confirmed = {"coding": [{"system": status, "code": "x"}]}
    optional = {
        "type": "Condition",
        "fields": FIELDS,
        "optional": {"verificationStatus.coding": {"coding": f"{status}|confirmed"}},
    }
    assert strict(condition(), optional).passed  # absent: fine
    good = {"coding": [{**confirmed["coding"][0], "code": "confirmed"}]}
    assert strict(condition(verificationStatus=good), optional).passed
    verdict = strict(condition(verificationStatus=confirmed), optional)
    assert not verdict.passed and "(optional, given)" in " ".join(verdict.reasons)


def test_light_does_not_judge_the_rest():
    entry = {"type": "Condition", "fields": FIELDS}
    bad = condition(verificationStatus={"coding": [{"code": "refuted"}]})
    light = judge_light(read_check({"creates": [entry]}), None, MemoryState([PATIENT, bad], [PATIENT]))
    assert light.passed, light.reasons


def test_no_allowance_is_a_modifier_or_an_unknown_element():
    """The allow-list is reviewed against the R4 definitions: every entry is an element, none is a modifier."""
    listed = additions()
    for resource_type, entries in [(t, listed.for_type(t)) for t in listed.resources]:
        for path, _matcher in entries:
            place = locate(resource_type, tuple(path.split(".")))
            assert place is not None, f"{resource_type}.{path} is not an R4 element"
            assert not place.modifier, f"{resource_type}.{path} is a modifier element"
    for datatype, parts in listed.datatypes.items():
        for part in parts:
            place = locate(datatype, (part,))
            assert place is not None and not place.modifier, f"{datatype}.{part}"


def test_locate_reads_choices_backbones_content_references_and_datatypes():
    assert locate("FamilyMemberHistory", ("condition", "onsetAge", "comparator")).modifier
    assert locate("FamilyMemberHistory", ("condition", "onsetAge", "unit")).datatype == "string"
    assert locate("Consent", ("provision", "provision", "type")).trail[-1].path == "Consent.provision.type"
    assert locate("Condition", ("code", "coding", "display")).datatype == "string"
    assert locate("Patient", ("deceasedBoolean",)).modifier
    assert locate("Patient", ("deceasedQuantity",)) is None  # not one of deceased[x]'s types
    assert locate("Condition", ("nonsense",)) is None
