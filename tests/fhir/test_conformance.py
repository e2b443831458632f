"""FHIR R4 REST conformance, against any base URL.

Runs against the embedded server always, an external server when
FAE_FHIR_CONFORMANCE_URL is set, and Medplum's in-memory router when installed.
Each item has a request that must succeed and one that must fail. Tests make
their own data, tagged with a fresh identifier, so they also run on shared servers.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.fhir.conftest import Target

JSON = {"Content-Type": "application/fhir+json", "Accept": "application/fhir+json"}


def _system() -> str:
    return f"urn:fae:test:{uuid.uuid4().hex}"


def patient(system: str, value: str = "1", family: str = "Quinn", **extra) -> dict:
    return {
        "resourceType": "Patient",
        "identifier": [{"system": system, "value": value}],
        "name": [{"family": family, "given": ["Ada"]}],
        "gender": "female",
        "birthDate": "1970-03-04",
        **extra,
    }


def create(t: Target, resource: dict, **headers) -> dict:
    r = t.client.post(f"{t.base}/{resource['resourceType']}", json=resource, headers={**JSON, **headers})
    assert r.status_code == 201, r.text
    return r.json()


def search(t: Target, rtype: str, params: dict | str) -> dict:
    r = t.client.get(f"{t.base}/{rtype}", params=params, headers=JSON)
    assert r.status_code == 200, r.text
    return r.json()


def ids(bundle: dict, mode: str = "match") -> set[str]:
    return {e["resource"]["id"] for e in bundle.get("entry", []) if e.get("search", {}).get("mode", "match") == mode}


def test_create_assigns_id_and_meta(target: Target):
    body = patient(_system())
    body["id"] = "client-chosen"
    r = target.client.post(f"{target.base}/Patient", json=body, headers=JSON)
    assert r.status_code == 201
    created = r.json()
    assert created["meta"]["versionId"]
    assert "lastUpdated" in created["meta"]
    assert created["id"] in r.headers["location"]
    assert r.headers["etag"] == f'W/"{created["meta"]["versionId"]}"'
    target.skip_unless("create-ignores-id")
    assert created["id"] != "client-chosen"


def test_create_rejects_bad_body(target: Target):
    r = target.client.post(f"{target.base}/Patient", content=b"{not json", headers=JSON)
    assert r.status_code == 400
    assert r.json()["resourceType"] == "OperationOutcome"
    r = target.client.post(f"{target.base}/Patient", json={"resourceType": "Observation"}, headers=JSON)
    assert r.status_code == 400


def test_conditional_create(target: Target):
    target.skip_unless("if-none-exist")
    system = _system()
    first = create(target, patient(system), **{"If-None-Exist": f"identifier={system}|1"})
    again = target.client.post(
        f"{target.base}/Patient", json=patient(system), headers={**JSON, "If-None-Exist": f"identifier={system}|1"}
    )
    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    create(target, patient(system))  # now two match
    clash = target.client.post(
        f"{target.base}/Patient", json=patient(system), headers={**JSON, "If-None-Exist": f"identifier={system}|1"}
    )
    assert clash.status_code == 412


def test_read_and_vread(target: Target):
    p = create(target, patient(_system()))
    r = target.client.get(f"{target.base}/Patient/{p['id']}", headers=JSON)
    assert r.status_code == 200 and r.json()["id"] == p["id"]
    vid = p["meta"]["versionId"]
    assert r.headers.get("etag") == f'W/"{vid}"'
    v = target.client.get(f"{target.base}/Patient/{p['id']}/_history/{vid}", headers=JSON)
    assert v.status_code == 200 and v.json()["meta"]["versionId"] == vid
    missing = target.client.get(f"{target.base}/Patient/{uuid.uuid4()}", headers=JSON)
    assert missing.status_code == 404
    no_version = target.client.get(f"{target.base}/Patient/{p['id']}/_history/99", headers=JSON)
    assert no_version.status_code == 404


def test_update_versions_and_if_match(target: Target):
    p = create(target, patient(_system()))
    p["gender"] = "male"
    first = f'W/"{p["meta"]["versionId"]}"'
    r = target.client.put(f"{target.base}/Patient/{p['id']}", json=p, headers={**JSON, "If-Match": first})
    assert r.status_code == 200
    assert r.json()["meta"]["versionId"] != p["meta"]["versionId"]
    stale = target.client.put(f"{target.base}/Patient/{p['id']}", json=p, headers={**JSON, "If-Match": first})
    assert stale.status_code == 412


def test_update_as_create_with_client_id(target: Target):
    rid = "fae-" + uuid.uuid4().hex[:20]
    body = patient(_system(), id=rid)
    r = target.client.put(f"{target.base}/Patient/{rid}", json=body, headers=JSON)
    assert r.status_code == (200 if "update-create-201" in target.lacks else 201)
    assert r.json()["id"] == rid
    target.skip_unless("update-id-check")
    other = target.client.put(f"{target.base}/Patient/{rid}", json=patient(_system(), id="different"), headers=JSON)
    assert other.status_code == 400


def test_delete_then_gone(target: Target):
    p = create(target, patient(_system()))
    r = target.client.delete(f"{target.base}/Patient/{p['id']}", headers=JSON)
    assert r.status_code in (200, 204)
    gone = target.client.get(f"{target.base}/Patient/{p['id']}", headers=JSON)
    if "410-gone" in target.lacks:
        assert gone.status_code == 404
    else:
        assert gone.status_code == 410
    live = create(target, patient(_system()))
    assert target.client.get(f"{target.base}/Patient/{live['id']}", headers=JSON).status_code == 200


def test_instance_history(target: Target):
    p = create(target, patient(_system()))
    p["gender"] = "other"
    second = target.client.put(f"{target.base}/Patient/{p['id']}", json=p, headers=JSON).json()
    h = target.client.get(f"{target.base}/Patient/{p['id']}/_history", headers=JSON).json()
    assert h["type"] == "history"
    versions = [e["resource"]["meta"]["versionId"] for e in h["entry"] if "resource" in e]
    assert versions == [second["meta"]["versionId"], p["meta"]["versionId"]]
    missing = target.client.get(f"{target.base}/Patient/{uuid.uuid4()}/_history", headers=JSON)
    assert missing.status_code == 404


def test_type_history(target: Target):
    target.skip_unless("type-history")
    system = _system()
    p = create(target, patient(system))
    h = target.client.get(f"{target.base}/Patient/_history", headers=JSON, params={"_count": 1000})
    assert h.status_code == 200
    assert p["id"] in {e["resource"]["id"] for e in h.json()["entry"] if "resource" in e}
    bad = target.client.get(f"{target.base}/NotAType/_history", headers=JSON)
    assert bad.status_code in (400, 404)


def test_search_get_and_post(target: Target):
    system = _system()
    p = create(target, patient(system, family="Okonkwo"))
    create(target, patient(system, value="2", family="Other"))
    assert ids(search(target, "Patient", {"identifier": f"{system}|1"})) == {p["id"]}
    r = target.client.post(
        f"{target.base}/Patient/_search",
        data={"identifier": f"{system}|1"},
        headers={"Accept": "application/fhir+json"},
    )
    assert r.status_code == 200
    assert ids(r.json()) == {p["id"]}
    assert ids(search(target, "Patient", {"identifier": f"{system}|nope"})) == set()


def test_search_string_token_date(target: Target):
    system = _system()
    p = create(target, patient(system, family="Zażółć"))
    assert ids(search(target, "Patient", {"identifier": system + "|", "family": "zaż"})) == {p["id"]}
    if "string-starts-with" not in target.lacks:
        assert ids(search(target, "Patient", {"identifier": system + "|", "family": "ażó"})) == set()
    assert ids(search(target, "Patient", {"identifier": system + "|", "family": "xyz"})) == set()
    if "accent-insensitive" not in target.lacks:
        assert ids(search(target, "Patient", {"identifier": system + "|", "family": "zazo"})) == {p["id"]}
    assert ids(search(target, "Patient", {"identifier": system + "|", "birthdate": "1970-03"})) == {p["id"]}
    assert ids(search(target, "Patient", {"identifier": system + "|", "birthdate": "gt1970-03-04"})) == set()
    assert ids(search(target, "Patient", {"identifier": system + "|", "gender": "female"})) == {p["id"]}
    assert ids(search(target, "Patient", {"identifier": system + "|", "gender": "male"})) == set()


def test_search_reference_chain_and_include(target: Target):
    system = _system()
    p = create(target, patient(system, family="Chainfam" + uuid.uuid4().hex[:6]))
    obs = create(
        target,
        {
            "resourceType": "Observation",
            "status": "final",
            "identifier": [{"system": system, "value": "o"}],
            "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4"}]},
            "subject": {"reference": f"Patient/{p['id']}"},
        },
    )
    assert ids(search(target, "Observation", {"subject": f"Patient/{p['id']}"})) == {obs["id"]}
    assert ids(search(target, "Observation", {"subject": f"Patient/{uuid.uuid4()}"})) == set()
    family = p["name"][0]["family"]
    assert ids(search(target, "Observation", {"subject:Patient.name": family})) == {obs["id"]}
    assert ids(search(target, "Observation", {"subject:Patient.name": "nobody-" + family})) == set()
    bundle = search(target, "Observation", {"_id": obs["id"], "_include": "Observation:subject"})
    assert ids(bundle, "include") == {p["id"]}
    plain = search(target, "Observation", {"_id": obs["id"]})
    assert ids(plain, "include") == set()


def test_search_has(target: Target):
    target.skip_unless("_has")
    system = _system()
    p = create(target, patient(system))
    lonely = create(target, patient(system, value="2"))
    create(
        target,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "x"},
            "identifier": [{"system": system, "value": "o"}],
            "subject": {"reference": f"Patient/{p['id']}"},
        },
    )
    found = search(
        target, "Patient", {"identifier": system + "|", "_has:Observation:subject:identifier": f"{system}|o"}
    )
    assert ids(found) == {p["id"]}
    assert lonely["id"] not in ids(found)


def test_search_sort_count_and_paging(target: Target):
    system = _system()
    made = [create(target, patient(system, value=str(i), birthDate=f"19{50 + i}-01-01")) for i in range(5)]
    page = search(target, "Patient", {"identifier": system + "|", "_sort": "-birthdate", "_count": 2})
    got = [e["resource"]["id"] for e in page["entry"] if e.get("search", {}).get("mode", "match") == "match"]
    assert got == [made[4]["id"], made[3]["id"]]
    target.skip_unless("paging-links")
    seen = list(got)
    while True:
        nxt = [link["url"] for link in page.get("link", []) if link["relation"] == "next"]
        if not nxt:
            break
        page = target.client.get(nxt[0], headers=JSON).json()
        seen += [e["resource"]["id"] for e in page.get("entry", []) if e.get("search", {}).get("mode") == "match"]
    assert seen == [m["id"] for m in reversed(made)]


def test_summary_count_and_total(target: Target):
    system = _system()
    for i in range(3):
        create(target, patient(system, value=str(i)))
    counted = search(target, "Patient", {"identifier": system + "|", "_summary": "count"})
    assert counted["total"] == 3
    assert not [e for e in counted.get("entry", []) if e.get("search", {}).get("mode") == "match"]
    target.skip_unless("summary-validation")
    bad = target.client.get(f"{target.base}/Patient", params={"_summary": "bogus"}, headers=JSON)
    assert bad.status_code == 400


def test_unknown_parameter_refused_unless_lenient(target: Target):
    """HAPI FHIR's default (400) and the R4 spec's `Prefer: handling=strict|lenient`."""
    target.skip_unless("strict-handling")
    refused = target.client.get(f"{target.base}/Patient", params={"not-a-param": "x"}, headers=JSON)
    assert refused.status_code == 400 and refused.json()["resourceType"] == "OperationOutcome"
    strict = target.client.get(
        f"{target.base}/Patient", params={"not-a-param": "x"}, headers={**JSON, "Prefer": "handling=strict"}
    )
    assert strict.status_code == 400
    lenient = target.client.get(
        f"{target.base}/Patient", params={"not-a-param": "x"}, headers={**JSON, "Prefer": "handling=lenient"}
    )
    assert lenient.status_code == 200
    modes = [e.get("search", {}).get("mode") for e in lenient.json().get("entry", [])]
    assert "outcome" in modes, "lenient handling says in the Bundle what it ignored"


def test_transaction_resolves_urns_atomically(target: Target):
    system = _system()
    tx = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": "urn:uuid:" + str(uuid.uuid4()),
                "resource": patient(system),
                "request": {"method": "POST", "url": "Patient"},
            },
        ],
    }
    tx["entry"].append(
        {
            "resource": {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "t"},
                "subject": {"reference": tx["entry"][0]["fullUrl"]},
            },
            "request": {"method": "POST", "url": "Observation"},
        }
    )
    r = target.client.post(target.base, json=tx, headers=JSON)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["type"] == "transaction-response"
    assert all(e["response"]["status"].startswith("201") for e in out["entry"])
    pid = search(target, "Patient", {"identifier": f"{system}|1"})["entry"][0]["resource"]["id"]
    obs = search(target, "Observation", {"subject": f"Patient/{pid}"})
    assert len(ids(obs)) == 1
    target.skip_unless("atomic-transactions")
    system2 = _system()
    broken = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": patient(system2), "request": {"method": "POST", "url": "Patient"}},
            {
                "resource": {"resourceType": "Observation", "status": "not-a-status", "code": {"text": "x"}},
                "request": {"method": "POST", "url": "Observation"},
            },
        ],
    }
    r = target.client.post(target.base, json=broken, headers=JSON)
    assert r.status_code >= 400
    assert ids(search(target, "Patient", {"identifier": f"{system2}|1"})) == set()


def test_batch_entries_independent(target: Target):
    system = _system()
    batch = {
        "resourceType": "Bundle",
        "type": "batch",
        "entry": [
            {"resource": patient(system), "request": {"method": "POST", "url": "Patient"}},
            {"request": {"method": "GET", "url": f"Patient/{uuid.uuid4()}"}},
        ],
    }
    r = target.client.post(target.base, json=batch, headers=JSON)
    assert r.status_code == 200
    statuses = [e["response"]["status"].split()[0] for e in r.json()["entry"]]
    assert statuses == ["201", "404"]


def test_metadata(target: Target):
    target.skip_unless("metadata")
    r = target.client.get(f"{target.base}/metadata", headers=JSON)
    assert r.status_code == 200
    cap = r.json()
    assert cap["resourceType"] == "CapabilityStatement" and cap["fhirVersion"] == "4.0.1"
    assert target.client.delete(f"{target.base}/metadata", headers=JSON).status_code in (404, 405)


def test_prefer_return(target: Target):
    target.skip_unless("prefer-return")
    minimal = target.client.post(
        f"{target.base}/Patient", json=patient(_system()), headers={**JSON, "Prefer": "return=minimal"}
    )
    assert minimal.status_code == 201 and minimal.content == b""
    oo = target.client.post(
        f"{target.base}/Patient", json=patient(_system()), headers={**JSON, "Prefer": "return=OperationOutcome"}
    )
    assert oo.json()["resourceType"] == "OperationOutcome"


def test_xml_is_refused(target: Target):
    target.skip_unless("xml-415")
    r = target.client.get(f"{target.base}/Patient", headers={"Accept": "application/fhir+xml"})
    assert r.status_code == 415
    assert r.json()["resourceType"] == "OperationOutcome"
    ok = target.client.get(f"{target.base}/Patient", headers={"Accept": "application/fhir+json"})
    assert ok.status_code == 200


def test_validation_names_the_element(target: Target):
    target.skip_unless("validation")
    bad = {
        "resourceType": "Appointment",
        "status": "maybe",
        "participant": [{"status": "accepted", "actor": {"reference": "Patient/x"}}],
    }
    r = target.client.post(f"{target.base}/Appointment", json=bad, headers=JSON)
    assert r.status_code in (400, 422)
    issues = r.json()["issue"]
    assert any("Appointment.status" in e for i in issues for e in i.get("expression", []))
    good = dict(bad, status="booked")
    assert target.client.post(f"{target.base}/Appointment", json=good, headers=JSON).status_code == 201
