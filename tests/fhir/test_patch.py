"""PATCH: JSON Patch and FHIRPath Patch, with If-Match, versions, history and validation."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from fae.fhir.engine import FhirEngine

JSON_PATCH = {"Content-Type": "application/json-patch+json"}
PATIENT = {
    "resourceType": "Patient",
    "id": "p",
    "gender": "female",
    "name": [{"family": "Old", "given": ["Ann"]}],
    "telecom": [{"system": "phone", "value": "1"}, {"system": "email", "value": "a@b.c"}],
}


@pytest.fixture()
def sid(engine: FhirEngine) -> str:
    return engine.create_sandbox({"resourceType": "Bundle", "type": "collection", "entry": [{"resource": PATIENT}]})


def patch(
    engine: FhirEngine, sid: str, body: object, headers: dict | None = None, path: str = "Patient/p", query: str = ""
):
    return engine.handle(sid, "PATCH", path, query, headers=headers, body=json.dumps(body).encode())


def op(kind: str, path: str, **parts: object) -> dict:
    out = [{"name": "type", "valueCode": kind}, {"name": "path", "valueString": path}]
    for name, value in parts.items():
        if name == "name":
            out.append({"name": "name", "valueString": value})
        elif name in ("index", "source", "destination"):
            out.append({"name": name, "valueInteger": value})
        else:
            out.append({"name": "value", name: value})
    return {"name": "operation", "part": out}


def params(*ops: dict) -> dict:
    return {"resourceType": "Parameters", "parameter": list(ops)}


def current(engine: FhirEngine, sid: str) -> dict:
    return engine.handle(sid, "GET", "Patient/p").json()


# ---- JSON Patch ---------------------------------------------------------------------------


def test_json_patch_writes_a_new_version_with_history(engine, sid):
    resp = patch(
        engine,
        sid,
        [
            {"op": "test", "path": "/gender", "value": "female"},
            {"op": "replace", "path": "/name/0/family", "value": "New"},
            {"op": "add", "path": "/name/0/given/-", "value": "Beth"},
            {"op": "remove", "path": "/telecom/1"},
            {"op": "copy", "from": "/name/0/family", "path": "/name/0/text"},
            {"op": "move", "from": "/gender", "path": "/gender"},
        ],
        JSON_PATCH,
    )
    assert resp.status == 200, resp.body
    assert resp.headers["ETag"] == 'W/"2"'
    body = resp.json()
    assert body["name"] == [{"family": "New", "given": ["Ann", "Beth"], "text": "New"}]
    assert body["telecom"] == [{"system": "phone", "value": "1"}] and body["gender"] == "female"
    history = engine.handle(sid, "GET", "Patient/p/_history").json()
    assert history["entry"][0]["request"] == {"method": "PATCH", "url": "Patient/p"}
    assert engine.handle(sid, "GET", "Patient/p/_history/1").json()["name"][0]["family"] == "Old"


@pytest.mark.parametrize(
    ("ops", "status"),
    [
        ({"op": "replace"}, 400),  # not an array
        ([{"op": "frobnicate", "path": "/gender"}], 400),
        ([{"op": "add", "path": "gender", "value": "male"}], 400),  # not a pointer
        ([{"op": "replace", "path": "/gender"}], 400),  # no value
        ([{"op": "test", "path": "/gender", "value": "male"}], 422),
        ([{"op": "test", "path": "/telecom/0/value", "value": 1}], 422),  # "1" is not 1
        ([{"op": "remove", "path": "/birthDate"}], 422),
        ([{"op": "replace", "path": "/name/5/family", "value": "x"}], 422),
        ([{"op": "add", "path": "/name/01", "value": {}}], 422),
        ([{"op": "move", "from": "/name", "path": "/name/0/x"}], 422),
        ([{"op": "replace", "path": "/gender", "value": "sometimes"}], 422),  # result fails validation
        ([{"op": "add", "path": "/shoeSize", "value": 9}], 422),
        ([{"op": "replace", "path": "/id", "value": "q"}], 400),
        ([{"op": "remove", "path": ""}], 422),
    ],
)
def test_bad_json_patches_change_nothing(engine, sid, ops, status):
    resp = patch(engine, sid, ops, JSON_PATCH)
    assert resp.status == status, resp.body
    assert resp.json()["resourceType"] == "OperationOutcome"
    assert current(engine, sid)["meta"]["versionId"] == "1"


def test_test_op_compares_json_values_strictly(engine, sid):
    ok = [{"op": "test", "path": "/name/0", "value": {"given": ["Ann"], "family": "Old"}}]
    assert patch(engine, sid, ok, JSON_PATCH).status == 200
    engine.handle(sid, "PUT", "Patient/p", body=json.dumps({**PATIENT, "active": True}).encode())
    assert patch(engine, sid, [{"op": "test", "path": "/active", "value": 1}], JSON_PATCH).status == 422
    assert patch(engine, sid, [{"op": "test", "path": "/active", "value": True}], JSON_PATCH).status == 200


def test_if_match_missing_and_deleted(engine, sid):
    body = [{"op": "replace", "path": "/gender", "value": "male"}]
    assert patch(engine, sid, body, {**JSON_PATCH, "If-Match": 'W/"7"'}).status == 412
    assert patch(engine, sid, body, {**JSON_PATCH, "If-Match": 'W/"1"'}).status == 200
    assert patch(engine, sid, body, JSON_PATCH, path="Patient/nobody").status == 404
    engine.handle(sid, "DELETE", "Patient/p")
    assert patch(engine, sid, body, JSON_PATCH).status == 410
    assert engine.handle(sid, "PATCH", "Patient/p", headers=JSON_PATCH).status in (400, 410)


# ---- FHIRPath Patch -----------------------------------------------------------------------


def test_fhirpath_patch_operations(engine, sid):
    resp = patch(
        engine,
        sid,
        params(
            op("replace", "Patient.telecom.where(system='phone').value", valueString="999"),
            op("add", "Patient", name="birthDate", valueDate="2000-01-02"),
            op("add", "Patient.name[0]", name="given", valueString="Cleo"),
            op("insert", "Patient.identifier", index=0, valueIdentifier={"system": "urn:s", "value": "1"}),
            op("move", "Patient.telecom", source=1, destination=0),
            op("delete", "Patient.gender"),
            op("delete", "Patient.deceased"),  # nothing there: a no-op
            op("add", "Patient", name="contact", valueBackboneElement={"name": {"family": "Kin"}}),
        ),
    )
    assert resp.status == 200, resp.body
    body = resp.json()
    assert body["telecom"] == [{"system": "email", "value": "a@b.c"}, {"system": "phone", "value": "999"}]
    assert body["birthDate"] == "2000-01-02" and "gender" not in body
    assert body["name"][0]["given"] == ["Ann", "Cleo"]
    assert body["identifier"] == [{"system": "urn:s", "value": "1"}]
    assert body["contact"] == [{"name": {"family": "Kin"}}]
    assert body["meta"]["versionId"] == "2"


def test_fhirpath_patch_value_from_parts(engine, sid):
    value = {
        "name": "value",
        "part": [{"name": "system", "valueCode": "url"}, {"name": "value", "valueString": "http://x"}],
    }
    body = params(
        {
            "name": "operation",
            "part": [
                {"name": "type", "valueCode": "add"},
                {"name": "path", "valueString": "Patient"},
                {"name": "name", "valueString": "telecom"},
                value,
            ],
        }
    )
    resp = patch(engine, sid, body)
    assert resp.status == 200, resp.body
    assert resp.json()["telecom"][-1] == {"system": "url", "value": "http://x"}


@pytest.mark.parametrize(
    ("operation", "status"),
    [
        (op("replace", "Patient.telecom.value", valueString="x"), 422),  # two matches
        (op("replace", "Patient.birthDate", valueDate="2000"), 422),  # no match
        (op("add", "Patient", name="gender", valueCode="male"), 422),  # single, already set
        (op("add", "Patient", name="shoeSize", valueInteger=9), 422),
        (op("replace", "Patient.gender", valueCode="sometimes"), 422),  # fails validation
        (op("insert", "Patient.telecom", index=9, valueString="x"), 422),
        (op("move", "Patient.telecom", source=0, destination=5), 422),
        (op("replace", "Patient.name.select(family)", valueString="x"), 400),  # unsupported function
        (op("replace", "Patient.name.where(", valueString="x"), 400),
        (op("replace", "Patient.id", valueId="other"), 400),
        (
            {
                "name": "operation",
                "part": [{"name": "type", "valueCode": "upsert"}, {"name": "path", "valueString": "Patient"}],
            },
            400,
        ),
        ({"name": "nope"}, 400),
    ],
)
def test_bad_fhirpath_patches_change_nothing(engine, sid, operation, status):
    resp = patch(engine, sid, params(operation))
    assert resp.status == status, resp.body
    assert current(engine, sid)["meta"]["versionId"] == "1"


def test_patch_body_must_be_a_patch(engine, sid):
    assert patch(engine, sid, {"resourceType": "Patient", "id": "p"}).status == 400
    assert patch(engine, sid, {"op": "add"}, JSON_PATCH).status == 400
    resp = engine.handle(sid, "PATCH", "Patient/p", headers={"Content-Type": "text/plain"}, body=b"[]x")
    assert resp.status == 400


# ---- conditional, in transactions, over HTTP, advertised -----------------------------------


def test_conditional_patch_and_patch_in_a_transaction(engine, sid):
    resp = patch(
        engine,
        sid,
        [{"op": "replace", "path": "/gender", "value": "male"}],
        JSON_PATCH,
        path="Patient",
        query="family=Old",
    )
    assert resp.status == 200, resp.body
    assert patch(engine, sid, [], JSON_PATCH, path="Patient", query="family=Nobody").status == 404
    as_binary = base64.b64encode(json.dumps([{"op": "replace", "path": "/gender", "value": "other"}]).encode())
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "resource": params(op("replace", "Patient.name.family", valueString="Tx")),
                "request": {"method": "PATCH", "url": "Patient/p"},
            },
            {
                "resource": {
                    "resourceType": "Binary",
                    "contentType": "application/json-patch+json",
                    "data": as_binary.decode(),
                },
                "request": {"method": "PATCH", "url": "Patient/p"},
            },
        ],
    }
    resp = engine.handle(sid, "POST", "", body=json.dumps(bundle).encode())
    assert resp.status == 200, resp.body
    now = current(engine, sid)
    assert now["name"][0]["family"] == "Tx" and now["gender"] == "other"
    failing = {
        **bundle,
        "entry": [
            bundle["entry"][0],
            {
                "resource": params(op("delete", "Patient.name.given")),
                "request": {"method": "PATCH", "url": "Patient/p"},
            },
            {
                "resource": params(op("replace", "Patient.gender", valueCode="bad")),
                "request": {"method": "PATCH", "url": "Patient/p"},
            },
        ],
    }
    assert engine.handle(sid, "POST", "", body=json.dumps(failing).encode()).status == 422
    assert current(engine, sid)["meta"]["versionId"] == now["meta"]["versionId"]


def test_patch_over_http_and_in_the_capability_statement(live_server):
    with httpx.Client(timeout=30) as http:
        base = http.post(f"{live_server.url}/sandbox").json()["base"]
        made = http.post(f"{base}/Patient", json={"resourceType": "Patient", "gender": "female"}).json()
        resp = http.patch(
            f"{base}/Patient/{made['id']}",
            headers=JSON_PATCH,
            content=json.dumps([{"op": "replace", "path": "/gender", "value": "male"}]),
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["gender"] == "male" and resp.headers["etag"] == 'W/"2"'
        caps = http.get(f"{base}/metadata").json()
        patient = next(r for r in caps["rest"][0]["resource"] if r["type"] == "Patient")
        assert {"code": "patch"} in patient["interaction"]


def test_copy_bombs_and_deepening_patches_are_refused(engine, sid):
    doubling = [{"op": "copy", "from": "/name", "path": "/name/-"} for _ in range(40)]
    resp = patch(engine, sid, doubling, JSON_PATCH)
    assert resp.status == 422 and "copies more than" in resp.body.decode(), resp.body[:300]
    deepening = [{"op": "copy", "from": "/name/0", "path": "/name/0/x"} for _ in range(12)]
    resp = patch(engine, sid, deepening, JSON_PATCH)
    assert resp.status == 422, resp.body[:300]
    assert current(engine, sid)["meta"]["versionId"] == "1"
