"""Hostile client input: no stalls, no 500s, no state left broken (issue: never stall or 500)."""

from __future__ import annotations

import itertools
import json
import threading
from datetime import UTC, datetime

import httpx
import pytest

from fae.fhir.app import create_app
from fae.fhir.engine import FhirEngine
from fae.fhir.primitives import is_base64, valid_text
from fae.fhir.versions import Store
from tests.fhir.conftest import LiveServer


def post(engine: FhirEngine, sid: str, path: str, body: object, headers: dict | None = None):
    return engine.handle(sid, "POST", path, headers=headers, body=json.dumps(body).encode())


def bundle(*resources: dict, kind: str = "collection") -> dict:
    return {"resourceType": "Bundle", "type": kind, "entry": [{"resource": r} for r in resources]}


def nested_extension(depth: int) -> dict:
    node: dict = {"url": "http://x", "valueString": "leaf"}
    for _ in range(depth):
        node = {"url": "http://x", "extension": [node]}
    return node


# ---- primitives in linear time ------------------------------------------------------------


@pytest.mark.timeout(60)
def test_unpadded_base64_with_crlf_lines_is_answered_at_once(engine):
    """The spec's base64 regex backtracks exponentially here; a linear check answers 422 at once."""
    sid = engine.create_sandbox()
    lines = ["QUJD" * 19] * 60  # 76 columns, CRLF-separated, ~4.6 KB
    data = "\r\n".join(lines) + "\r\nQUJ"  # three characters short of a quad: missing padding
    resp = post(engine, sid, "Binary", {"resourceType": "Binary", "contentType": "text/plain", "data": data})
    assert resp.status == 422, resp.body
    assert "base64Binary" in resp.body.decode()
    good = post(
        engine,
        sid,
        "Binary",
        {"resourceType": "Binary", "contentType": "text/plain", "data": "\r\n".join(lines) + "\r\nQUI="},
    )
    assert good.status == 201, good.body


@pytest.mark.parametrize(
    ("type_code", "good", "bad"),
    [
        ("base64Binary", ["", "QUJD", "QU I=\n", "QUJDRA=="], ["QUJ", "QU*D", "QUJD\u00a0"]),
        ("string", ["a", " a ", "a\u00a0b", "\u3000x", "\u2009"], ["", " ", "\r\n\t "]),
        ("code", ["a", "a b", "a\u00a0b", "x\u3000"], ["", " a", "a ", "a  b", "a\t\nb"]),
        ("id", ["a", "A-1.b", "x" * 64], ["", "x" * 65, "a_b", "a b"]),
        ("uri", ["http://x", "urn:a\u00a0b"], ["", "http://x y", "a\tb"]),
        ("oid", ["urn:oid:1.2.840", "urn:oid:2.0"], ["urn:oid:3.1", "urn:oid:1", "urn:oid:1.02", "oid:1.2"]),
        (
            "uuid",
            ["urn:uuid:c757873d-ec9a-4326-a141-556f43239520"],
            ["urn:uuid:C757873D-ec9a-4326-a141-556f43239520", "urn:uuid:c757873d-ec9a-4326-a141-556f4323952"],
        ),
        ("date", ["2020", "2020-02", "2020-02-29", "0001"], ["0000", "2020-13", "2020-02-30", "20-01", "2020-1-01"]),
        (
            "dateTime",
            ["2020", "2020-01-01T10:00:00Z", "2020-01-01T10:00:00.123+14:00", "2020-01-01T23:59:60-05:30"],
            [
                "2020-01-01T10:00Z",
                "2020-01-01T10:00:00",
                "2020-01-01T24:00:00Z",
                "2020-01-01T10:00:00+15:00",
                "2020-01-01T10:00:00.Z",
                "2020-01T10:00:00Z",
            ],
        ),
        ("instant", ["2020-01-01T10:00:00Z", "2020-01-01T10:00:00.5+01:00"], ["2020-01-01", "2020-01-01T10:00:00"]),
        ("time", ["10:00:00", "23:59:59.999"], ["10:00", "25:00:00", "10:00:00Z"]),
    ],
)
def test_primitive_checks_keep_the_xml_schema_meaning(type_code, good, bad):
    for text in good:
        assert valid_text(type_code, text), f"{type_code} {text!r} should be valid"
    for text in bad:
        assert not valid_text(type_code, text), f"{type_code} {text!r} should be invalid"


