"""docker-compose.yml: no Docker engine runs here, so parse it and check what users rely on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


@pytest.mark.parametrize("name", ["hapi", "medplum", "postgres", "redis"])
def test_service_pinned_with_healthcheck(name):
    service = SERVICES[name]
    image = service["image"]
    assert re.search(r":v?\d+\.\d+(\.\d+)?$", image), f"{name} image {image} is not pinned"
    assert service["healthcheck"]["test"], f"{name} has no health check"


@pytest.mark.parametrize(
    ("name", "host_port", "probe"), [("hapi", "8090", "/fhir/metadata"), ("medplum", "8103", "/healthcheck")]
)
def test_fhir_servers_publish_ports_and_probe_fhir(name, host_port, probe):
    service = SERVICES[name]
    published = [p.split(":")[0] for p in service["ports"]]
    assert host_port in published
    assert probe in " ".join(service["healthcheck"]["test"])


def test_medplum_has_its_stores_and_saves_audit_events():
    medplum = SERVICES["medplum"]
    for dep in ("postgres", "redis"):
        assert medplum["depends_on"][dep]["condition"] == "service_healthy"
    env = medplum["environment"]
    assert env["MEDPLUM_SAVE_AUDIT_EVENTS"] == "true"
    assert env["MEDPLUM_DATABASE_HOST"] == "postgres" and env["MEDPLUM_REDIS_HOST"] == "redis"
    assert env["MEDPLUM_DATABASE_PASSWORD"] == SERVICES["postgres"]["environment"]["POSTGRES_PASSWORD"]


def test_hapi_is_r4():
    assert SERVICES["hapi"]["environment"]["hapi.fhir.fhir_version"] == "R4"
