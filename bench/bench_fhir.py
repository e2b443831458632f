"""Embedded FHIR server speed: seed/reset/clone (median ms), searches/s, p99 of random requests.

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
        entries.append({"resource": {"resourceType": "Patient", "id": f"p{i}", "gender": "female",
                                     "name": [{"family": f"Family{i}", "given": ["Ann"]}],
                                     "birthDate": f"19{50 + i}-01-01",
                                     "identifier": [{"system": "urn:mrn", "value": str(i)}]}})
        entries.append({"resource": {"resourceType": "Observation", "id": f"o{i}", "status": "final",
                                     "code": {"coding": [{"system": "http://loinc.org", "code": "8480-6"}]},
                                     "subject": {"reference": f"Patient/p{i}"},
                                     "effectiveDateTime": f"2024-01-{i + 1:02d}",
                                     "valueQuantity": {"value": 100 + i, "unit": "mmHg"}}})
        entries.append({"resource": {"resourceType": "Appointment", "id": f"a{i}", "status": "booked",
                                     "participant": [{"status": "accepted",
                                                      "actor": {"reference": f"Patient/p{i}"}}]}})
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
        return rng.choice([None, True, 7, -2**31, 1.5, "", "x", "\u00a0a", "2020-01-01", "Patient/p1"])
    keys = ["resourceType", "id", "name", "status", "code", "subject", "reference", "value", "url",
            "extension", "meta", "entry", "request", "method", "resource", "type", "data"]
    if roll < 0.7:
        return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def fuzz_p99(engine: FhirEngine, sid: str, n: int = 2000) -> tuple[float, float]:
    """p99 and max latency (ms) of seeded random requests: bodies, queries, and known stallers."""
    rng = random.Random(7)
    bomb = json.dumps({"resourceType": "Binary", "contentType": "text/plain",
                       "data": "\r\n".join(["QUJD" * 19] * 60) + "\r\nQUJ"}).encode()
    params = ["name", "birthdate", "subject", "code", "_id", "_sort", "_count", "_include", "_revinclude",
              "_has:Observation:patient:code", "name:exact", "gender:missing", "_elements", "x"]
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
            query = "&".join(f"{rng.choice(params)}={rng.choice(['a', 'Patient/p1', '*', 'ge2020', '1'])}"
                             for _ in range(rng.randint(0, 3)))
            engine.handle(sid, "GET", rng.choice(["Patient", "Observation", "Appointment"]), query)
        elif kind == 2:
            engine.handle(sid, "POST", "Binary", body=bomb)
        else:
            engine.handle(sid, "GET", f"Patient/p{rng.randint(0, 12)}")
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[int(len(times) * 0.99)], times[-1]


def main() -> None:
    engine = FhirEngine()
    bundle = seed_bundle()
    counter = iter(range(10**9))
    seed = median_ms(lambda: engine.create_sandbox(bundle, f"s{next(counter)}"), 200)
    sid = engine.create_sandbox(bundle, "bench")
    reset = median_ms(lambda: engine.reset_sandbox(sid), 1000)
    clone = median_ms(lambda: engine.clone_sandbox(sid, f"c{next(counter)}"), 500)
    queries = [("Patient", "name=fam"), ("Observation", "code=http://loinc.org|8480-6&date=ge2024-01-05"),
               ("Observation", "patient.name=family1"), ("Appointment", "actor=Patient/p3"),
               ("Patient", "_sort=-birthdate&_count=5"), ("Observation", "_include=Observation:subject")]
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


if __name__ == "__main__":
    main()