def test_base64_check_needs_whole_quads():
    assert is_base64("QUJD\r\nRA==") and not is_base64("QUJD\r\nRA=")


# ---- invalid Unicode and nesting ----------------------------------------------------------


def test_lone_surrogate_is_refused_and_the_sandbox_keeps_serving(engine):
    sid = engine.create_sandbox()
    raw = b'{"resourceType":"Patient","name":[{"family":"\\ud800"}]}'
    resp = engine.handle(sid, "POST", "Patient", body=raw)
    assert resp.status == 400, resp.body
    assert "Unicode" in resp.body.decode()
    emoji = b'{"resourceType":"Patient","name":[{"family":"\\ud83d\\ude00"}]}'
    paired = engine.handle(sid, "POST", "Patient", body=emoji)
    assert paired.status == 201, paired.body
    search = engine.handle(sid, "GET", "Patient")
    assert search.status == 200 and search.json()["total"] == 1
    update = engine.handle(
        sid,
        "PUT",
        f"Patient/{paired.json()['id']}",
        body=raw.replace(b'"Patient",', b'"Patient","id":"' + paired.json()["id"].encode() + b'",'),
    )
    assert update.status == 400
    assert engine.handle(sid, "GET", "Patient").status == 200


def test_seed_with_lone_surrogate_or_deep_nesting_is_refused(engine):
    from fae.errors import FhirError

    with pytest.raises(FhirError, match="not valid JSON data"):
        engine.create_sandbox(bundle({"resourceType": "Patient", "name": [{"family": "\ud800"}]}))
    with pytest.raises(FhirError, match="nested more than"):
        engine.create_sandbox(bundle({"resourceType": "Patient", "extension": [nested_extension(900)]}))


def deep_patient_text(depth: int) -> str:
    """A Patient whose extensions nest `depth` deep, as text (json.dumps itself recurses too deep)."""
    head = '{"url":"http://x","extension":[' * depth
    tail = "]}" * depth
    return '{"resourceType":"Patient","extension":[' + head + '{"url":"http://x","valueString":"a"}' + tail + "]}"


def test_deep_nesting_is_a_400_everywhere(live_server):
    patient = deep_patient_text(800)
    seed = '{"resourceType":"Bundle","type":"collection","entry":[{"resource":' + patient + "}]}"
    transaction = (
        '{"resourceType":"Bundle","type":"transaction","entry":[{"resource":'
        + patient
        + ',"request":{"method":"POST","url":"Patient"}}]}'
    )
    with httpx.Client(timeout=30) as http:
        seeded = http.post(f"{live_server.url}/sandbox", content=seed)
        assert seeded.status_code == 400, seeded.text
        assert "nested more than" in seeded.text
        created = http.post(f"{live_server.url}/sandbox")
        base = created.json()["base"]
        direct = http.post(f"{base}/Patient", content=patient)
        assert direct.status_code == 400, direct.text
        assert http.post(base, content=transaction).status_code == 400
        surrogate = http.post(
            f"{live_server.url}/sandbox",
            content=b'{"resourceType":"Bundle","type":"collection","entry":[{"resource":'
            b'{"resourceType":"Patient","name":[{"family":"\\udc00"}]}}]}',
        )
        assert surrogate.status_code == 400, surrogate.text
        shallow = nested_extension(5)
        ok = http.post(f"{base}/Patient", json={"resourceType": "Patient", "extension": [shallow]})
        assert ok.status_code == 201, ok.text


# ---- conditional matching through an index ------------------------------------------------


def _count_live_calls(monkeypatch) -> list[str]:
    """A spy on Store.live (it still runs): the index must spare the per-entry scans."""
    calls: list[str] = []
    real = Store.live

    def spy(self, resource_type):
        calls.append(resource_type)
        return real(self, resource_type)

    monkeypatch.setattr(Store, "live", spy)
    return calls


