"""The FHIR tool functions against a FHIR stand-in on real HTTP (see fhir_standin.py for why a stand-in)."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fhir_standin import ADVERTISED_ORIGIN, closed_port

from fae.mcp import fhir_tools
from fae.mcp.fhir_tools import search_params

pytestmark = pytest.mark.anyio


@pytest.fixture
def base(standin) -> str:
    """A fresh store on the stand-in for each test."""
    origin, _ = standin
    return f"{origin}/t/{uuid.uuid4().hex[:8]}/fhir"


async def test_create_read_update_delete(base):
    async with httpx.AsyncClient(base_url=base) as client:
        created = await fhir_tools.createResource(client, "Patient", '{"name": [{"family": "Ng"}]}')
        assert created["resourceType"] == "Patient" and created["meta"]["versionId"] == "1"
        read = await fhir_tools.getResourceById(client, "Patient", created["id"])
        assert read == created
        updated = await fhir_tools.updateResource(
            client,
            "Patient",
            created["id"],
            {"resourceType": "Observation", "id": "other", "gender": "female"},
            ifMatchVersion="1",
        )
        # id and resourceType are forced from the arguments, whatever the body said.
        assert (updated["resourceType"], updated["id"], updated["gender"]) == (
            "Patient",
            created["id"],
            "female",
        )
        assert updated["meta"]["versionId"] == "2"
        deleted = await fhir_tools.deleteResource(client, "Patient", created["id"])
        assert deleted == {
            "deleted": True,
            "resourceType": "Patient",
            "id": created["id"],
            "status": 204,
        }
        gone = await fhir_tools.getResourceById(client, "Patient", created["id"])
        assert gone["error"] == "OPERATION_OUTCOME" and gone["status"] == 410


async def test_conditional_create_returns_the_match(base, standin):
    _, fhir = standin
    identifier = {"system": "http://x", "value": "42"}
    async with httpx.AsyncClient(base_url=base) as client:
        first = await fhir_tools.createResource(client, "Patient", {"identifier": [identifier]})
        again = await fhir_tools.createResource(
            client, "Patient", {"identifier": [identifier]}, ifNoneExist="identifier=http://x|42"
        )
    assert again["id"] == first["id"]
    assert fhir.requests[-1]["headers"]["if-none-exist"] == "identifier=http://x|42"


async def test_operation_outcome_comes_back_as_data(base):
    async with httpx.AsyncClient(base_url=base) as client:
        bad = await fhir_tools.createResource(client, "Patient", {"gender": "robot"})
        missing = await fhir_tools.getResourceById(client, "Patient", "nope")
        stale = await fhir_tools.updateResource(client, "Patient", "nope2", {}, ifMatchVersion='W/"7"')
    assert bad["error"] == "OPERATION_OUTCOME"
    assert bad["status"] == 422 and bad["method"] == "POST" and bad["url"] == f"{base}/Patient"
    assert bad["issue_codes"] == ["code-invalid"] and bad["issue_count"] == 1
    assert bad["first_expression"] == "Patient.gender"
    assert "robot" in bad["diagnostics"]
    assert bad["operationOutcome"]["resourceType"] == "OperationOutcome"
    assert (missing["status"], missing["issue_codes"]) == (404, ["not-found"])
    assert stale["status"] == 412 and "7" in stale["diagnostics"]


async def test_non_fhir_error_page_comes_back_as_http_error(base):
    async with httpx.AsyncClient(base_url=base) as client:
        broken = await fhir_tools.searchResources(client, "Basic")
    assert broken["error"] == "HTTP_ERROR" and broken["status"] == 500
    assert "Internal explosion" in broken["body_excerpt"]
    assert broken["issue_count"] == 0 and "operationOutcome" not in broken


async def test_server_down_comes_back_as_data():
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{closed_port()}/fhir") as client:
        down = await fhir_tools.getResourceById(client, "Patient", "1")
        search = await fhir_tools.searchResources(client, "Patient", {"family": "x"})
    assert down["error"] == "CONNECTION_ERROR" and down["method"] == "GET"
    assert down["url"].endswith("/fhir/Patient/1")
    assert search["error"] == "CONNECTION_ERROR" and "family=x" in search["url"]


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda c: fhir_tools.createResource(c, "Patient", "{not json"), "body_json"),
        (lambda c: fhir_tools.createResource(c, "Patient", "[1, 2]"), "body_json"),
        (lambda c: fhir_tools.updateResource(c, "Patient", "1", "nope"), "body_json"),
        (lambda c: fhir_tools.searchResources(c, "Patient", "{oops"), "params_json"),
        (lambda c: fhir_tools.searchResources(c, "Patient", {"code": {"a": 1}}), "params_json"),
        (lambda c: fhir_tools.searchResources(c, "Patient", page_limit=0), "page_limit"),
        (lambda c: fhir_tools.getResourceById(c, "Patient", "Patient/1"), "resourceId"),
        (lambda c: fhir_tools.deleteResource(c, "patient", "1"), "resourceType"),
    ],
)
async def test_bad_arguments_come_back_as_data_without_a_request(base, standin, call, argument):
    _, fhir = standin
    seen = len(fhir.requests)
    async with httpx.AsyncClient(base_url=base) as client:
        result = await call(client)
    assert result["error"] == "INVALID_ARGUMENT" and result["argument"] == argument
    assert result["diagnostics"]
    assert len(fhir.requests) == seen


async def test_search_follows_absolute_next_links_up_to_the_limit(base, standin):
    _, fhir = standin
    async with httpx.AsyncClient(base_url=base) as client:
        for family in ["A", "B", "C", "D", "E"]:
            await fhir_tools.createResource(client, "Patient", {"name": [{"family": family}]})
        everything = await fhir_tools.searchResources(client, "Patient", {"count": 2})
        limited = await fhir_tools.searchResources(client, "Patient", {"count": 2}, page_limit=2)
        first_only = await fhir_tools.searchResources(client, "Patient", {"count": 2}, all_pages=False)

    def families(bundle):
        return [e["resource"]["name"][0]["family"] for e in bundle["entry"]]

    assert families(everything) == ["A", "B", "C", "D", "E"]
    assert [link["relation"] for link in everything["link"]] == ["self"]
    assert families(limited) == ["A", "B", "C", "D"]
    # The limit cut the search short: the Bundle keeps a next link to say so.
    assert [link["relation"] for link in limited["link"]] == ["self", "next"]
    assert families(first_only) == ["A", "B"]
    # Pages 2 and 3 were asked of the stand-in through the client's base, not the advertised host.
    pages = [dict(r["query"]).get("_page") for r in fhir.requests if r["prefix"] in base and r["method"] == "GET"]
    assert pages[:3] == [None, "2", "3"]


async def test_search_parameter_names_and_lists(base, standin):
    _, fhir = standin
    async with httpx.AsyncClient(base_url=base) as client:
        await fhir_tools.searchResources(
            client,
            "Observation",
            '{"count": 5, "include": ["Observation:subject", "Observation:performer"], '
            '"date": ["ge2024-01-01", "lt2024-02-01"], "summary": false, "code": null}',
            all_pages=False,
        )
    assert fhir.requests[-1]["query"] == [
        ("_count", "5"),
        ("_include", "Observation:subject"),
        ("_include", "Observation:performer"),
        ("date", "ge2024-01-01"),
        ("date", "lt2024-02-01"),
        ("_summary", "false"),
    ]


async def test_list_resource_types(base):
    async with httpx.AsyncClient(base_url=base) as client:
        listed = await fhir_tools.listResourceTypes(client)
    assert listed == {"resourceTypes": ["Observation", "Patient"], "fhirVersion": "4.0.1"}


def test_search_params_accepts_empty():
    assert search_params(None) == [] and search_params("") == [] and search_params({}) == []


def test_standin_links_are_unreachable_on_purpose():
    # The paging test proves rewriting only if the advertised origin cannot be reached as is.
    assert httpx.URL(ADVERTISED_ORIGIN).host.endswith(".invalid")
