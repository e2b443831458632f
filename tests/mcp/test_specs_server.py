"""The FHIR R4 specs MCP server: lookups found, not found, case-insensitive, filtered; over real HTTP and stdio."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from fhir_standin import serve
from mcp import StdioServerParameters

from fae.agents.mcp_client import McpToolbox
from fae.fhir.spec import load_spec
from fae.mcp import specs_server as specs
from fae.mcp.specs_server import specs_mcp_http_app

SPEC = load_spec()


def test_list_resources_is_every_r4_resource_type():
    listed = specs.list_resources(SPEC)
    assert listed["fhir_version"] == "4.0.1"
    assert listed["count"] == len(listed["resources"]) == len(SPEC.resource_types)
    assert {"Patient", "Appointment", "Slot", "Coverage", "FamilyMemberHistory"} <= set(listed["resources"])
    assert listed["resources"] == sorted(listed["resources"])
    assert "HumanName" not in listed["resources"]


@pytest.mark.parametrize("asked", ["Appointment", "appointment", "APPOINTMENT", "  appointment "])
def test_structure_definition_matches_names_ignoring_case(asked):
    found = specs.structure_definition(SPEC, asked)
    assert found["resourceType"] == "Appointment"
    assert found["kind"] == "resource"
    assert found["elementCount"] == len(found["elements"]) > 20
    status = next(e for e in found["elements"] if e["path"] == "Appointment.status")
    assert status["min"] == 1 and status["max"] == "1" and status["types"] == ["code"]
    assert status["binding"]["strength"] == "required"
    assert {"booked", "cancelled", "waitlist"} <= set(status["binding"]["codes"])


def test_structure_definition_shows_reference_targets_and_leaves_codes_off_loose_bindings():
    found = specs.structure_definition(SPEC, "Coverage")
    by_path = {e["path"]: e for e in found["elements"]}
    assert by_path["Coverage.beneficiary"]["types"] == ["Reference"]
    assert "Patient" in str(by_path["Coverage.beneficiary"]["targetProfiles"])
    language = by_path["Coverage.language"]["binding"]
    assert language["strength"] != "required" and "codes" not in language


def test_unknown_resource_type_is_a_not_found_result_with_suggestions():
    missing = specs.structure_definition(SPEC, "Patinet")
    assert missing["error"] == "NOT_FOUND"
    assert "Patinet" in missing["diagnostics"]
    assert "Patient" in missing["suggestions"]


def test_a_datatype_asked_as_a_resource_points_to_the_other_tool():
    missing = specs.structure_definition(SPEC, "humanname")
    assert missing["error"] == "NOT_FOUND"
    assert "getDataTypeDefinition" in missing["diagnostics"]
    assert missing["suggestions"] == ["HumanName"]
    backwards = specs.datatype_definition(SPEC, "patient")
    assert backwards["error"] == "NOT_FOUND" and "getStructureDefinition" in backwards["diagnostics"]


@pytest.mark.parametrize(("asked", "kind"), [("humanname", "complex-type"), ("DATETIME", "primitive-type")])
def test_datatype_definition_found_ignoring_case(asked, kind):
    found = specs.datatype_definition(SPEC, asked)
    assert found["dataType"].casefold() == asked.casefold()
    assert found["typeKind"] == kind
    assert found["elementCount"] == len(found["elements"]) >= 1
    if kind == "primitive-type":
        assert found["regex"].startswith("([0-9]")
    else:
        assert "HumanName.family" in {e["path"] for e in found["elements"]}


def test_unknown_datatype_is_not_found():
    missing = specs.datatype_definition(SPEC, "NoSuchType")
    assert missing["error"] == "NOT_FOUND" and "HumanName" in missing["diagnostics"]


def test_search_params_of_a_resource_include_the_common_ones():
    found = specs.search_params(SPEC, "patient")
    codes = {p["code"] for p in found["searchParams"]}
    assert found["resourceType"] == "Patient" and found["count"] == len(codes)
    assert {"birthdate", "family", "given", "identifier", "_id", "_lastUpdated"} <= codes


def test_search_params_filter_by_code_ignoring_case_and_trim_shared_definitions():
    found = specs.search_params(SPEC, "Patient", code="BIRTHDATE")
    assert found["count"] == 1
    (param,) = found["searchParams"]
    assert param["code"] == "birthdate" and param["type"] == "date"
    # The definition is shared with Person and RelatedPerson; only Patient's part is shown.
    assert param["expression"] == "Patient.birthDate"
    assert "Person" not in param["description"]


def test_search_params_filter_by_type():
    found = specs.search_params(SPEC, "Slot", search_type="DATE")
    assert found["count"] >= 1
    assert {p["type"] for p in found["searchParams"]} == {"date"}
    assert "start" in {p["code"] for p in found["searchParams"]}
    references = specs.search_params(SPEC, "Slot", search_type="reference")
    schedule = next(p for p in references["searchParams"] if p["code"] == "schedule")
    assert schedule["targets"] == ["Schedule"]


def test_search_params_filters_combine_and_can_find_nothing():
    assert specs.search_params(SPEC, "Slot", code="start", search_type="token")["count"] == 0
    assert specs.search_params(SPEC, "Slot", code="start", search_type="date")["count"] == 1


def test_search_params_not_found_cases():
    no_code = specs.search_params(SPEC, "Slot", code="nope")
    assert no_code["error"] == "NOT_FOUND" and "start" in no_code["diagnostics"]
    assert specs.search_params(SPEC, "Slott")["error"] == "NOT_FOUND"
    bad_type = specs.search_params(SPEC, "Slot", search_type="colour")
    assert bad_type["error"] == "INVALID_SEARCH_TYPE" and "token" in bad_type["suggestions"]


@pytest.fixture(scope="module")
def specs_url() -> Iterator[str]:
    with serve(specs_mcp_http_app()) as origin:
        yield f"{origin}/mcp"


@pytest.mark.anyio
async def test_tools_over_streamable_http(specs_url):
    async with McpToolbox(specs_url) as box:
        names = {tool.name for tool in await box.list_tools()}
        assert names == {"listResources", "getStructureDefinition", "getSearchParams", "getDataTypeDefinition"}
        listed = await box.call_tool("listResources", {})
        found = await box.call_tool("getSearchParams", {"resourceType": "slot", "code": "Start"})
        missing = await box.call_tool("getStructureDefinition", {"resourceType": "Nope"})
        datatype = await box.call_tool("getDataTypeDefinition", {"dataType": "period"})
    assert not listed.is_error and "Patient" in listed.result["resources"]
    assert not found.is_error and found.result["searchParams"][0]["code"] == "start"
    assert missing.is_error and missing.result["error"] == "NOT_FOUND"
    assert not datatype.is_error and datatype.result["dataType"] == "Period"


@pytest.mark.anyio
async def test_tools_over_stdio():
    params = StdioServerParameters(command=sys.executable, args=["-m", "fae.mcp", "specs"])
    async with McpToolbox.stdio(params) as box:
        found = await box.call_tool("getStructureDefinition", {"resourceType": "patient"})
    assert found.result["resourceType"] == "Patient"
