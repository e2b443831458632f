"""The engine's in-process API: sandboxes, state loading, the injected clock, validation, audit."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from fae.errors import FhirError
from fae.fhir.engine import FhirEngine


def seed(n: int = 3) -> dict:
    return {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": {"resourceType": "Patient", "id": f"p{i}", "name": [{"family": f"F{i}"}]}} for i in range(n)
        ],
    }


def post(engine, sid, resource, headers=None):
    return engine.handle(sid, "POST", resource["resourceType"], "", headers, json.dumps(resource).encode())


def test_sandboxes_are_isolated(engine):
    a = engine.create_sandbox(seed(2), "a")
    b = engine.create_sandbox(seed(2), "b")
    assert post(engine, a, {"resourceType": "Patient", "name": [{"family": "OnlyInA"}]}).status == 201
    assert len(engine.resources(a, "Patient")) == 3
    assert len(engine.resources(b, "Patient")) == 2
    assert engine.handle(b, "GET", "Patient", "name=OnlyInA").json()["total"] == 0


def test_reset_restores_seed_and_clone_copies(engine):
    sid = engine.create_sandbox(seed(3))
    engine.handle(sid, "DELETE", "Patient/p0")
    post(engine, sid, {"resourceType": "Patient"})
    clone = engine.clone_sandbox(sid, "copy")
    engine.reset_sandbox(sid)
    assert sorted(r["id"] for r in engine.resources(sid)) == ["p0", "p1", "p2"]
    assert engine.handle(sid, "GET", "Patient/p0").status == 200
    assert len(engine.resources(clone)) == 3 and engine.handle(clone, "GET", "Patient/p0").status == 410
    engine.reset_sandbox(clone)  # a clone resets to the state it was cloned from
    assert engine.handle(clone, "GET", "Patient/p0").status == 410


def test_delete_sandbox_and_bad_ids(engine):
    sid = engine.create_sandbox()
    engine.delete_sandbox(sid)
    assert engine.handle(sid, "GET", "Patient").status == 404
    with pytest.raises(FhirError):
        engine.reset_sandbox(sid)
    with pytest.raises(FhirError):
        engine.create_sandbox(sandbox_id="../etc")
    engine.create_sandbox(sandbox_id="dup")
    with pytest.raises(FhirError):
        engine.create_sandbox(sandbox_id="dup")


def test_invalid_seed_is_refused(engine):
    bad = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": {"resourceType": "Patient", "gender": "sometimes"}}],
    }
    with pytest.raises(FhirError, match="Patient.gender"):
        engine.create_sandbox(bad)
    with pytest.raises(FhirError):
        engine.create_sandbox({"resourceType": "Patient"})


def test_seed_resolves_urn_references(engine):
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"fullUrl": "urn:uuid:aaa", "resource": {"resourceType": "Patient"}},
            {
                "resource": {
                    "resourceType": "Observation",
                    "status": "final",
                    "code": {"text": "x"},
                    "subject": {"reference": "urn:uuid:aaa"},
                }
            },
        ],
    }
    sid = engine.create_sandbox(bundle)
    patient = engine.resources(sid, "Patient")[0]
    obs = engine.resources(sid, "Observation")[0]
    assert obs["subject"]["reference"] == f"Patient/{patient['id']}"


def test_clock_and_ids_are_injected():
    moments = iter(datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=i) for i in range(100))
    counter = iter(range(1000))
    engine = FhirEngine(clock=lambda: next(moments), id_factory=lambda: f"id{next(counter)}")
    sid = engine.create_sandbox(sandbox_id="s")
    created = post(engine, sid, {"resourceType": "Patient"}).json()
    assert created["id"] == "id0"
    assert created["meta"]["lastUpdated"].startswith("2030-01-01T00:00:0")


def test_load_state_keeps_recorded_versions(engine):
    sid = engine.create_sandbox()
    engine.load_state(
        sid,
        [
            {
                "resourceType": "Patient",
                "id": "x",
                "meta": {"versionId": "1", "lastUpdated": "2020-01-01T00:00:00Z"},
                "gender": "male",
            },
            {
                "resourceType": "Patient",
                "id": "x",
                "meta": {"versionId": "2", "lastUpdated": "2020-01-02T00:00:00Z"},
                "gender": "female",
            },
        ],
    )
    assert engine.handle(sid, "GET", "Patient/x").json()["meta"]["versionId"] == "2"
    assert engine.handle(sid, "GET", "Patient/x/_history/1").json()["gender"] == "male"
    assert engine.handle(sid, "GET", "Patient", "_lastUpdated=2020-01-02").json()["total"] == 1
    assert engine.handle(sid, "GET", "Patient", "_lastUpdated=2020-01-01").json()["total"] == 0
    engine.record_deletion(sid, "Patient", "x")
    assert engine.handle(sid, "GET", "Patient/x").status == 410
    engine.record_version(sid, {"resourceType": "Patient", "id": "y", "meta": {"versionId": "7"}})
    assert engine.handle(sid, "GET", "Patient/y").headers["ETag"] == 'W/"7"'
    with pytest.raises(FhirError):
        engine.load_state(sid, [{"resourceType": "Patient"}])


def test_returned_resources_are_copies(engine):
    sid = engine.create_sandbox(seed(1))
    engine.resources(sid)[0]["name"] = "tampered"
    assert engine.resources(sid)[0]["name"] == [{"family": "F0"}]


@pytest.mark.parametrize(
    ("resource", "element"),
    [
        ({"resourceType": "Patient", "shoeSize": 12}, "Patient.shoeSize"),
        ({"resourceType": "Patient", "active": "yes"}, "Patient.active"),
        ({"resourceType": "Patient", "name": {"family": "x"}}, "Patient.name"),
        ({"resourceType": "Patient", "gender": ["female"]}, "Patient.gender"),
        ({"resourceType": "Patient", "birthDate": "1990-02-30x"}, "Patient.birthDate"),
        (
            {"resourceType": "Appointment", "status": "maybe", "participant": [{"status": "accepted"}]},
            "Appointment.status",
        ),
        ({"resourceType": "Appointment", "status": "booked"}, "Appointment.participant"),
        (
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "x"},
                "subject": {"reference": "not a reference"},
            },
            "Observation.subject.reference",
        ),
        (
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "x"},
                "subject": {"reference": "Medication/1"},
            },
            "Observation.subject.reference",
        ),
        (
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "x"},
                "valueQuantity": {"value": "high"},
            },
            "Observation.valueQuantity.value",
        ),
        (
            {"resourceType": "Patient", "contained": [{"resourceType": "Patient", "bogus": 1}]},
            "Patient.contained[0].bogus",
        ),
    ],
)
def test_validation_rejects_and_names_element(engine, resource, element):
    sid = engine.create_sandbox()
    r = post(engine, sid, resource)
    assert r.status == 422, r.body
    expressions = [e for i in r.json()["issue"] for e in i.get("expression", [])]
    assert element in expressions


def test_validation_accepts_valid_resources(engine):
    sid = engine.create_sandbox()
    for resource in [
        {
            "resourceType": "Patient",
            "name": [{"family": "x", "_family": {"extension": []}}],
            "extension": [{"url": "http://example.org/x", "valueString": "y"}],
        },
        {
            "resourceType": "Appointment",
            "status": "booked",
            "participant": [{"status": "accepted", "actor": {"reference": "Practitioner/d"}}],
        },
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "x"},
            "subject": {"reference": "https://other.example/fhir/Patient/1"},
            "valueQuantity": {"value": 1.5},
        },
        {
            "resourceType": "Questionnaire",
            "status": "draft",
            "item": [{"linkId": "1", "type": "group", "item": [{"linkId": "2", "type": "string"}]}],
        },
    ]:
        assert post(engine, sid, resource).status == 201, resource


def _appointment(**extra) -> dict:
    return {
        "resourceType": "Appointment",
        "status": "booked",
        "participant": [{"status": "accepted", "actor": {"reference": "Practitioner/d"}}],
        **extra,
    }


@pytest.mark.parametrize(
    ("element", "value", "status"),
    [
        ("minutesDuration", 1, 201),
        ("minutesDuration", 0, 422),
        ("minutesDuration", -1, 422),  # positiveInt
        ("minutesDuration", 2**31 - 1, 201),
        ("minutesDuration", 2**31, 422),
        ("minutesDuration", True, 422),
        ("priority", 0, 201),
        ("priority", -1, 422),
        ("priority", 2**31, 422),
        ("priority", 1.0, 422),  # unsignedInt
    ],
)
def test_integer_kinds_keep_their_bounds(engine, element, value, status):
    r = post(engine, engine.create_sandbox(), _appointment(**{element: value}))
    assert r.status == status, r.body
    if status == 422:
        assert f"Appointment.{element}" in [e for i in r.json()["issue"] for e in i.get("expression", [])]


def test_put_checks_type_and_id(engine):
    sid = engine.create_sandbox(seed(1))
    body = {"resourceType": "Patient", "id": "p0"}
    assert engine.handle(sid, "PUT", "Patient/p0", body=json.dumps(body).encode()).status == 200
    wrong_type = {"resourceType": "Observation", "id": "p0"}
    assert engine.handle(sid, "PUT", "Patient/p0", body=json.dumps(wrong_type).encode()).status == 400
    no_id = {"resourceType": "Patient"}
    assert engine.handle(sid, "PUT", "Patient/p0", body=json.dumps(no_id).encode()).status == 400
    bad_id = {"resourceType": "Patient", "id": "a b"}
    assert engine.handle(sid, "PUT", "Patient/a b", body=json.dumps(bad_id).encode()).status == 400


def test_conditional_update_and_delete(engine):
    sid = engine.create_sandbox()
    body = {"resourceType": "Patient", "identifier": [{"system": "s", "value": "1"}]}
    first = engine.handle(sid, "PUT", "Patient", "identifier=s|1", body=json.dumps(body).encode())
    assert first.status == 201
    again = engine.handle(sid, "PUT", "Patient", "identifier=s|1", body=json.dumps(body).encode())
    assert again.status == 200 and again.json()["id"] == first.json()["id"]
    post(engine, sid, body)
    assert engine.handle(sid, "DELETE", "Patient", "identifier=s|1").status == 412
    assert engine.handle(sid, "DELETE", "Patient", "identifier=s|none").status == 200


def test_headers_and_not_modified(engine):
    sid = engine.create_sandbox(seed(1))
    r = engine.handle(sid, "GET", "Patient/p0")
    assert r.headers["ETag"] == 'W/"1"' and r.headers["Last-Modified"].endswith("GMT")
    assert engine.handle(sid, "GET", "Patient/p0", headers={"If-None-Match": 'W/"1"'}).status == 304
    created = post(engine, sid, {"resourceType": "Patient"})
    assert created.headers["Location"].startswith("Patient/") and created.headers["Location"].endswith("/_history/1")


def _jwt(sub: str) -> str:
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': sub})}.sig"


def test_audit_trail_records_each_interaction():
    engine = FhirEngine(audit_events=True)
    sid = engine.create_sandbox()
    who = {"Authorization": f"Bearer {_jwt('agent-7')}"}
    created = post(engine, sid, {"resourceType": "Patient"}, who).json()
    engine.handle(sid, "GET", f"Patient/{created['id']}", headers={"X-Fae-Identity": "verifier"})
    body = dict(created, gender="male")
    engine.handle(sid, "PUT", f"Patient/{created['id']}", headers=who, body=json.dumps(body).encode())
    engine.handle(sid, "GET", "Patient", "gender=male", who)  # searches are not in the trail
    engine.handle(sid, "DELETE", f"Patient/{created['id']}", headers={"Authorization": "Bearer opaque"})
    events = engine.resources(sid, "AuditEvent")
    assert [e["action"] for e in events] == ["C", "R", "U", "D"]
    assert [e["agent"][0]["who"]["display"] for e in events[:3]] == ["agent-7", "verifier", "agent-7"]
    assert events[3]["agent"][0]["who"]["display"].startswith("token-")
    assert "opaque" not in json.dumps(events)
    assert events[2]["entity"][0]["what"]["reference"] == f"Patient/{created['id']}/_history/2"
    by_entity = engine.handle(sid, "GET", "AuditEvent", f"entity=Patient/{created['id']}").json()
    assert by_entity["total"] == 4
    quiet = FhirEngine()
    qsid = quiet.create_sandbox()
    post(quiet, qsid, {"resourceType": "Patient"})
    assert quiet.resources(qsid, "AuditEvent") == []


def test_a_deletion_holds_no_live_resource(engine):
    sid = engine.create_sandbox(seed(1))
    assert engine.handle(sid, "DELETE", "Patient/p0").status in (200, 204)
    store = engine.sandboxes.require(sid).store
    created, tombstone = store.instance_history("Patient", "p0")
    assert created.live_resource["id"] == "p0" and tombstone.resource is None
    with pytest.raises(ValueError, match="Patient/p0 version 2 is a deletion"):
        _ = tombstone.live_resource


def test_turning_the_trail_on_after_construction_audits_new_sandboxes():
    """The harness turns auditing on after building the engine; sandboxes made after that keep a trail."""
    engine = FhirEngine()
    before = engine.create_sandbox()
    engine.audit_events = True
    after = engine.create_sandbox()
    for sid in (before, after):
        assert engine.handle(sid, "POST", "Patient", body=b'{"resourceType":"Patient"}').status == 201
    trail = {sid: json.loads(engine.handle(sid, "GET", "AuditEvent").body)["total"] for sid in (before, after)}
    assert trail == {before: 0, after: 1}, trail
