"""The proxy's faults as units: a lost create is acknowledged as the server would acknowledge it, and a
``lose`` on any other write is refused in one line (recorded runs: tests/judge/test_readback.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from mitmproxy import http
from mitmproxy.test import tflow, tutils

from fae.proxy.addon import EXCHANGE_KEY, ROUTE_KEY
from fae.proxy.exchange import Exchange
from fae.proxy.faults import After, FaultAddon, FaultBook, acknowledgement
from fae.proxy.routes import Route, Upstream
from fae.tasks.scenario_files import Fault

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _request(method: str, path: str, body: bytes, **headers: str):
    request = tutils.treq(method=method.encode(), path=path.encode(), content=body)
    for name, value in headers.items():
        request.headers[name.replace("_", "-")] = value
    return request


def test_the_proxy_acknowledges_a_lost_create_as_the_server_would():
    body = b'{"resourceType": "Patient", "id": "mine", "meta": {"versionId": "7", "tag": [{"code": "t"}]}}'
    request = _request(
        "POST",
        "/sandbox/s1/fhir/Patient",
        body,
        x_forwarded_host="proxy:9",
        x_forwarded_proto="http",
        x_forwarded_prefix="/run/r1/agent/fhir",
    )
    reply = acknowledgement(request, NOW)
    assert not isinstance(reply, str) and reply.status_code == 201
    stored = reply.json()
    assert stored["id"] != "mine" and stored["meta"]["versionId"] == "1" and stored["meta"]["tag"] == [{"code": "t"}]
    assert stored["meta"]["lastUpdated"] == "2025-01-01T00:00:00.000Z"
    assert (
        reply.headers["location"]
        == f"http://proxy:9/run/r1/agent/fhir/sandbox/s1/fhir/Patient/{stored['id']}/_history/1"
    )
    minimal = acknowledgement(_request("POST", "/fhir/Patient", body, prefer="return=minimal"), NOW)
    assert not isinstance(minimal, str) and minimal.content == b""
    assert minimal.headers["location"].startswith("Patient/") and minimal.headers["location"].endswith("/_history/1")


@pytest.mark.parametrize(
    ("method", "path", "body", "reason"),
    [
        ("PUT", "/fhir/Patient/p1", b'{"resourceType": "Patient"}', "lose applies to a create"),
        ("POST", "/fhir", b'{"resourceType": "Bundle"}', "lose applies to a create"),
        ("POST", "/fhir/Patient", b'{"resourceType": "Person"}', "the body is not a Patient"),
        ("POST", "/fhir/Patient", b"not json", "lose applies to a create"),
    ],
)
def test_a_lose_fault_on_anything_but_a_create_is_refused_in_one_line(method, path, body, reason):
    found = acknowledgement(_request(method, path, body), NOW)
    assert isinstance(found, str) and reason in found and "\n" not in found


def _armed_flow(method: str, path: str, body: bytes):
    """An agent's FHIR write as the recording addon hands it on (route and exchange set), in an armed run."""
    flow = tflow.tflow(req=_request(method, path, body))
    flow.response = None
    flow.metadata[ROUTE_KEY] = Route("r1", "agent", Upstream("fhir", "http://127.0.0.1:9", "fhir"), path)
    flow.metadata[EXCHANGE_KEY] = Exchange("x", "r1", "agent", "fhir", "fhir", method, path, path, [], body, 0.0, 0)
    return flow


def test_the_addon_answers_a_lost_create_itself_and_names_the_fault():
    book = FaultBook()
    book.arm("r1", [Fault(1, lose=True)])
    addon = FaultAddon(book)
    flow = _armed_flow("POST", "/fhir/Patient", b'{"resourceType": "Patient"}')
    asyncio.run(addon.request(flow))
    assert flow.response is not None and flow.response.status_code == 201  # the server is never asked
    assert "never passed to the server" in flow.metadata[EXCHANGE_KEY].fault
    # the run's second write is not faulted; a lose on an update is refused with a 500 naming why
    second = _armed_flow("PUT", "/fhir/Patient/p1", b'{"resourceType": "Patient", "id": "p1"}')
    asyncio.run(addon.request(second))
    assert second.response is None
    book.arm("r1", [Fault(1, lose=True)])
    refused = _armed_flow("PUT", "/fhir/Patient/p1", b'{"resourceType": "Patient", "id": "p1"}')
    asyncio.run(addon.request(refused))
    assert refused.response is not None and refused.response.status_code == 500
    assert b"lose applies to a create" in refused.response.content


def test_a_fault_named_by_method_and_resource_touches_that_kind_of_write_whatever_came_before():
    """``write: 2, method: POST, resource: Patient`` is the agent's 2nd POST Patient, not its 2nd write."""
    book = FaultBook()
    book.arm("r1", [Fault(2, method="POST", resource="Patient", drop_reply=True), Fault(1, resource="Encounter")])
    writes = [
        ("POST", "/sandbox/s1/fhir/Patient"),  # 1st POST Patient
        ("PUT", "/sandbox/s1/fhir/Patient/p1"),  # a Patient write, not a POST
        ("POST", "/sandbox/s1/fhir/Encounter"),  # 1st Encounter write
        ("POST", "/sandbox/s1/fhir/Patient"),  # 2nd POST Patient, the run's 4th write
        ("POST", "/sandbox/s1/fhir/Patient"),  # 3rd
    ]
    hit = [book.next_write("r1", method, path.split("/")[4]) for method, path in writes]
    assert [[f.resource for f in faults] for faults in hit] == [[], [], ["Encounter"], ["Patient"], []]
    assert book.next_write("r2", "POST", "Patient") == []  # an unarmed run is never faulted
    addon = FaultAddon(book)
    book.arm("r1", [Fault(1, method="PUT", resource="Patient", drop_reply=True)])
    post = _armed_flow("POST", "/fhir/Patient", b'{"resourceType": "Patient"}')
    asyncio.run(addon.request(post))
    assert post.metadata[EXCHANGE_KEY].fault is None
    put = _armed_flow("PUT", "/fhir/Patient/p1", b'{"resourceType": "Patient", "id": "p1"}')
    asyncio.run(addon.request(put))
    assert put.metadata[EXCHANGE_KEY].fault.startswith("write 1 PUT Patient: reply dropped")


def test_the_world_is_played_after_the_write_it_names_and_before_that_write_s_reply():
    """``after: 2, method: PUT, resource: Patient``: the agent's 2nd PUT Patient, whatever came between; the reply
    goes on only once the world's steps are done."""
    book = FaultBook()
    played: list[tuple[str, str, str | None]] = []

    def then(tag: str):
        async def play(record):
            played.append((tag, record["method"], record["id"]))

        return play

    book.arm("r1", [], [After(2, then("second PUT Patient"), "PUT", "Patient"), After(1, then("first write"))])
    writes = [("POST", "Patient"), ("PUT", "Encounter"), ("PUT", "Patient"), ("PUT", "Patient")]
    due = []
    for method, kind in writes:
        book.next_write("r1", method, kind)
        due.append(len(book.after_this("r1")))
    assert due == [1, 0, 0, 1]
    addon = FaultAddon(book)
    book.arm("r1", [], [After(1, then("after the PUT"), "PUT", "Patient")])
    put = _armed_flow("PUT", "/fhir/Patient/p7", b'{"resourceType": "Patient", "id": "p7"}')
    asyncio.run(addon.request(put))
    put.response = http.Response.make(200, b'{"resourceType": "Patient", "id": "p7"}')
    asyncio.run(addon.response(put))
    assert played == [("after the PUT", "PUT", "p7")]
