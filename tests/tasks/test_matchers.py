"""Field matchers: lists mean all, one item's fields together, units and systems compared."""

from __future__ import annotations

import pytest

from fae.tasks.matchers import match
from fae.tasks.selection import values

ACTIVE = {"system": "http://terminology.hl7.org/CodeSystem/condition-clinical", "code": "active"}
RESOLVED = {**ACTIVE, "code": "resolved"}
AGE = {"value": 52, "unit": "years", "system": "http://unitsofmeasure.org", "code": "a"}


def ok(found, matcher, created=None):
    return match(found, matcher, created) is None


@pytest.mark.parametrize(
    ("found", "matcher", "passes"),
    [
        ([ACTIVE], {"coding": "http://terminology.hl7.org/CodeSystem/condition-clinical|active"}, True),
        ([ACTIVE, {**ACTIVE, "display": "Active"}], {"coding": f"{ACTIVE['system']}|active"}, True),
        ([ACTIVE, RESOLVED], {"coding": f"{ACTIVE['system']}|active"}, False),  # a contradicting sibling
        ([{**ACTIVE, "system": "http://example.org/mine"}], {"coding": f"{ACTIVE['system']}|active"}, False),
        (
            [ACTIVE, {"system": "http://snomed.info/sct", "code": "55561003"}],
            {"coding": f"{ACTIVE['system']}|active"},
            False,
        ),  # another code system: fae cannot tell a translation from a second concept
        ([], {"coding": f"{ACTIVE['system']}|active"}, False),
        (["booked"], "booked", True),
        (["booked", "cancelled"], "booked", False),
        ([52], 52.0, True),
        (["2025-03-10T10:00:00+01:00"], {"instant": "2025-03-10T09:00:00Z"}, True),
        (["2025-03-10T09:00:00Z", "2026-03-10T09:00:00Z"], {"instant": "2025-03-10T09:00:00Z"}, False),
        ([AGE], {"quantity": "52 a"}, True),
        ([{**AGE, "value": 52.0, "unit": "yr"}], {"quantity": {"value": 52, "code": "a"}}, True),
        ([{**AGE, "code": "mo"}], {"quantity": "52 a"}, False),  # an age in months is not an age in years
        ([{**AGE, "system": "http://example.org/units"}], {"quantity": "52 a"}, False),
        ([{**AGE, "comparator": "<"}], {"quantity": "52 a"}, False),
        ([{"value": 52}], {"quantity": "52 a"}, False),
        (["home", "mobile"], {"in": ["home", "work", "mobile"]}, True),
        (["old"], {"in": ["home", "work", "mobile"]}, False),
        (["a", "b"], {"set": ["b", "a"]}, True),
        (["a"], {"set": ["b", "a"]}, False),
        (["a", "b", "c"], {"set": ["b", "a"]}, False),
    ],
)
def test_values_match_as_all(found, matcher, passes):
    assert ok(found, matcher) is passes, match(found, matcher)


def test_references_are_plain_and_exact():
    refs = {"refs": ["Patient/p", "Practitioner/d"]}
    assert ok([{"reference": "http://base/fhir/Patient/p"}, {"reference": "Practitioner/d/_history/2"}], refs)
    assert ok([{"reference": "Patient/p", "type": "Patient"}, {"reference": "Practitioner/d"}], refs)
    assert not ok([{"reference": "Patient/p", "type": "Group"}, {"reference": "Practitioner/d"}], refs)
    assert not ok([{"reference": "Patient/p", "identifier": {"value": "x"}}, {"reference": "Practitioner/d"}], refs)
    assert not ok([{"reference": "Patient/p"}, {"reference": "Practitioner/d"}, {"reference": "Patient/q"}], refs)
    assert ok([{"reference": "Patient/p"}], {"created": "Patient"}, {"Patient": "Patient/p"})
    assert not ok([{"reference": "Patient/q"}], {"created": "Patient"}, {"Patient": "Patient/p"})


PARTICIPANTS = {
    "exactly": [
        {"actor": {"refs": ["Patient/p"]}, "status": "accepted"},
        {"actor": {"refs": ["Practitioner/d"]}, "status": "accepted"},
    ]
}


def person(ref, status="accepted"):
    return {"actor": {"reference": ref}, "status": status}


@pytest.mark.parametrize(
    ("items", "passes"),
    [
        ([person("Practitioner/d"), person("Patient/p")], True),  # any order
        ([person("Patient/p"), person("Practitioner/d", "declined")], False),
        ([person("Patient/p"), person("Practitioner/d"), person("Patient/q")], False),  # one more
        ([person("Patient/p")], False),
        ([person("Patient/p"), person("Patient/p")], False),  # the same item cannot fit two
    ],
)
def test_exactly_pairs_each_listed_item_with_its_own(items, passes):
    assert ok(items, PARTICIPANTS) is passes


def test_one_items_fields_are_matched_together():
    """The right code on one condition and the right onset age on another is not a condition with both."""
    code = {"coding": [{"system": "http://snomed.info/sct", "code": "363406005"}]}
    other = {"coding": [{"system": "http://snomed.info/sct", "code": "254837009"}]}
    spec = {"all": {"code.coding": {"coding": "http://snomed.info/sct|363406005"}, "onsetAge": {"quantity": "52 a"}}}
    assert ok([{"code": code, "onsetAge": AGE}], spec)
    mixed = [{"code": code, "onsetAge": {**AGE, "value": 60}}, {"code": other, "onsetAge": AGE}]
    assert not ok(mixed, spec)
    assert not ok([], spec)


def test_contains_with_a_key_refuses_a_contradicting_sibling_only():
    spec = {"contains": [{"system": "phone", "value": "555-0100"}], "key": ["system"]}
    phone = {"system": "phone", "value": "555-0100"}
    assert ok([phone, {"system": "email", "value": "x@example.org"}], spec)  # another kind of entry
    assert not ok([phone, {"system": "phone", "value": "555-0199"}], spec)  # a second, other phone
    assert not ok([{"system": "email", "value": "x@example.org"}], spec)
    unkeyed = {"contains": [{"system": "phone", "value": "555-0100"}]}
    assert ok([phone, {"system": "phone", "value": "555-0199"}], unkeyed)


def test_sub_fields_are_fhirpath_from_the_item():
    item = {"type": {"coding": [{"system": "http://x/cc", "code": "group"}]}, "value": "G-1"}
    assert values(item, "type.coding.code") == ["group"]
    spec = {"exactly": [{"type.coding": {"coding": "http://x/cc|group"}, "value": "G-1"}]}
    assert ok([item], spec)
    assert not ok([{**item, "value": "G-2"}], spec)


def test_a_malformed_matcher_is_a_value_error():
    with pytest.raises(ValueError, match="one kind"):
        match(["x"], {"equals": "x", "ci": "x"})
    with pytest.raises(ValueError, match="unknown matcher"):
        match(["x"], {"nearly": "x"})
    with pytest.raises(ValueError, match="quantity"):
        match([AGE], {"quantity": "years"})
