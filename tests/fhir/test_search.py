"""Search semantics on the engine: each parameter type, modifiers, chaining, includes, shaping."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from fae.fhir.engine import FhirEngine

SEED = {
    "resourceType": "Bundle",
    "type": "collection",
    "entry": [
        {"resource": r}
        for r in [
            {
                "resourceType": "Patient",
                "id": "anna",
                "name": [{"family": "Müller", "given": ["Anna"]}],
                "gender": "female",
                "birthDate": "1980-05-01",
                "active": True,
                "identifier": [{"system": "urn:mrn", "value": "A1"}],
                "address": [{"city": "Zürich"}],
            },
            {
                "resourceType": "Patient",
                "id": "bob",
                "name": [{"family": "Mullins", "given": ["Bob"]}],
                "gender": "male",
                "birthDate": "1975",
                "identifier": [{"system": "urn:other", "value": "A1"}],
            },
            {"resourceType": "Patient", "id": "cy", "name": [{"text": "Cy Nobody"}], "gender": "other"},
            {"resourceType": "Practitioner", "id": "doc", "name": [{"family": "House"}]},
            {"resourceType": "Schedule", "id": "sch", "actor": [{"reference": "Practitioner/doc"}]},
            {
                "resourceType": "Slot",
                "id": "slot1",
                "schedule": {"reference": "Schedule/sch"},
                "status": "free",
                "start": "2024-01-02T09:00:00Z",
                "end": "2024-01-02T09:30:00Z",
            },
            {
                "resourceType": "Observation",
                "id": "bp",
                "status": "final",
                "code": {
                    "coding": [{"system": "http://loinc.org", "code": "8480-6", "display": "Systolic BP"}],
                    "text": "Systolic blood pressure",
                },
                "subject": {"reference": "Patient/anna"},
                "effectiveDateTime": "2024-03-05T10:00:00Z",
                "valueQuantity": {
                    "value": 120.5,
                    "unit": "mmHg",
                    "system": "http://unitsofmeasure.org",
                    "code": "mm[Hg]",
                },
            },
            {
                "resourceType": "Observation",
                "id": "hr",
                "status": "amended",
                "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4"}]},
                "subject": {"reference": "Patient/bob"},
                "effectivePeriod": {"start": "2024-03-01", "end": "2024-03-31"},
                "valueQuantity": {"value": 72, "unit": "/min", "system": "http://unitsofmeasure.org", "code": "/min"},
            },
            {
                "resourceType": "RiskAssessment",
                "id": "risk",
                "status": "final",
                "subject": {"reference": "Patient/anna"},
                "prediction": [{"probabilityDecimal": 0.25}],
            },
            {"resourceType": "ValueSet", "id": "vs", "status": "active", "url": "http://example.org/fhir/ValueSet/x"},
            {
                "resourceType": "Provenance",
                "id": "prov",
                "target": [{"reference": "Observation/bp"}],
                "recorded": "2024-03-05T10:00:00Z",
                "agent": [{"who": {"reference": "Practitioner/doc"}}],
            },
        ]
    ],
}


@pytest.fixture(scope="module")
def seeded():
    clock = lambda: datetime(2024, 6, 1, tzinfo=UTC)  # noqa: E731
    engine = FhirEngine(clock=clock)
    return engine, engine.create_sandbox(SEED)


def found(seeded, rtype: str, query: str, headers=None, mode: str = "match") -> list[str]:
    engine, sid = seeded
    r = engine.handle(sid, "GET", rtype, query, headers)
    assert r.status == 200, r.body
    return [e["resource"]["id"] for e in r.json().get("entry", []) if e["search"]["mode"] == mode]


def status_of(seeded, rtype: str, query: str, headers=None) -> int:
    engine, sid = seeded
    return engine.handle(sid, "GET", rtype, query, headers).status


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("name=mul", ["anna", "bob"]),
        ("name=MULLER", ["anna"]),  # accent- and case-insensitive
        ("name=uller", []),  # starts-with by default
        ("name:contains=uller", ["anna"]),
        ("name:exact=Müller", ["anna"]),
        ("name:exact=muller", []),
        ("name=cy", ["cy"]),  # HumanName.text
        ("address-city=zurich", ["anna"]),
        ("family=mullins,house", ["bob"]),  # OR by comma
        ("name=mul&gender=male", ["bob"]),  # AND by repetition
    ],
)
def test_string(seeded, query, expected):
    assert found(seeded, "Patient", query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("identifier=urn:mrn|A1", ["anna"]),
        ("identifier=A1", ["anna", "bob"]),
        ("identifier=urn:mrn|", ["anna"]),
        ("identifier=|A1", []),
        ("gender=female", ["anna"]),
        ("gender:not=female", ["bob", "cy"]),
        ("active=true", ["anna"]),
        ("_id=bob,cy", ["bob", "cy"]),
    ],
)
def test_token_patient(seeded, query, expected):
    assert found(seeded, "Patient", query) == expected


def test_token_text_and_system(seeded):
    assert found(seeded, "Observation", "code:text=systolic") == ["bp"]
    assert found(seeded, "Observation", "code:text=diastolic") == []
    assert found(seeded, "Observation", "code=http://loinc.org|8867-4") == ["hr"]
    assert found(seeded, "Observation", "code=http://snomed.info/sct|8867-4") == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("subject=Patient/anna", ["bp"]),
        ("subject=anna", ["bp"]),
        ("patient=bob", ["hr"]),
        ("subject:Patient=bob", ["hr"]),
        ("subject=http://elsewhere.example/fhir/Patient/anna", ["bp"]),
        ("subject=Patient/nobody", []),
        ("subject:missing=true", []),
        ("subject:missing=false", ["bp", "hr"]),
    ],
)
def test_reference(seeded, query, expected):
    assert found(seeded, "Observation", query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("date=2024-03-05", ["bp"]),
        ("date=2024-03", ["bp", "hr"]),
        ("date=gt2024-03-05", ["hr"]),  # the period runs past the 5th
        ("date=lt2024-03-02", ["hr"]),
        ("date=ge2024-03-05T10:00:00Z", ["bp", "hr"]),
        ("date=sa2024-02-29", ["bp", "hr"]),
        ("date=eb2024-03-05", []),
        ("date=ne2024-03", []),
        ("date=ap2024-03-05", ["bp", "hr"]),
    ],
)
def test_date(seeded, query, expected):
    assert found(seeded, "Observation", query) == expected


def test_date_implicit_precision_on_target(seeded):
    assert found(seeded, "Patient", "birthdate=1975") == ["bob"]
    assert found(seeded, "Patient", "birthdate=1975-06-01") == []  # a year is not inside a day
    assert found(seeded, "Patient", "birthdate=lt1976") == ["anna", "bob"][1:]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("value-quantity=120.5", ["bp"]),
        ("value-quantity=120", []),  # 120 means [119.5, 120.5): 120.5 is outside
        ("value-quantity=gt100", ["bp"]),
        ("value-quantity=lt100|http://unitsofmeasure.org|/min", ["hr"]),
        ("value-quantity=lt100|http://unitsofmeasure.org|mm[Hg]", []),
        ("value-quantity=ap75", ["hr"]),
    ],
)
def test_quantity(seeded, query, expected):
    assert found(seeded, "Observation", query) == expected


def test_number_and_uri(seeded):
    assert found(seeded, "RiskAssessment", "probability=0.25") == ["risk"]
    assert found(seeded, "RiskAssessment", "probability=gt0.5") == []
    assert found(seeded, "ValueSet", "url=http://example.org/fhir/ValueSet/x") == ["vs"]
    assert found(seeded, "ValueSet", "url=http://example.org/fhir") == []
    assert found(seeded, "ValueSet", "url:below=http://example.org/fhir") == ["vs"]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "sNaN", "apNaN", "gtInfinity", "1e"])
def test_a_number_that_is_not_finite_is_refused(seeded, value):
    assert status_of(seeded, "RiskAssessment", f"probability={value}") == 400
    assert status_of(seeded, "Observation", f"value-quantity={value}") == 400


def test_ap_around_zero_and_exponents(seeded):
    assert found(seeded, "RiskAssessment", "probability=ap0") == []
    assert found(seeded, "RiskAssessment", "probability=ap0.26") == ["risk"]  # within 10%
    assert found(seeded, "RiskAssessment", "probability=ap0.3") == []
    assert found(seeded, "RiskAssessment", "probability=25e-2") == ["risk"]


def test_chaining_and_has(seeded):
    assert found(seeded, "Slot", "schedule.actor=Practitioner/doc") == ["slot1"]
    assert found(seeded, "Slot", "schedule.actor=Practitioner/other") == []
    assert found(seeded, "Observation", "patient.name=anna") == ["bp"]
    assert found(seeded, "Observation", "subject:Patient.gender=male") == ["hr"]
    assert found(seeded, "Patient", "_has:Observation:patient:code=8480-6") == ["anna"]
    assert found(seeded, "Patient", "_has:Observation:patient:code=0000-0") == []


def test_include_revinclude_iterate(seeded):
    assert found(seeded, "Observation", "_id=bp&_include=Observation:subject", mode="include") == ["anna"]
    assert found(seeded, "Observation", "_id=bp&_include=Observation:subject:Group", mode="include") == []
    assert found(seeded, "Observation", "_id=bp&_revinclude=Provenance:target", mode="include") == ["prov"]
    assert found(seeded, "Slot", "_include=Slot:schedule", mode="include") == ["sch"]
    assert sorted(found(seeded, "Slot", "_include=Slot:schedule&_include:iterate=Schedule:actor", mode="include")) == [
        "doc",
        "sch",
    ]


def test_sort_count_paging(seeded):
    assert found(seeded, "Patient", "_sort=birthdate") == ["bob", "anna", "cy"]
    assert found(seeded, "Patient", "_sort=-birthdate") == ["anna", "bob", "cy"]
    assert found(seeded, "Patient", "_sort=gender,-_id") == ["anna", "bob", "cy"]
    engine, sid = seeded
    first = engine.handle(sid, "GET", "Patient", "_count=2&_sort=_id", base_url="http://h/fhir").json()
    assert [e["resource"]["id"] for e in first["entry"]] == ["anna", "bob"]
    nxt = next(link["url"] for link in first["link"] if link["relation"] == "next")
    path, query = nxt.removeprefix("http://h/fhir/").split("?")
    second = engine.handle(sid, "GET", path, query).json()
    assert [e["resource"]["id"] for e in second["entry"]] == ["cy"]
    assert not [link for link in second["link"] if link["relation"] == "next"]
    assert status_of(seeded, "Patient", "_count=abc") == 400
    assert status_of(seeded, "Patient", "_sort=nonsense") == 400


def test_summary_elements_total(seeded):
    engine, sid = seeded
    counted = engine.handle(sid, "GET", "Patient", "_summary=count").json()
    assert counted["total"] == 3 and "entry" not in counted
    no_total = engine.handle(sid, "GET", "Patient", "_total=none").json()
    assert "total" not in no_total
    subset = engine.handle(sid, "GET", "Patient", "_id=anna&_elements=gender").json()["entry"][0]["resource"]
    assert set(subset) == {"resourceType", "id", "meta", "gender"}
    assert subset["meta"]["tag"][0]["code"] == "SUBSETTED"
    summary = engine.handle(sid, "GET", "Patient", "_id=anna&_summary=true").json()["entry"][0]["resource"]
    assert "address" in summary and "name" in summary


def test_an_unknown_parameter_is_refused_unless_the_client_asks_for_lenient_handling(seeded):
    """HAPI FHIR's default: 400 naming the parameter and the type's parameters, never every resource; under
    `Prefer: handling=lenient` (FHIR R4 search, "Handling errors") it is ignored and the Bundle says so."""
    engine, sid = seeded
    for headers in ({}, {"Prefer": "handling=strict"}, {"Prefer": "return=minimal, handling=strict"}):
        refused = engine.handle(sid, "GET", "Patient", "shoe-size=12", headers)
        assert refused.status == 400, headers
        problem = refused.json()["issue"][0]
        assert problem["code"] == "not-supported" and problem["expression"] == ["shoe-size"], problem
        said = problem["diagnostics"]
        assert "Unknown or unsupported search parameter 'shoe-size' for Patient" in said, said
        assert "birthdate, " in said and "handling=lenient" in said, "the type's parameters are listed"
    assert engine.handle(sid, "GET", "Patient", "general-practitioner.shoe-size=1").status == 400, "chained too"
    assert engine.handle(sid, "GET", "Patient", "_has:Observation:subject:shoe-size=1").status == 400
    lenient = engine.handle(sid, "GET", "Patient", "shoe-size=12", {"Prefer": "handling=lenient"}).json()
    outcomes = [e for e in lenient["entry"] if e["search"]["mode"] == "outcome"]
    assert len(outcomes) == 1 and outcomes[0]["resource"]["resourceType"] == "OperationOutcome"
    assert "shoe-size" in json.dumps(outcomes) and "ignored" in json.dumps(outcomes)
    assert lenient["total"] == 3, "lenient: the unknown parameter filters nothing"
    assert status_of(seeded, "Patient", "gender=female&_count=1&_sort=birthdate&_format=json") == 200
    assert status_of(seeded, "Patient", "birthdate=notadate") == 400
    assert status_of(seeded, "Patient", "name:sounds=x") == 400
    assert status_of(seeded, "Patient", "gender:missing=maybe") == 400


def test_system_search_by_type(seeded):
    got = found(seeded, "", "_type=Practitioner,Schedule")
    assert sorted(got) == ["doc", "sch"]
    assert status_of(seeded, "", "_type=Nope") == 400
