"""Embedded FHIR server speed: seed and reset of a 30-resource sandbox (median ms), searches/s.

    uv run python bench/bench_fhir.py
"""

from __future__ import annotations

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


if __name__ == "__main__":
    main()
