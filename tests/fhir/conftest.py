"""Fixtures: an engine, the ASGI app, a real uvicorn server on 127.0.0.1 and conformance targets."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn

from fae.fhir.app import create_app
from fae.fhir.engine import FhirEngine

REPO = Path(__file__).resolve().parents[2]
MEDPLUM_DIR = REPO / "conformance" / "medplum"


class LiveServer:
    """uvicorn serving an app on an ephemeral 127.0.0.1 port, in a background thread."""

    def __init__(self, app) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    with LiveServer(create_app(FhirEngine())) as server:
        yield server


@pytest.fixture()
def engine() -> FhirEngine:
    return FhirEngine()


@dataclass
class Target:
    """A FHIR server the conformance suite runs against, and what it is known not to do."""

    name: str
    base: str
    client: httpx.Client
    lacks: set[str] = field(default_factory=set)

    def skip_unless(self, feature: str) -> None:
        if feature in self.lacks:
            pytest.skip(f"{self.name} does not support {feature} (see docs/fhir.md)")


# What Medplum's in-memory router does differently; docs/fhir.md lists the same items.
# FAE_MEDPLUM_PROBE=1 runs every check against it, to re-derive this set.
MEDPLUM_LACKS = {
    "metadata",
    "paging-links",
    "type-history",
    "_has",
    "validation",
    "410-gone",
    "strict-handling",
    "prefer-return",
    "xml-415",
    "update-id-check",
    "create-ignores-id",
    "update-create-201",
    "accent-insensitive",
    "summary-validation",
    "atomic-transactions",
    "string-starts-with",
}


def _medplum_available() -> bool:
    return shutil.which("node") is not None and (MEDPLUM_DIR / "node_modules" / "@medplum" / "fhir-router").is_dir()


@pytest.fixture(scope="session")
def medplum_base() -> Iterator[str]:
    if not _medplum_available():
        pytest.skip("node or the Medplum package is not installed (run bash .ci/medplum.sh)")
    proc = subprocess.Popen(
        ["node", *(_node_flags()), str(MEDPLUM_DIR / "server.mjs"), "0"],
        cwd=MEDPLUM_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("listening "):
            err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
            pytest.skip(f"Medplum script did not start: {line.strip()} {err.strip()[:300]}")
        yield line.split()[1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def _node_flags() -> list[str]:
    major = int(
        subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip().lstrip("v").split(".")[0]
    )
    return ["--experimental-websocket"] if major < 22 else []


TARGETS = ["embedded"]
if os.environ.get("FAE_FHIR_CONFORMANCE_URL"):
    TARGETS.append("external")
TARGETS.append("medplum")


@pytest.fixture(params=TARGETS)
def target(request, live_server: LiveServer) -> Iterator[Target]:
    kind = request.param
    if kind == "embedded":
        with httpx.Client(timeout=30) as client:
            sid = "conf-" + uuid.uuid4().hex[:12]
            created = client.post(f"{live_server.url}/sandbox", params={"id": sid})
            assert created.status_code == 201
            yield Target("embedded", created.json()["base"], client)
            client.delete(f"{live_server.url}/sandbox/{sid}")
    elif kind == "external":
        with httpx.Client(timeout=60) as client:
            yield Target("external", os.environ["FAE_FHIR_CONFORMANCE_URL"].rstrip("/"), client)
    else:
        base = request.getfixturevalue("medplum_base")
        with httpx.Client(timeout=30) as client:
            lacks = set() if os.environ.get("FAE_MEDPLUM_PROBE") else set(MEDPLUM_LACKS)
            yield Target("medplum", base, client, lacks)
