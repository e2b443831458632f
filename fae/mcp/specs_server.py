"""The FHIR R4 specs MCP server: resource and datatype definitions and search parameters, read-only.

It serves the same HL7 FHIR R4 (4.0.1) definitions the embedded FHIR server
runs on (``fae.fhir.spec``), so what an agent looks up is what the server
enforces. Names are matched without regard to case. A name that matches
nothing is an answer, not an exception: an object with ``error``, a
``diagnostics`` line and close names to try, flagged ``isError``.

The lookups are plain functions over a ``Spec`` (``list_resources``,
``structure_definition``, ``search_params``, ``datatype_definition``); the
MCP tools (``listResources``, ``getStructureDefinition``, ``getSearchParams``,
``getDataTypeDefinition``) wrap them.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from starlette.applications import Starlette

from fae.fhir.spec import Spec, load_spec
from fae.mcp.transports import http_app

SERVER_NAME = "fhir-specs"
SEARCH_TYPES = ("composite", "date", "number", "quantity", "reference", "special", "string", "token", "uri")
DATATYPE_KINDS = ("primitive-type", "complex-type")

Result = dict[str, Any]


def _by_folded_name(names: list[str], wanted: str) -> str | None:
    """The one name equal to ``wanted`` ignoring case (and surrounding blanks)."""
    folded = wanted.strip().casefold()
    return next((name for name in names if name.casefold() == folded), None)


def _not_found(kind: str, wanted: str, names: list[str], hint: str, elsewhere: str | None = None) -> Result:
    """A not-found answer; ``elsewhere`` is the same name found in the other kind of definition."""
    close = [elsewhere] if elsewhere else difflib.get_close_matches(wanted.strip(), names, n=5, cutoff=0.6)
    if not close:
        folded = {name.casefold(): name for name in names}
        close = [folded[f] for f in difflib.get_close_matches(wanted.strip().casefold(), list(folded), n=5)]
    return {
        "error": "NOT_FOUND",
        "diagnostics": f"FHIR R4 has no {kind} named {wanted!r}. {hint}",
        "suggestions": close,
    }


def _resource_names(spec: Spec) -> list[str]:
    return sorted(spec.resource_types)


def _datatype_names(spec: Spec) -> list[str]:
    structures = spec.raw["structures"]
    return sorted(name for name, s in structures.items() if s["kind"] in DATATYPE_KINDS)


def _element(spec: Spec, raw: dict[str, Any]) -> dict[str, Any]:
    """One element definition in the shape an agent reads: cardinality, types, binding, short text."""
    out: dict[str, Any] = {"path": raw["path"], "min": raw["min"], "max": raw["max"]}
    types = raw.get("types") or []
    if types:
        out["types"] = [t["code"] for t in types]
        targets = sorted({target for t in types for target in t.get("targets", ())})
        if targets:
            out["targetProfiles"] = targets
    if raw.get("contentReference"):
        out["contentReference"] = raw["contentReference"]
    binding = raw.get("binding")
    if binding:
        shown: dict[str, Any] = {"strength": binding.get("strength"), "valueSet": binding.get("valueSet")}
        codes = spec.value_set_codes(binding["valueSet"]) if binding.get("valueSet") else None
        if codes is not None and binding.get("strength") == "required":
            shown["codes"] = sorted(codes)
        out["binding"] = shown
    for flag in ("summary", "modifier"):
        if raw.get(flag):
            out[flag] = True
    if raw.get("short"):
        out["short"] = raw["short"]
    return out


def _definition(spec: Spec, name: str) -> dict[str, Any]:
    structure = spec.raw["structures"][name]
    elements = [_element(spec, e) for e in structure["elements"]]
    return {
        "fhir_version": spec.fhir_version,
        "source": spec.raw.get("source", ""),
        "url": f"http://hl7.org/fhir/StructureDefinition/{name}",
        "kind": structure["kind"],
        "base": structure.get("base"),
        "abstract": bool(structure.get("abstract")),
        "description": structure.get("description", ""),
        "elementCount": len(elements),
        "elements": elements,
    }


def list_resources(spec: Spec) -> Result:
    """Every FHIR R4 resource type, sorted."""
    names = _resource_names(spec)
    return {"fhir_version": spec.fhir_version, "count": len(names), "resources": names}


def structure_definition(spec: Spec, resource_type: str) -> Result:
    """A resource type's element definitions; the name is matched ignoring case."""
    names = _resource_names(spec)
    found = _by_folded_name(names, resource_type)
    if found is None:
        datatype = _by_folded_name(_datatype_names(spec), resource_type)
        hint = (
            f"{datatype} is a datatype: use getDataTypeDefinition."
            if datatype
            else "listResources gives every resource type."
        )
        return _not_found("resource type", resource_type, names, hint, datatype)
    return {"resourceType": found, **_definition(spec, found)}


def datatype_definition(spec: Spec, data_type: str) -> Result:
    """A datatype's element definitions (and a primitive's regex); the name is matched ignoring case."""
    names = _datatype_names(spec)
    found = _by_folded_name(names, data_type)
    if found is None:
        resource = _by_folded_name(_resource_names(spec), data_type)
        hint = (
            f"{resource} is a resource type: use getStructureDefinition."
            if resource
            else f"The datatypes are: {', '.join(names)}."
        )
        return _not_found("datatype", data_type, names, hint, resource)
    definition = _definition(spec, found)
    out: Result = {"dataType": found, "typeKind": definition.pop("kind"), **definition}
    regex = spec.primitive_regex(found)
    if regex:
        out["regex"] = regex
    return out