def test_if_none_exist_transaction_does_not_scan_per_entry(engine, monkeypatch):
    patients = [
        {"resourceType": "Patient", "id": f"p{i}", "identifier": [{"system": "urn:mrn", "value": str(i)}]}
        for i in range(300)
    ]
    sid = engine.create_sandbox(bundle(*patients))
    entries = [
        {
            "fullUrl": f"urn:uuid:00000000-0000-4000-8000-{i:012d}",
            "resource": {"resourceType": "Patient", "identifier": [{"system": "urn:mrn", "value": str(i)}]},
            "request": {"method": "POST", "url": "Patient", "ifNoneExist": f"identifier=urn:mrn|{i}"},
        }
        for i in range(250, 450)
    ]
    calls = _count_live_calls(monkeypatch)
    resp = post(engine, sid, "", {"resourceType": "Bundle", "type": "transaction", "entry": entries})
    assert resp.status == 200, resp.body
    statuses = [e["response"]["status"][:3] for e in resp.json()["entry"]]
    assert statuses == ["200"] * 50 + ["201"] * 150
    assert calls.count("Patient") <= 2, f"scanned Patient {calls.count('Patient')} times"


def test_index_follows_updates_and_deletes(engine):
    sid = engine.create_sandbox(
        bundle({"resourceType": "Patient", "id": "a", "identifier": [{"system": "urn:mrn", "value": "1"}]})
    )
    cond = {"If-None-Exist": "identifier=urn:mrn|1"}
    assert post(engine, sid, "Patient", {"resourceType": "Patient"}, cond).status == 200  # builds the index
    moved = {"resourceType": "Patient", "id": "a", "identifier": [{"system": "urn:mrn", "value": "2"}]}
    assert engine.handle(sid, "PUT", "Patient/a", body=json.dumps(moved).encode()).status == 200
    assert (
        post(engine, sid, "Patient", {"resourceType": "Patient"}, {"If-None-Exist": "identifier=urn:mrn|2"}).status
        == 200
    )
    made = post(
        engine, sid, "Patient", {"resourceType": "Patient", "identifier": [{"system": "urn:mrn", "value": "1"}]}, cond
    )
    assert made.status == 201
    assert post(engine, sid, "Patient", {"resourceType": "Patient"}, cond).status == 200
    assert engine.handle(sid, "DELETE", "Patient", "identifier=urn:mrn|2").status == 200
    assert post(engine, sid, "Patient", {"resourceType": "Patient"}, {"If-None-Exist": "identifier=2"}).status == 201
    twice = post(
        engine, sid, "Patient", {"resourceType": "Patient", "identifier": [{"system": "urn:other", "value": "1"}]}
    )
    assert twice.status == 201
    assert post(engine, sid, "Patient", {"resourceType": "Patient"}, {"If-None-Exist": "identifier=1"}).status == 412
    # the whole condition still applies to the index's candidates
    assert (
        post(
            engine, sid, "Patient", {"resourceType": "Patient"}, {"If-None-Exist": "identifier=urn:mrn|1&gender=male"}
        ).status
        == 201
    )


def test_transaction_copy_rebuilds_the_index_and_reset_forgets_writes(engine):
    sid = engine.create_sandbox(
        bundle({"resourceType": "Patient", "id": "a", "identifier": [{"system": "urn:mrn", "value": "1"}]})
    )
    tx = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "resource": {"resourceType": "Patient", "identifier": [{"system": "urn:mrn", "value": "9"}]},
                "request": {"method": "POST", "url": "Patient", "ifNoneExist": "identifier=urn:mrn|9"},
            }
        ],
    }
    assert post(engine, sid, "", tx).json()["entry"][0]["response"]["status"].startswith("201")
    assert post(engine, sid, "", tx).json()["entry"][0]["response"]["status"].startswith("200")
    engine.reset_sandbox(sid)
    assert post(engine, sid, "", tx).json()["entry"][0]["response"]["status"].startswith("201")


# ---- the request-time budget --------------------------------------------------------------


def ticking_engine(budget: float | None) -> FhirEngine:
    """An engine whose stopwatch advances one second each time it is read: budgets run out on cue."""
    ticks = itertools.count()
    return FhirEngine(request_budget_s=budget, timer=lambda: float(next(ticks)))


def test_transaction_over_budget_answers_503_and_changes_nothing():
    engine = ticking_engine(budget=20)
    sid = engine.create_sandbox(bundle({"resourceType": "Patient", "id": "keep"}))
    entries = [
        {"resource": {"resourceType": "Patient", "id": f"n{i}"}, "request": {"method": "PUT", "url": f"Patient/n{i}"}}
        for i in range(60)
    ]
    resp = post(engine, sid, "", {"resourceType": "Bundle", "type": "transaction", "entry": entries})
    assert resp.status == 503, resp.body
    body = resp.json()
    assert body["resourceType"] == "OperationOutcome" and body["issue"][0]["code"] == "timeout"
    assert [r["id"] for r in engine.resources(sid)] == ["keep"]
    small = post(engine, sid, "", {"resourceType": "Bundle", "type": "transaction", "entry": entries[:5]})
    assert small.status == 200, small.body
    assert len(engine.resources(sid)) == 6


