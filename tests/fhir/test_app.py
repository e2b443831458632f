"""The ASGI app over real HTTP: sandbox admin endpoints, per-sandbox bases, and the CLI."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import httpx
from typer.testing import CliRunner

from fae.cli.fhir import app as cli_app
from fae.fhir.wire import MAX_BODY

SEED = {
    "resourceType": "Bundle",
    "type": "collection",
    "entry": [
        {"resource": {"resourceType": "Patient", "id": f"p{i}", "name": [{"family": "Seeded"}]}} for i in range(3)
    ],
}


def test_sandbox_lifecycle_over_http(live_server):
    base = live_server.url
    with httpx.Client(timeout=10) as http:
        made = http.post(f"{base}/sandbox", params={"id": "life"}, json=SEED)
        assert made.status_code == 201
        fhir = made.json()["base"]
        assert fhir == f"{base}/sandbox/life/fhir"
        assert http.get(f"{fhir}/Patient").json()["total"] == 3
        assert http.post(f"{base}/sandbox", params={"id": "life"}).status_code == 409
        http.delete(f"{fhir}/Patient/p0")
        other = http.post(f"{base}/sandbox/life/$clone", params={"id": "life2"})
        assert other.status_code == 201
        assert http.get(f"{other.json()['base']}/Patient").json()["total"] == 2
        assert http.post(f"{base}/sandbox/life/$reset").status_code == 200
        assert http.get(f"{fhir}/Patient").json()["total"] == 3
        assert http.get(f"{other.json()['base']}/Patient").json()["total"] == 2
        assert "life" in http.get(f"{base}/sandbox").json()["sandboxes"]
        assert http.delete(f"{base}/sandbox/life").status_code == 204
        assert http.get(f"{fhir}/Patient").status_code == 404
        assert http.post(f"{base}/sandbox/nope/$reset").status_code == 404
        assert http.post(f"{base}/sandbox", content=b"{oops").status_code == 400
        for not_an_object in (b"[]", b'"Bundle"', b"3", b"true"):
            refused = http.post(f"{base}/sandbox", content=not_an_object)
            assert refused.status_code == 400 and "a seed must be a FHIR Bundle" in refused.text, refused.text
        blank = http.post(f"{base}/sandbox", params={"id": "blank"}, content=b"null")  # JSON null: no seed
        assert blank.status_code == 201, blank.text
        assert http.get(f"{blank.json()['base']}/Patient").json()["total"] == 0
        bad_seed = {"resourceType": "Bundle", "entry": [{"resource": {"resourceType": "Patient", "x": 1}}]}
        assert http.post(f"{base}/sandbox", json=bad_seed).status_code == 400


def test_default_sandbox_and_links_are_absolute(live_server):
    with httpx.Client(timeout=10) as http:
        created = http.post(f"{live_server.url}/fhir/Patient", json={"resourceType": "Patient"})
        assert created.status_code == 201
        assert created.headers["location"].startswith(f"{live_server.url}/fhir/Patient/")
        assert created.headers["content-type"].startswith("application/fhir+json")
        bundle = http.get(f"{live_server.url}/fhir/Patient", params={"_count": 1}).json()
        assert bundle["link"][0]["url"].startswith(f"{live_server.url}/fhir/Patient?")
        head = http.head(f"{live_server.url}/fhir/metadata")
        assert head.status_code == 200 and head.content == b""
        big = http.post(f"{live_server.url}/fhir/Patient", content=b"x" * (MAX_BODY + 1))
        assert big.status_code == 413
        assert http.get(f"{live_server.url}/fhir/Patient/p0").status_code in (404, 410)


def test_cli_refuses_bad_seed_in_one_line(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(cli_app, ["serve", "--seed", str(tmp_path / "none.json")])
    assert missing.exit_code == 1
    assert "cannot read seed" in missing.output and "Traceback" not in missing.output
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"resourceType": "Bundle", "entry": [{"resource": {"resourceType": "Patient", "gender": "x"}}]})
    )
    invalid = runner.invoke(cli_app, ["serve", "--seed", str(bad)])
    assert invalid.exit_code == 1 and "Patient.gender" in invalid.output
    assert len(invalid.output.strip().splitlines()) == 1
    helped = runner.invoke(cli_app, ["serve", "--help"])
    assert helped.exit_code == 0 and "--audit-events" in helped.output


def test_serve_refuses_a_taken_port_in_one_line():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        result = CliRunner().invoke(cli_app, ["serve", "--port", str(port)])
    finally:
        taken.close()
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "already in use" in lines[0], result.output
    assert "Traceback" not in result.output and "Errno" not in result.output


def test_serve_prints_its_base_url_and_serves_there():
    proc = subprocess.Popen(
        [sys.executable, "-m", "fae.cli", "fhir", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        stderr = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
        assert "http://127.0.0.1:" in line, f"first line {line!r}; stderr: {stderr}"
        base = line.split()[line.split().index("at") + 1]
        assert base.endswith("/fhir")
        with httpx.Client(timeout=30) as http:
            assert http.get(f"{base}/metadata").json()["resourceType"] == "CapabilityStatement"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