def _for_resource(text: str, resource_type: str) -> str:
    """A shared parameter's description cut to the line about ``resource_type`` where it has one."""
    if not text.startswith("Multiple Resources"):
        return text.strip()
    marker = f"[{resource_type}]("
    for line in text.splitlines():
        if marker in line:
            return line.split("):", 1)[-1].strip()
    return text.strip()


def _expression_for(expression: str | None, resource_type: str) -> str | None:
    """The parts of a shared FHIRPath expression that apply to ``resource_type``."""
    if not expression:
        return expression
    parts = [part.strip() for part in expression.split(" | ")]
    mine = [p for p in parts if p.lstrip("(").startswith(f"{resource_type}.")]
    return " | ".join(mine) if mine else expression


def search_params(spec: Spec, resource_type: str, code: str | None = None, search_type: str | None = None) -> Result:
    """The search parameters a resource type supports, optionally one ``code`` or one ``search_type``."""
    names = _resource_names(spec)
    found = _by_folded_name(names, resource_type)
    if found is None:
        return _not_found("resource type", resource_type, names, "listResources gives every resource type.")
    if search_type is not None and search_type.strip().casefold() not in SEARCH_TYPES:
        return {
            "error": "INVALID_SEARCH_TYPE",
            "diagnostics": f"{search_type!r} is not a FHIR search parameter type; "
            f"use one of {', '.join(SEARCH_TYPES)}.",
            "suggestions": list(SEARCH_TYPES),
        }
    params = spec.search_params(found)
    chosen = sorted(params.values(), key=lambda p: p.code)
    if code is not None:
        wanted = code.strip().casefold()
        chosen = [p for p in chosen if p.code.casefold() == wanted]
        if not chosen:
            codes = sorted(params)
            return _not_found(f"search parameter on {found}", code, codes, f"{found} supports: {', '.join(codes)}.")
    if search_type is not None:
        chosen = [p for p in chosen if p.type == search_type.strip().casefold()]
    rows = []
    for p in chosen:
        row: dict[str, Any] = {
            "code": p.code,
            "type": p.type,
            "expression": _expression_for(p.expression, found),
            "description": _for_resource(p.description, found),
            "url": p.url,
        }
        if p.targets:
            row["targets"] = list(p.targets)
        if p.components:
            row["components"] = [{"definition": d, "expression": e} for d, e in p.components]
        rows.append(row)
    return {"resourceType": found, "fhir_version": spec.fhir_version, "count": len(rows), "searchParams": rows}


def tool_result(result: Result) -> CallToolResult:
    """The MCP result of a lookup: JSON text plus structured content; a not-found is flagged isError."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
        is_error=isinstance(result.get("error"), str),
    )


def build_specs_mcp(spec: Spec | None = None) -> MCPServer:
    """An MCP server named ``fhir-specs`` answering from ``spec`` (default: the committed R4 data)."""
    loaded = spec if spec is not None else load_spec()

    def listResources() -> CallToolResult:
        """List every FHIR R4 resource type (e.g. Patient, Appointment, ServiceRequest).

        Returns {fhir_version, count, resources}.
        """
        return tool_result(list_resources(loaded))

    def getStructureDefinition(resourceType: str) -> CallToolResult:
        """The element definitions of one FHIR R4 resource type, e.g. getStructureDefinition("Coverage").

        Each element has path, min, max, types, targetProfiles (for references), binding
        (strength, valueSet and, for required bindings, the allowed codes) and a short text.
        The name is matched ignoring case; an unknown name returns {error: "NOT_FOUND",
        diagnostics, suggestions}.
        """
        return tool_result(structure_definition(loaded, resourceType))

    def getSearchParams(resourceType: str, code: str | None = None, search_type: str | None = None) -> CallToolResult:
        """The search parameters a FHIR R4 resource type supports, with type and FHIRPath expression.

        Optional filters: ``code`` (one parameter, e.g. "birthdate"; case-insensitive) and
        ``search_type`` (string, token, reference, date, number, quantity, uri, composite,
        special). Returns {resourceType, count, searchParams}; unknown names return an error object.
        """
        return tool_result(search_params(loaded, resourceType, code, search_type))

    def getDataTypeDefinition(dataType: str) -> CallToolResult:
        """The element definitions of one FHIR R4 datatype, e.g. "HumanName", "Period" or "dateTime".

        Returns {dataType, typeKind (primitive-type | complex-type), elements, regex for
        primitives}; matched ignoring case; an unknown name returns an error object.
        """
        return tool_result(datatype_definition(loaded, dataType))

    server = MCPServer(
        SERVER_NAME,
        log_level="WARNING",
        instructions=(
            "Read-only lookups in the HL7 FHIR R4 (4.0.1) specification: resource types, their "
            "elements, datatypes and search parameters. Use them before building a resource or a search."
        ),
    )
    for tool in (listResources, getStructureDefinition, getSearchParams, getDataTypeDefinition):
        server.add_tool(tool)
    return server


def specs_mcp_http_app(spec: Spec | None = None, *, path: str = "/mcp") -> Starlette:
    """The specs server over stateless streamable HTTP at ``path`` and legacy SSE at /sse (see transports)."""
    return http_app(build_specs_mcp(spec), path=path)
