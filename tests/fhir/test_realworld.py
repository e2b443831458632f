"""Real-world data and clients: Synthea-style transactions, include/elements details, spec examples."""

from __future__ import annotations

import json

import pytest

from fae.fhir.engine import FhirEngine
from fae.fhir.transactions import DEFAULT_MAX_ENTRIES

NPI = "http://hl7.org/fhir/sid/us-npi"


def post(engine: FhirEngine, sid: str, path: str, body: object, headers: dict | None = None, base: str = ""):
    return engine.handle(sid, "POST", path, headers=headers, body=json.dumps(body).encode(), base_url=base)


def transaction(*entries: dict, kind: str = "transaction") -> dict:
    return {"resourceType": "Bundle", "type": kind, "entry": list(entries)}


def create(resource: dict, full_url: str | None = None, if_none_exist: str | None = None) -> dict:
    entry: dict = {"resource": resource, "request": {"method": "POST", "url": resource["resourceType"]}}
    if full_url:
        entry["fullUrl"] = full_url
    if if_none_exist:
        entry["request"]["ifNoneExist"] = if_none_exist
    return entry


def practitioner(npi: str) -> dict:
    return {
        "resourceType": "Practitioner",
        "identifier": [{"system": NPI, "value": npi}],
        "name": [{"family": f"Doc{npi}"}],
    }


def encounter(patient_url: str, npi: str) -> dict:
    return {
        "resourceType": "Encounter",
        "status": "finished",
        "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"},
        "subject": {"reference": patient_url},
        "participant": [{"individual": {"reference": f"Practitioner?identifier={NPI}|{npi}"}}],
    }


@pytest.fixture()
def with_practitioners(engine):
    sid = engine.create_sandbox()
    resp = post(
        engine,
        sid,
        "",
        transaction(*(create(practitioner(n), if_none_exist=f"identifier={NPI}|{n}") for n in ("480", "481"))),
    )
    assert resp.status == 200, resp.body
    return sid


# ---- conditional references ---------------------------------------------------------------


def test_conditional_reference_resolves_to_the_one_match(engine, with_practitioners):
    sid = with_practitioners
    patient = "urn:uuid:11111111-1111-4111-8111-111111111111"
    resp = post(
        engine, sid, "", transaction(create({"resourceType": "Patient"}, patient), create(encounter(patient, "480")))
    )
    assert resp.status == 200, resp.body
    enc = engine.resources(sid, "Encounter")[0]
    doc = next(p for p in engine.resources(sid, "Practitioner") if p["identifier"][0]["value"] == "480")
    assert enc["participant"][0]["individual"]["reference"] == f"Practitioner/{doc['id']}"
    assert enc["subject"]["reference"].startswith("Patient/")


def test_conditional_reference_sees_resources_created_earlier_in_the_transaction(engine):
    sid = engine.create_sandbox()
    resp = post(
        engine,
        sid,
        "",
        transaction(
            create(encounter("Patient/nobody", "900")),
            create(practitioner("900"), if_none_exist=f"identifier={NPI}|900"),
        ),
    )
    # POSTs run in bundle order; the practitioner comes later, so the reference finds nothing
    assert resp.status == 400, resp.body
    resp = post(
        engine,
        sid,
        "",
        transaction(
            create(practitioner("900")),
            create({"resourceType": "Patient"}, "urn:uuid:p"),
            create(encounter("urn:uuid:p", "900")),
        ),
    )
    assert resp.status == 200, resp.body


@pytest.mark.parametrize(
    ("npi", "status", "words"),
    [
        ("999", 400, "matches no resource"),
        ("dup", 412, "matches 2 resources"),
    ],
)
def test_conditional_reference_without_exactly_one_match_fails_the_transaction(
    engine, with_practitioners, npi, status, words
):
    sid = with_practitioners
    if npi == "dup":
        for _ in range(2):
            assert post(engine, sid, "Practitioner", practitioner("dup")).status == 201
    before = len(engine.resources(sid))
    resp = post(
        engine,
        sid,
        "",
        transaction(create({"resourceType": "Patient"}, "urn:uuid:p"), create(encounter("urn:uuid:p", npi))),
    )
    assert resp.status == status, resp.body
    body = resp.json()
    assert body["resourceType"] == "OperationOutcome"
    assert words in body["issue"][0]["diagnostics"] and "Bundle.entry[1]" in body["issue"][0]["diagnostics"]
    assert len(engine.resources(sid)) == before, "a failed transaction wrote something"