def test_search_over_budget_answers_503_and_unlimited_finishes():
    patients = [{"resourceType": "Patient", "id": f"p{i}", "gender": "male"} for i in range(3000)]
    slow = ticking_engine(budget=5)
    sid = slow.create_sandbox(bundle(*patients))
    resp = slow.handle(sid, "GET", "Patient", "gender=female")
    assert resp.status == 503, resp.body
    unlimited = ticking_engine(budget=None)
    sid = unlimited.create_sandbox(bundle(*patients))
    resp = unlimited.handle(sid, "GET", "Patient", "gender=female")
    assert resp.status == 200 and resp.json()["total"] == 0


# ---- engine work off the event loop -------------------------------------------------------


class GatedClock:
    """A clock that, once armed, holds the first caller until released: a request that stays slow."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> datetime:
        if self.armed.is_set() and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(60), "the test never released the slow request"
        return datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.timeout(120)
def test_a_slow_request_does_not_stall_other_sandboxes():
    clock = GatedClock()
    engine = FhirEngine(clock=clock)
    fast = engine.create_sandbox(bundle({"resourceType": "Patient", "id": "f"}), "fast")
    engine.create_sandbox(sandbox_id="slow")
    with LiveServer(create_app(engine)) as server, httpx.Client(timeout=30) as http:
        done: list[int] = []

        def slow_write() -> None:
            with httpx.Client(timeout=90) as own:  # its own client: one client per thread
                done.append(
                    own.post(f"{server.url}/sandbox/slow/fhir/Patient", json={"resourceType": "Patient"}).status_code
                )

        clock.armed.set()
        writer = threading.Thread(target=slow_write)
        writer.start()
        assert clock.entered.wait(30), "the slow request never reached the engine"
        # the slow request holds its worker thread; the event loop must still serve the others
        read = http.get(f"{server.url}/sandbox/{fast}/fhir/Patient/f")
        listing = http.get(f"{server.url}/sandbox")
        finished_before_release = list(done)
        clock.release.set()
        writer.join(30)
    assert read.status_code == 200, read.text
    assert listing.status_code == 200
    assert finished_before_release == [], "the slow request finished early: the gate did not hold it"
    assert done == [201], f"slow request answered {done}"


def test_index_copies_are_isolated_from_failed_transactions_and_clones(engine):
    sid = engine.create_sandbox(
        bundle({"resourceType": "Patient", "id": "a", "identifier": [{"system": "urn:mrn", "value": "1"}]})
    )
    cond = {"If-None-Exist": "identifier=urn:mrn|9"}
    assert (
        post(engine, sid, "Patient", {"resourceType": "Patient"}, {"If-None-Exist": "identifier=urn:mrn|1"}).status
        == 200
    )
    failing = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "resource": {"resourceType": "Patient", "identifier": [{"system": "urn:mrn", "value": "9"}]},
                "request": {"method": "POST", "url": "Patient"},
            },
            {
                "resource": {"resourceType": "Patient", "id": "a", "gender": "sometimes"},
                "request": {"method": "PUT", "url": "Patient/a"},
            },
        ],
    }
    assert post(engine, sid, "", failing).status == 422
    # the failed transaction's copy saw identifier 9; the sandbox's own index must not
    assert (
        post(
            engine,
            sid,
            "Patient",
            {"resourceType": "Patient", "identifier": [{"system": "urn:mrn", "value": "9"}]},
            cond,
        ).status
        == 201
    )
    clone = engine.clone_sandbox(sid)
    assert engine.handle(clone, "DELETE", "Patient", "identifier=urn:mrn|9").status == 200
    assert post(engine, clone, "Patient", {"resourceType": "Patient"}, cond).status == 201
    assert post(engine, sid, "Patient", {"resourceType": "Patient"}, cond).status == 200, "clone's delete leaked"
    assert (
        post(engine, sid, "Patient", {"resourceType": "Patient"}, {"If-None-Exist": "identifier=urn:mrn|1"}).status
        == 200
    )
