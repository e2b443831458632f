"""Links a FHIR server writes (Location, fullUrl, paging) lead back through the recording proxy."""

from __future__ import annotations

import anyio
import httpx

from fae.harness.stack import open_stack, sandbox_id
from fae.store.log import EventLog

SEED = {
    "resourceType": "Bundle",
    "type": "transaction",
    "entry": [
        {"resource": {"resourceType": "Patient", "id": f"p{i}"}, "request": {"method": "PUT", "url": f"Patient/p{i}"}}
        for i in range(5)
    ],
}


def test_a_client_following_links_stays_recorded(tmp_path):
    log = tmp_path / "links.duckdb"

    async def main():
        async with open_stack(log) as stack, httpx.AsyncClient() as client:
            created = await client.post(stack.fhir_root("r1", "setup") + f"sandbox?id={sandbox_id('r1')}", json=SEED)
            assert created.json()["base"].startswith(stack.fhir_root("r1", "setup"))
            base = stack.fhir_base("r1", "agent") + "/"
            page = (await client.get(base + "Patient?_count=2")).json()
            assert all(e["fullUrl"].startswith(base) for e in page["entry"])
            pages = 1
            while nxt := [link["url"] for link in page["link"] if link["relation"] == "next"]:
                assert nxt[0].startswith(stack.fhir_root("r1", "agent"))
                page = (await client.get(nxt[0])).json()
                pages += 1
            assert pages == 3
            made = await client.post(base + "Patient", json={"resourceType": "Patient"})
            assert made.headers["location"].startswith(base + "Patient/")
            assert (await client.get(made.headers["location"])).status_code == 200

    anyio.run(main)
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT interaction FROM fhir_exchanges WHERE actor = 'agent' ORDER BY seq")
    assert [r[0] for r in rows] == ["search-type"] * 3 + ["create", "vread"]


def test_malformed_forwarded_headers_are_ignored():
    from fae.fhir.app import create_app
    from fae.fhir.engine import FhirEngine

    async def main():
        transport = httpx.ASGITransport(app=create_app(FhirEngine()))
        async with httpx.AsyncClient(transport=transport, base_url="http://inner") as client:
            bad = await client.post(
                "/sandbox?id=s",
                json=SEED,
                headers={"x-forwarded-host": "evil.example/<script>", "x-forwarded-prefix": "/a b"},
            )
            assert bad.json()["base"] == "http://inner/sandbox/s/fhir"
            good = await client.post(
                "/sandbox?id=t",
                json=SEED,
                headers={
                    "x-forwarded-host": "proxy:8080",
                    "x-forwarded-proto": "https",
                    "x-forwarded-prefix": "/run/r/agent/fhir",
                },
            )
            assert good.json()["base"] == "https://proxy:8080/run/r/agent/fhir/sandbox/t/fhir"

    anyio.run(main)


def test_state_capture_follows_every_page(tmp_path, monkeypatch):
    """A capture longer than one page reads every page through the proxy."""
    import fae.harness.run as run_module
    from fae.harness.run import capture_state

    monkeypatch.setattr(run_module, "CAPTURE_PAGE", 2)
    log = tmp_path / "pages.duckdb"

    async def main():
        async with open_stack(log) as stack, httpx.AsyncClient() as client:
            sid = sandbox_id("r1")
            await client.post(stack.fhir_root("r1", "setup") + f"sandbox?id={sid}", json=SEED)
            return await capture_state(stack, client, "r1")

    resources = anyio.run(main)
    assert sorted(r["id"] for r in resources) == [f"p{i}" for i in range(5)]
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT count(*) FROM fhir_exchanges WHERE actor = 'harness'")
    assert rows[0][0] == 3
