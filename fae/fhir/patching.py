"""The PATCH interaction: JSON Patch or FHIRPath Patch, then If-Match, validation and a new version."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from fae.fhir.fhirpatch import apply_fhirpath_patch
from fae.fhir.jsonbody import MAX_NESTING, nesting_depth_over, parse_json
from fae.fhir.jsonpatch import apply_json_patch
from fae.fhir.outcome import FhirProblem
from fae.fhir.types import Resource
from fae.fhir.versions import put_resource
from fae.fhir.wire import FhirResponse, Request, instant

if TYPE_CHECKING:
    from fae.fhir.interactions import Interactions
    from fae.fhir.sandboxes import Sandbox

JSON_PATCH = "application/json-patch+json"
USAGE = (
    f"PATCH takes a JSON Patch ({JSON_PATCH}, a JSON array) or a FHIRPath Patch "
    "(application/fhir+json, a Parameters resource)"
)


def _patched(rest: Interactions, req: Request, resource: Resource) -> object:
    if not req.body:
        raise FhirProblem(400, f"A request body is required: {USAGE}")
    content_type = req.headers.get("content-type", "")
    doc = parse_json(req.body)
    if isinstance(doc, dict) and doc.get("resourceType") == "Binary" and JSON_PATCH in str(doc.get("contentType")):
        # inside a transaction a JSON Patch travels as a Binary (the FHIR R4 http page)
        try:
            doc = parse_json(base64.b64decode(str(doc.get("data", "")), validate=False), "The JSON Patch")
        except (binascii.Error, ValueError):
            raise FhirProblem(400, "The Binary's data is not base64 JSON Patch") from None
    if isinstance(doc, list):
        return apply_json_patch(resource, doc)
    if JSON_PATCH in content_type:
        raise FhirProblem(400, f"A {JSON_PATCH} body must be a JSON array of operations")
    if isinstance(doc, dict) and doc.get("resourceType") == "Parameters":
        return apply_fhirpath_patch(rest.spec, resource, doc)
    raise FhirProblem(415 if content_type and "json" not in content_type else 400, USAGE, code="not-supported")


def patch(rest: Interactions, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
    """Apply a patch to the current version of a resource and store the result as the next version."""
    current = sandbox.store.get(rtype, rid)
    if current is None:
        raise FhirProblem(404, f"{rtype}/{rid} is not known", code="not-found")
    if current.deleted:
        raise FhirProblem(410, f"{rtype}/{rid} was deleted", code="deleted")
    rest.check_if_match(req, current)
    result = _patched(rest, req, current.live_resource)
    if not isinstance(result, dict) or result.get("resourceType") != rtype or result.get("id") != rid:
        raise FhirProblem(400, "A patch may not change the resource's type or id", code="invalid")
    if nesting_depth_over(result):
        raise FhirProblem(422, f"The patched resource nests more than {MAX_NESTING} levels deep", code="processing")
    meta = result.get("meta")
    if isinstance(meta, dict):
        meta.pop("versionId", None)
        meta.pop("lastUpdated", None)
        if not meta:
            del result["meta"]  # the server stamps both again
    rest.validate(result)
    version = put_resource(sandbox.store, result, "PATCH", instant(rest.clock()))
    rest.audit(sandbox, req, "update", version)
    return rest.write_response(req, 200, version, "Patched")


def conditional_patch(rest: Interactions, sandbox: Sandbox, req: Request, rtype: str) -> FhirResponse:
    found = rest.matches(sandbox, rtype, req.pairs, req.budget)
    if len(found) != 1:
        raise FhirProblem(
            412 if found else 404,
            f"Conditional patch matched {len(found)} resources; it must match exactly one",
            code="multiple-matches" if found else "not-found",
        )
    return patch(rest, sandbox, req, rtype, found[0].id)
