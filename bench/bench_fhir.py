"""Embedded FHIR server speed: seed/reset/clone (median ms), searches/s, p99 of random requests,
Synthea-style transaction loading (entries/s by bundle size) and PATCH latency.

    uv run python bench/bench_fhir.py
"""

from __future__ import annotations

import json
import random
import statistics
import time

from fae.fhir.engine import FhirEngine


def seed_bundle(n: int = 30) -> dict:
    entries = []
    for i in range(n // 3):
        entries.append(
            {
                "resource": {
                    "resourceType": "Patient",
                    "id": f"p{i}",
                    "gender": "female",
                    "name": [{"family": f"Family{i}", "given": ["Ann"]}],
                    "birthDate": f"19{50 + i}-01-01",
                    "identifier": [{"system": "urn:mrn", "value": str(i)}],
                }
            }
        )
        entries.append(
            {
                "resource": {
                    "resourceType": "Observation",
                    "id": f"o{i}",
                    "status": "final",
                    "code": {"coding": [{"system": "http://loinc.org", "code": "8480-6"}]},
                    "subject": {"reference": f"Patient/p{i}"},
                    "effectiveDateTime": f"2024-01-{i + 1:02d}",
                    "valueQuantity": {"value": 100 + i, "unit": "mmHg"},
                }
            }
        )
        entries.append(
            {
                "resource": {
                    "resourceType": "Appointment",
                    "id": f"a{i}",
                    "status": "booked",
                    "participant": [{"status": "accepted", "actor": {"reference": f"Patient/p{i}"}}],
                }
            }
        )
    return {"resourceType": "Bundle", "type": "collection", "entry": entries}


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def random_json(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([None, True, 7, -(2**31), 1.5, "", "x", "\u00a0a", "2020-01-01", "Patient/p1"])
    keys = [
        "resourceType",
        "id",
        "name",
        "status",
        "code",
        "subject",
        "reference",
        "value",
        "url",
        "extension",
        "meta",
        "entry",
        "request",
        "method",
        "resource",
        "type",
        "data",
    ]
    if roll < 0.7:
        return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def fuzz_p99(engine: FhirEngine, sid: str, n: int = 2000) -> tuple[float, float]:
    """p99 and max latency (ms) of seeded random requests: bodies, queries, and known stallers."""
    rng = random.Random(7)
    bomb = json.dumps(
        {"resourceType": "Binary", "contentType": "text/plain", "data": "\r\n".join(["QUJD" * 19] * 60) + "\r\nQUJ"}
    ).encode()
    params = [
        "name",
        "birthdate",
        "subject",
        "code",
        "_id",
        "_sort",
        "_count",
        "_include",
        "_revinclude",
        "_has:Observation:patient:code",
        "name:exact",
        "gender:missing",
        "_elements",
        "x",
    ]
    times = []
    for i in range(n):
        kind = i % 4
        start = time.perf_counter()
        if kind == 0:
            body = random_json(rng)
            if isinstance(body, dict):
                body.setdefault("resourceType", rng.choice(["Patient", "Observation", "Bundle"]))
            engine.handle(sid, "POST", rng.choice(["Patient", "Observation", ""]), body=json.dumps(body).encode())
        elif kind == 1:
            query = "&".join(
                f"{rng.choice(params)}={rng.choice(['a', 'Patient/p1', '*', 'ge2020', '1'])}"
                for _ in range(rng.randint(0, 3))
            )
            engine.handle(sid, "GET", rng.choice(["Patient", "Observation", "Appointment"]), query)
        elif kind == 2:
            engine.handle(sid, "POST", "Binary", body=bomb)
        else:
            engine.handle(sid, "GET", f"Patient/p{rng.randint(0, 12)}")
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[int(len(times) * 0.99)], times[-1]


NPI = "http://hl7.org/fhir/sid/us-npi"
ORG = "https://github.com/synthetichealth/synthea"


def hospital_bundle(n_doctors: int = 20) -> dict:
    """Shared Practitioners and Organizations, created once (ifNoneExist), as Synthea does."""
    entries = []
    for i in range(n_doctors):
        org = {
            "resourceType": "Organization",
            "identifier": [{"system": ORG, "value": f"org{i}"}],
            "name": f"Clinic {i}",
        }
        entries.append(
            {
                "resource": org,
                "request": {"method": "POST", "url": "Organization", "ifNoneExist": f"identifier={ORG}|org{i}"},
            }
        )
        doctor = {
            "resourceType": "Practitioner",
            "identifier": [{"system": NPI, "value": str(1000 + i)}],
            "name": [{"family": f"Doc{i}"}],
        }
        entries.append(
            {
                "resource": doctor,
                "request": {"method": "POST", "url": "Practitioner", "ifNoneExist": f"identifier={NPI}|{1000 + i}"},
            }
        )
    return {"resourceType": "Bundle", "type": "transaction", "entry": entries}


def synthea_bundle(n_entries: int, seed: int = 1, n_doctors: int = 20) -> dict:
    """A patient-history transaction: Patients, Encounters, Observations and Conditions, with
    urn:uuid references inside the bundle and conditional references to the shared ones."""
    rng = random.Random(seed)
    entries: list[dict] = []
    serial = iter(range(10**9))

    def urn() -> str:
        return f"urn:uuid:00000000-0000-4000-8000-{next(serial):012d}"

    def post(resource: dict, full_url: str) -> None:
        entries.append(
            {"fullUrl": full_url, "resource": resource, "request": {"method": "POST", "url": resource["resourceType"]}}
        )

    while len(entries) < n_entries:
        patient = urn()
        post(
            {
                "resourceType": "Patient",
                "gender": rng.choice(["male", "female"]),
                "birthDate": "1970-05-01",
                "name": [{"family": f"Fam{len(entries)}", "given": ["Pat"]}],
                "identifier": [{"system": "urn:mrn", "value": patient[-12:]}],
            },
            patient,
        )
        for _ in range(9):
            doc = rng.randrange(n_doctors)
            encounter = urn()
            post(
                {
                    "resourceType": "Encounter",
                    "status": "finished",
                    "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"},
                    "subject": {"reference": patient},
                    "participant": [{"individual": {"reference": f"Practitioner?identifier={NPI}|{1000 + doc}"}}],
                    "serviceProvider": {"reference": f"Organization?identifier={ORG}|org{doc}"},
                    "period": {"start": "2020-01-01T10:00:00Z", "end": "2020-01-01T10:30:00Z"},
                },
                encounter,
            )
            for code in ("8480-6", "8462-4", "29463-7"):
                post(
                    {
                        "resourceType": "Observation",
                        "status": "final",
                        "code": {"coding": [{"system": "http://loinc.org", "code": code}]},
                        "subject": {"reference": patient},
                        "encounter": {"reference": encounter},
                        "effectiveDateTime": "2020-01-01T10:10:00Z",
                        "valueQuantity": {"value": rng.randint(60, 140), "unit": "mm[Hg]"},
                    },
                    urn(),
                )
            post(
                {
                    "resourceType": "Condition",
                    "subject": {"reference": patient},
                    "encounter": {"reference": encounter},
                    "code": {"coding": [{"system": "http://snomed.info/sct", "code": "44054006"}]},
                },
                urn(),
            )
    return {"resourceType": "Bundle", "type": "transaction", "entry": entries[:n_entries]}


def load_rate(engine: FhirEngine, n_entries: int) -> float:
    """Entries per second for one Synthea-style transaction on a sandbox holding the shared resources."""
    sid = engine.create_sandbox()
    assert engine.handle(sid, "POST", "", body=json.dumps(hospital_bundle()).encode()).status == 200
    body = json.dumps(synthea_bundle(n_entries)).encode()
    start = time.perf_counter()
    resp = engine.handle(sid, "POST", "", body=body)
    elapsed = time.perf_counter() - start
    assert resp.status == 200, resp.body[:300]
    return n_entries / elapsed


def patch_ms(engine: FhirEngine, sid: str, repeats: int = 300) -> tuple[float, float]:
    """Median ms of a JSON Patch and of a FHIRPath Patch on one Patient."""
    json_patch = json.dumps([{"op": "replace", "path": "/gender", "value": "male"}]).encode()
    fhirpath_patch = json.dumps(
        {
            "resourceType": "Parameters",
            "parameter": [
                {
                    "name": "operation",
                    "part": [
                        {"name": "type", "valueCode": "replace"},
                        {"name": "path", "valueString": "Patient.name.first().family"},
                        {"name": "value", "valueString": "Patched"},
                    ],
                }
            ],
        }
    ).encode()
    headers = {"Content-Type": "application/json-patch+json"}
    for body, extra in ((json_patch, headers), (fhirpath_patch, None)):
        assert engine.handle(sid, "PATCH", "Patient/p1", headers=extra, body=body).status == 200
    first = median_ms(lambda: engine.handle(sid, "PATCH", "Patient/p1", headers=headers, body=json_patch), repeats)
    second = median_ms(lambda: engine.handle(sid, "PATCH", "Patient/p1", body=fhirpath_patch), repeats)
    return first, second


def if_none_exist_seconds(n_existing: int = 50_000, n_entries: int = 1_000) -> float:
    """Seconds for an ifNoneExist transaction on a large sandbox (indexed: no scan per entry)."""
    engine = FhirEngine(request_budget_s=None, max_entries=n_existing)
    patients = [
        {"resource": {"resourceType": "Patient", "id": f"p{i}", "identifier": [{"system": "urn:mrn", "value": str(i)}]}}
        for i in range(n_existing)
    ]
    sid = engine.create_sandbox({"resourceType": "Bundle", "type": "collection", "entry": patients})
    entries = [
        {
            "resource": {"resourceType": "Patient", "identifier": [{"system": "urn:mrn", "value": str(v)}]},
            "request": {"method": "POST", "url": "Patient", "ifNoneExist": f"identifier=urn:mrn|{v}"},
        }
        for v in (i * 97 % (2 * n_existing) for i in range(n_entries))
    ]
    body = json.dumps({"resourceType": "Bundle", "type": "transaction", "entry": entries}).encode()
    start = time.perf_counter()
    assert engine.handle(sid, "POST", "", body=body).status == 200
    return time.perf_counter() - start


def main() -> None:
    engine = FhirEngine()
    bundle = seed_bundle()
    counter = iter(range(10**9))
    seed = median_ms(lambda: engine.create_sandbox(bundle, f"s{next(counter)}"), 200)
    sid = engine.create_sandbox(bundle, "bench")
    reset = median_ms(lambda: engine.reset_sandbox(sid), 1000)
    clone = median_ms(lambda: engine.clone_sandbox(sid, f"c{next(counter)}"), 500)
    queries = [
        ("Patient", "name=fam"),
        ("Observation", "code=http://loinc.org|8480-6&date=ge2024-01-05"),
        ("Observation", "patient.name=family1"),
        ("Appointment", "actor=Patient/p3"),
        ("Patient", "_sort=-birthdate&_count=5"),
        ("Observation", "_include=Observation:subject"),
    ]
    for rtype, query in queries:  # warm the compiled expressions and value caches
        engine.handle(sid, "GET", rtype, query)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < 2.0:
        for rtype, query in queries:
            assert engine.handle(sid, "GET", rtype, query).status == 200
            n += 1
    rate = n / (time.perf_counter() - start)
    print(f"seed 30 resources (validated): median {seed:.3f} ms")
    print(f"reset 30-resource sandbox:     median {reset:.4f} ms")
    print(f"clone 30-resource sandbox:     median {clone:.4f} ms")
    print(f"searches per second (30 resources, mixed queries): {rate:.0f}")
    p99, worst = fuzz_p99(engine, engine.create_sandbox(bundle, "fuzz"))
    print(f"fuzz p99 latency (2000 random requests): {p99:.2f} ms (max {worst:.1f} ms)")
    json_ms, fhirpath_ms = patch_ms(engine, engine.create_sandbox(bundle, "patch"))
    print(f"PATCH latency: JSON Patch median {json_ms:.3f} ms, FHIRPath Patch median {fhirpath_ms:.3f} ms")
    print(f"ifNoneExist transaction, 1000 entries on a 50,000-resource sandbox: {if_none_exist_seconds():.2f} s")
    loader = FhirEngine(request_budget_s=None)
    for size in (100, 1_000, 5_000, 10_000):
        print(f"Synthea-style transaction, {size:>6} entries: {load_rate(loader, size):,.0f} entries/s")


if __name__ == "__main__":
    main()