def test_conditional_reference_with_unknown_parameter_is_refused(engine, with_practitioners):
    bad = encounter("Patient/x", "480")
    bad["participant"][0]["individual"]["reference"] = "Practitioner?shoe-size=9"
    resp = post(engine, with_practitioners, "", transaction(create(bad)))
    assert resp.status == 400, resp.body


def test_conditional_reference_outside_a_transaction_is_still_malformed(engine, with_practitioners):
    resp = post(engine, with_practitioners, "Encounter", encounter("Patient/x", "480"))
    assert resp.status == 422 and "only inside a transaction" in resp.body.decode(), resp.body


# ---- one entry limit for seeds and posts ----------------------------------------------------


def test_entry_limit_is_shared_and_large(engine):
    assert DEFAULT_MAX_ENTRIES >= 10_000
    entries = [create({"resourceType": "Patient", "gender": "male"}) for _ in range(1111)]
    sid = engine.create_sandbox()
    resp = post(engine, sid, "", transaction(*entries))
    assert resp.status == 200, resp.body
    small = FhirEngine(max_entries=5)
    sid = small.create_sandbox()
    over = post(small, sid, "", transaction(*entries[:6]))
    assert over.status == 413 and "at most 5" in over.body.decode()
    assert post(small, sid, "", transaction(*entries[:5])).status == 200
    from fae.errors import FhirError

    with pytest.raises(FhirError, match="at most 5"):
        small.create_sandbox(
            {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": {"resourceType": "Patient"}}] * 6}
        )


# ---- absolute request URLs ---------------------------------------------------------------


def test_absolute_request_url_on_our_base_works_and_others_get_a_clear_error(engine):
    sid = engine.create_sandbox()
    base = "http://fae.test/sandbox/s/fhir"
    ours = {
        "resource": {"resourceType": "Patient", "id": "a"},
        "request": {"method": "PUT", "url": f"{base}/Patient/a"},
    }
    resp = post(engine, sid, "", transaction(ours), base=base)
    assert resp.status == 200, resp.body
    assert engine.handle(sid, "GET", "Patient/a").status == 200
    theirs = {
        "resource": {"resourceType": "Patient", "id": "b"},
        "request": {"method": "PUT", "url": "https://us.example.org/fhir/Patient/b"},
    }
    for body_base in (base, ""):
        resp = post(engine, sid, "", transaction(theirs), base=body_base)
        assert resp.status == 400, resp.body
        text = resp.body.decode()
        assert "absolute URL outside this server's base" in text and "Unknown resource type" not in text


# ---- _include / _revinclude ----------------------------------------------------------------


@pytest.fixture()
def linked(engine):
    seed = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": r}
            for r in [
                {"resourceType": "Patient", "id": "x"},
                {"resourceType": "Patient", "id": "other"},
                {
                    "resourceType": "Encounter",
                    "id": "e",
                    "status": "finished",
                    "class": {"code": "AMB"},
                    "subject": {"reference": "Patient/x"},
                },
                {
                    "resourceType": "Observation",
                    "id": "o",
                    "status": "final",
                    "code": {"text": "t"},
                    "subject": {"reference": "Patient/x"},
                    "encounter": {"reference": "Encounter/e"},
                },
                {
                    "resourceType": "Provenance",
                    "id": "pv",
                    "target": [{"reference": "Observation/o"}],
                    "recorded": "2020-01-01T00:00:00Z",
                    "agent": [{"who": {"reference": "Patient/other"}}],
                },
                {
                    "resourceType": "Observation",
                    "id": "o2",
                    "status": "final",
                    "code": {"text": "t"},
                    "subject": {"reference": "Patient/other"},
                },
            ]
        ],
    }
    return engine.create_sandbox(seed)


def ids(bundle: dict, mode: str | None = None) -> set[str]:
    return {e["resource"]["id"] for e in bundle["entry"] if mode is None or e.get("search", {}).get("mode") == mode}


def test_revinclude_star_and_iterate_are_supported_without_warnings(engine, linked):
    strict = {"Prefer": "handling=strict"}
    star = engine.handle(linked, "GET", "Patient", "_id=x&_revinclude=*", strict)
    assert star.status == 200, star.body
    assert ids(star.json(), "include") == {"e", "o"}
    assert all(e["search"]["mode"] != "outcome" for e in star.json()["entry"])
    deep = engine.handle(linked, "GET", "Patient", "_id=x&_revinclude:iterate=*", strict)
    assert deep.status == 200, deep.body
    assert ids(deep.json(), "include") == {"e", "o", "pv"}
    lenient = engine.handle(linked, "GET", "Patient", "_id=x&_revinclude:iterate=*").json()
    assert ids(lenient) == ids(deep.json()), "lenient mode added an outcome entry"
    inc = engine.handle(linked, "GET", "Observation", "_id=o&_include:iterate=*", strict)
    assert inc.status == 200 and ids(inc.json(), "include") == {"x", "e"}
    bogus = engine.handle(linked, "GET", "Patient", "_id=x&_revinclude:bogus=*", strict)
    assert bogus.status == 400


