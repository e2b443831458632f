"""Property tests: whatever a client sends, the server answers 4xx/2xx (or a 503 past its time
budget), never 500, keeps serving, and answers within its per-request budget at the 99th percentile."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fae.fhir.engine import MAX_BODY, FhirEngine

# the budget every request runs under; the latency bound below is derived from it, not tuned
BUDGET_S = 5.0
ENGINE = FhirEngine(request_budget_s=BUDGET_S)
LATENCIES: list[float] = []
SID = ENGINE.create_sandbox(
    {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": {"resourceType": "Patient", "id": "p", "name": [{"family": "Fuzz"}], "birthDate": "2000"}},
            {
                "resource": {
                    "resourceType": "Observation",
                    "id": "o",
                    "status": "final",
                    "code": {"text": "x"},
                    "subject": {"reference": "Patient/p"},
                    "valueQuantity": {"value": 3},
                }
            },
        ],
    }
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceType",
                    "id",
                    "name",
                    "status",
                    "code",
                    "subject",
                    "reference",
                    "value",
                    "extension",
                    "url",
                    "meta",
                    "family",
                    "entry",
                    "request",
                    "method",
                    "resource",
                    "type",
                    "contained",
                    "_name",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)
resource_types = st.sampled_from(["Patient", "Observation", "Bundle", "Appointment", "Nope", ""])
param_names = st.sampled_from(
    [
        "name",
        "birthdate",
        "subject",
        "code",
        "value-quantity",
        "_id",
        "_sort",
        "_count",
        "_include",
        "_revinclude",
        "_has:Observation:patient:code",
        "subject:Patient.name",
        "name:exact",
        "gender:missing",
        "_summary",
        "_elements",
        "_offset",
        "date",
        "identifier",
        "x",
    ]
) | st.text(max_size=12)


def healthy() -> None:
    """The sandbox still answers. (Not "Patient/p still exists": a generated DELETE may remove it.)"""
    assert ENGINE.handle(SID, "GET", "Patient", "_count=1").status == 200
    assert ENGINE.handle(SID, "GET", "metadata").status == 200


class Timed:
    """ENGINE with each `handle` call's duration kept in LATENCIES."""

    def handle(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return ENGINE.handle(*args, **kwargs)
        finally:
            LATENCIES.append(time.perf_counter() - start)


TIMED = Timed()


def check(resp) -> None:
    assert resp.status < 500 or resp.status == 503, resp.body
    if resp.body:
        json.loads(resp.body)


@SETTINGS
@given(rtype=resource_types, body=json_values, method=st.sampled_from(["POST", "PUT"]), typed=st.booleans())
def test_random_bodies(rtype, body, method, typed):
    if isinstance(body, dict) and rtype and typed:
        body.setdefault("resourceType", rtype)
    path = rtype if method == "POST" else f"{rtype}/p"
    check(TIMED.handle(SID, method, path, body=json.dumps(body).encode()))
    check(TIMED.handle(SID, "POST", "", body=json.dumps(body).encode()))


patch_ops = st.lists(
    st.fixed_dictionaries(
        {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x"])},
        optional={
            "path": st.sampled_from(
                [
                    "",
                    "/",
                    "/name",
                    "/name/0",
                    "/name/-",
                    "/name/0/family",
                    "/id",
                    "/gender",
                    "/meta",
                    "/x~1y",
                    "/name/01",
                ]
            )
            | st.text(max_size=10),
            "from": st.sampled_from(["/name", "/name/0", "/birthDate", ""]),
            "value": json_values,
        },
    ),
    max_size=6,
)


@SETTINGS
@given(ops=patch_ops | json_values, fhirpath=st.booleans())
def test_random_patches(ops, fhirpath):
    if fhirpath:
        body = {
            "resourceType": "Parameters",
            "parameter": [
                {
                    "name": "operation",
                    "part": [
                        {"name": "type", "valueCode": str(op.get("op"))},
                        {"name": "path", "valueString": str(op.get("path"))},
                        {"name": "value", "valueString": str(op.get("value"))},
                    ],
                }
                for op in ops
                if isinstance(op, dict)
            ]
            if isinstance(ops, list)
            else ops,
        }
        headers = None
    else:
        body, headers = ops, {"Content-Type": "application/json-patch+json"}
    resp = TIMED.handle(SID, "PATCH", "Patient/p", headers=headers, body=json.dumps(body).encode())
    check(resp)
    assert resp.status != 200 or resp.json()["id"] == "p"


@SETTINGS
@given(raw=st.binary(max_size=200))
def test_random_bytes(raw):
    check(TIMED.handle(SID, "POST", "Patient", body=raw))


@SETTINGS
@given(rtype=resource_types, pairs=st.lists(st.tuples(param_names, st.text(max_size=24)), max_size=4))
def test_random_searches(rtype, pairs):
    query = "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs)
    check(TIMED.handle(SID, "GET", rtype, query))
    check(TIMED.handle(SID, "GET", rtype, query.replace("%", "%%")))


@SETTINGS
@given(
    path=st.lists(
        st.sampled_from(
            [
                "..",
                ".",
                "Patient",
                "p",
                "_history",
                "1",
                "%2e%2e",
                "etc",
                "passwd",
                "$everything",
                "",
                "metadata",
                "_search",
            ]
        ),
        max_size=6,
    ),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
)
def test_path_traversal_and_odd_paths(path, method):
    check(TIMED.handle(SID, method, "/".join(path), body=b"{}"))


def test_oversized_and_deep_payloads():
    big = b'{"resourceType":"Patient","name":[{"family":"' + b"x" * MAX_BODY + b'"}]}'
    assert ENGINE.handle(SID, "POST", "Patient", body=big).status == 413
    deep = b'{"resourceType":"Patient","extension":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    check(TIMED.handle(SID, "POST", "Patient", body=deep))
    nested: dict = {"url": "http://x"}
    for _ in range(300):
        nested = {"url": "http://x", "extension": [nested]}
    check(
        TIMED.handle(
            SID, "POST", "Patient", body=json.dumps({"resourceType": "Patient", "extension": [nested]}).encode()
        )
    )
    check(TIMED.handle(SID, "POST", "Patient", body=b'{"resourceType":"Patient","x":NaN}'))
    healthy()


def test_p99_latency_within_the_request_budget():
    """Hostile requests that used to stall (regex backtracking, per-entry scans) stay under budget."""
    bomb = "\r\n".join(["QUJD" * 19] * 60) + "\r\nQUJ"
    check(
        TIMED.handle(
            SID,
            "POST",
            "Binary",
            body=json.dumps({"resourceType": "Binary", "contentType": "text/plain", "data": bomb}).encode(),
        )
    )
    entries = [
        {
            "resource": {"resourceType": "Patient", "identifier": [{"system": "s", "value": str(i)}]},
            "request": {"method": "POST", "url": "Patient", "ifNoneExist": f"identifier=s|{i}"},
        }
        for i in range(300)
    ]
    check(
        TIMED.handle(
            SID, "POST", "", body=json.dumps({"resourceType": "Bundle", "type": "batch", "entry": entries}).encode()
        )
    )
    ordered = sorted(LATENCIES)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"fuzz: {len(ordered)} requests, p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms")
    assert p99 < BUDGET_S, f"p99 {p99:.2f} s is over the {BUDGET_S} s request budget"
    # the budget is checked every few hundred steps, so even the slowest overshoots it only a little
    assert ordered[-1] < 2 * BUDGET_S, f"slowest request took {ordered[-1]:.2f} s"


def teardown_module() -> None:
    healthy()