# ---- _elements ---------------------------------------------------------------------------


def test_elements_keeps_mandatory_elements_id_and_meta(engine, linked):
    bundle = engine.handle(linked, "GET", "Observation", "_id=o&_elements=status").json()
    obs = bundle["entry"][0]["resource"]
    assert set(obs) == {"resourceType", "id", "meta", "status", "code"}
    assert {"code": "SUBSETTED"}.items() <= obs["meta"]["tag"][-1].items()
    read = engine.handle(linked, "GET", "Observation/o", "_elements=subject").json()
    assert set(read) == {"resourceType", "id", "meta", "status", "code", "subject"}


# ---- validation false positives on valid official examples -----------------------------------


@pytest.mark.parametrize(
    "resource",
    [
        {"resourceType": "Patient", "name": [{"family": "Van\u00a0Houten"}]},
        {"resourceType": "Patient", "name": [{"text": "山田\u3000太郎"}]},
        {"resourceType": "Observation", "status": "final", "code": {"text": "5\u2009mg"}},
        {"resourceType": "Observation", "status": "final", "code": {"text": "n"}, "valueInteger": -2147483648},
        {"resourceType": "Observation", "status": "final", "code": {"text": "n"}, "valueInteger": 2147483647},
        {
            "resourceType": "Bundle",
            "type": "transaction-response",
            "entry": [
                {
                    "response": {
                        "status": "400",
                        "outcome": {
                            "resourceType": "OperationOutcome",
                            "issue": [{"severity": "error", "code": "invalid"}],
                        },
                    }
                }
            ],
        },
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "n"},
            "subject": {"reference": "http://example.org/fhir/Network/x"},
        },
    ],
)
def test_valid_examples_are_accepted(engine, resource):
    sid = engine.create_sandbox()
    resp = post(engine, sid, resource["resourceType"], resource)
    assert resp.status == 201, resp.body


@pytest.mark.parametrize(
    ("resource", "element"),
    [
        ({"resourceType": "Patient", "name": [{"family": " \t\r\n"}]}, "Patient.name[0].family"),
        ({"resourceType": "Patient", "gender": "male "}, "Patient.gender"),
        (
            {"resourceType": "Observation", "status": "final", "code": {"text": "n"}, "valueInteger": -2147483649},
            "Observation.valueInteger",
        ),
        (
            {"resourceType": "Observation", "status": "final", "code": {"text": "n"}, "valueInteger": 2147483648},
            "Observation.valueInteger",
        ),
        (
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "n"},
                "subject": {"reference": "Network/x"},
            },
            "Observation.subject.reference",
        ),
        (
            {
                "resourceType": "Bundle",
                "type": "transaction-response",
                "entry": [{"response": {"status": "400", "outcome": {"resourceType": "Nope"}}}],
            },
            "Bundle.entry[0].response.outcome",
        ),
        ({"resourceType": "Binary", "contentType": "text/plain", "data": "QUJ"}, "Binary.data"),
    ],
)
def test_invalid_values_are_still_refused(engine, resource, element):
    sid = engine.create_sandbox()
    resp = post(engine, sid, resource["resourceType"], resource)
    assert resp.status == 422, resp.body
    assert any(element in " ".join(i.get("expression", [])) for i in resp.json()["issue"]), resp.body


def test_seed_resolves_conditional_references_against_its_own_resources(engine):
    from fae.errors import FhirError

    doc = practitioner("480")
    doc["id"] = "doc"
    seed = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": "urn:uuid:p",
                "resource": {"resourceType": "Patient"},
                "request": {"method": "POST", "url": "Patient"},
            },
            {"resource": encounter("urn:uuid:p", "480"), "request": {"method": "POST", "url": "Encounter"}},
            {"resource": doc, "request": {"method": "POST", "url": "Practitioner"}},
        ],
    }
    sid = engine.create_sandbox(seed)
    assert engine.resources(sid, "Encounter")[0]["participant"][0]["individual"]["reference"] == "Practitioner/doc"
    seed["entry"] = seed["entry"][:2]
    with pytest.raises(FhirError, match=r"entry\[1\].*matches no resource"):
        engine.create_sandbox(seed)
