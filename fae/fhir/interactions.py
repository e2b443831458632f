"""The REST interactions on one sandbox: create, read, vread, update, delete, their conditional forms, search."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import format_datetime
from urllib.parse import parse_qsl

from fae.fhir import bundles
from fae.fhir.audit import audit_event, identity
from fae.fhir.budget import UNLIMITED, Budget
from fae.fhir.conditional import conditional_matches
from fae.fhir.jsonbody import parse_json
from fae.fhir.outcome import FhirProblem, issue, outcome
from fae.fhir.references import ID_RE
from fae.fhir.routing import dispatch
from fae.fhir.sandboxes import Sandbox
from fae.fhir.search import SearchContext
from fae.fhir.shaping import select_elements, summarise, summary_mode
from fae.fhir.spec import Spec
from fae.fhir.transactions import DEFAULT_MAX_ENTRIES
from fae.fhir.types import Resource
from fae.fhir.validate import validate_resource
from fae.fhir.versions import Version, next_version, put_resource
from fae.fhir.wire import Clock, FhirResponse, Request, instant, respond


class Interactions:
    """What each REST interaction does to a sandbox; `routing.dispatch` picks one per request."""

    def __init__(self, spec: Spec, clock: Clock, id_factory: Callable[[], str], max_entries: int = DEFAULT_MAX_ENTRIES):
        self.spec = spec
        self.max_entries = max_entries
        self.clock = clock
        self.id_factory = id_factory

    def dispatch(self, sandbox: Sandbox, req: Request, assigned_id: str | None = None) -> FhirResponse:
        return dispatch(self, sandbox, req, assigned_id)

    def parse_body(self, req: Request, rtype: str | None) -> Resource:
        if not req.body:
            raise FhirProblem(400, "A request body (FHIR JSON resource) is required")
        resource = parse_json(req.body)
        if not isinstance(resource, dict):
            raise FhirProblem(400, "Body must be a JSON object (a FHIR resource)")
        actual = resource.get("resourceType")
        if not isinstance(actual, str) or actual not in self.spec.resource_types:
            raise FhirProblem(400, f"Unknown or missing resourceType {actual!r}", expression="resourceType")
        if rtype and actual != rtype:
            raise FhirProblem(
                400, f"resourceType {actual!r} does not match the URL type {rtype!r}", expression="resourceType"
            )
        return resource

    def validate(self, resource: Resource) -> None:
        problems = validate_resource(self.spec, resource)
        if problems:
            raise FhirProblem(422, problems[0]["diagnostics"], issues=problems)

    def write_headers(self, req: Request, version: Version) -> dict[str, str]:
        moment = datetime.fromisoformat(version.last_updated.replace("Z", "+00:00"))
        prefix = f"{req.base}/" if req.base else ""
        return {
            "ETag": f'W/"{version.version_id}"',
            "Last-Modified": format_datetime(moment.astimezone(UTC), usegmt=True),
            "Location": f"{prefix}{version.resource_type}/{version.id}/_history/{version.version_id}",
        }

    def write_response(self, req: Request, status: int, version: Version, message: str) -> FhirResponse:
        headers = self.write_headers(req, version)
        mode = req.prefer("return") or "representation"
        if mode == "minimal":
            return respond(status, None, headers)
        if mode == "operationoutcome":
            return respond(status, outcome(issue("information", "informational", message)), headers)
        return respond(status, version.resource, headers)

    def audit(self, sandbox: Sandbox, req: Request, interaction: str, version: Version) -> None:
        if not sandbox.audit or version.resource_type == "AuditEvent":
            return
        entity = f"{version.resource_type}/{version.id}/_history/{version.version_id}"
        event = audit_event(interaction, entity, identity(req.headers), instant(self.clock()))
        event["id"] = self.id_factory()
        put_resource(sandbox.store, event, "POST", event["recorded"])

    def matches(
        self, sandbox: Sandbox, rtype: str, query: str | list[tuple[str, str]], budget: Budget = UNLIMITED
    ) -> list[Version]:
        """Live resources of a type that a conditional query (`a=b&c=d`) selects."""
        pairs = parse_qsl(query, keep_blank_values=True) if isinstance(query, str) else query
        ctx = SearchContext(self.spec, sandbox.store, self.clock().timestamp(), strict=True, budget=budget)
        return conditional_matches(ctx, rtype, pairs)

    def create(self, sandbox: Sandbox, req: Request, rtype: str, assigned_id: str | None = None) -> FhirResponse:
        resource = self.parse_body(req, rtype)
        condition = req.headers.get("if-none-exist")
        if condition:
            found = self.matches(sandbox, rtype, condition.split("?", 1)[-1], req.budget)
            if len(found) > 1:
                raise FhirProblem(412, f"If-None-Exist matched {len(found)} resources", code="duplicate")
            if found:
                return self.write_response(req, 200, found[0], "Matched an existing resource")
        resource.pop("id", None)
        self.validate(resource)
        resource["id"] = assigned_id or self.id_factory()
        meta = resource.get("meta")
        if isinstance(meta, dict):
            meta.pop("versionId", None)
        version = put_resource(sandbox.store, resource, "POST", instant(self.clock()))
        self.audit(sandbox, req, "create", version)
        return self.write_response(req, 201, version, "Created")

    def read(self, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
        version = sandbox.store.get(rtype, rid)
        if version is None:
            raise FhirProblem(404, f"{rtype}/{rid} is not known", code="not-found")
        if version.deleted:
            raise FhirProblem(410, f"{rtype}/{rid} was deleted", code="deleted")
        self.audit(sandbox, req, "read", version)
        headers = self.write_headers(req, version)
        del headers["Location"]
        if req.headers.get("if-none-match", "").replace("W/", "") == f'"{version.version_id}"':
            return respond(304, None, headers)
        return respond(200, self.shaped(req, version.live_resource), headers)

    def shaped(self, req: Request, resource: Resource) -> Resource:
        mode = summary_mode(req.pairs)
        if mode and mode != "count":
            resource = summarise(self.spec, resource, mode)
        names = [n.strip() for k, v in req.pairs if k == "_elements" for n in v.split(",") if n.strip()]
        return select_elements(self.spec, resource, names) if names else resource

    def vread(self, sandbox: Sandbox, req: Request, rtype: str, rid: str, vid: str) -> FhirResponse:
        version = sandbox.store.version(rtype, rid, vid)
        if version is None:
            raise FhirProblem(404, f"{rtype}/{rid}/_history/{vid[:20]} is not known", code="not-found")
        if version.deleted:
            raise FhirProblem(410, f"{rtype}/{rid} version {vid} is a deletion", code="deleted")
        self.audit(sandbox, req, "vread", version)
        headers = self.write_headers(req, version)
        del headers["Location"]
        return respond(200, version.resource, headers)

    def update(self, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
        resource = self.parse_body(req, rtype)
        body_id = resource.get("id")
        if body_id is None:
            raise FhirProblem(400, "The resource body must carry an id equal to the URL id", expression=f"{rtype}.id")
        if body_id != rid:
            raise FhirProblem(
                400, f"Body id {str(body_id)[:70]!r} does not match URL id {rid!r}", expression=f"{rtype}.id"
            )
        return self.store_update(sandbox, req, resource)

    def check_if_match(self, req: Request, current: Version | None) -> None:
        if_match = req.headers.get("if-match")
        if if_match:
            wanted = if_match.strip().removeprefix("W/").strip('"')
            if current is None or current.deleted or current.version_id != wanted:
                have = "none" if current is None or current.deleted else current.version_id
                raise FhirProblem(
                    412, f"If-Match {if_match!r} does not match the current version ({have})", code="conflict"
                )

    def store_update(self, sandbox: Sandbox, req: Request, resource: Resource) -> FhirResponse:
        rtype, rid = resource["resourceType"], resource["id"]
        current = sandbox.store.get(rtype, rid)
        self.check_if_match(req, current)
        self.validate(resource)
        meta = resource.get("meta")
        if isinstance(meta, dict):
            meta.pop("versionId", None)
            meta.pop("lastUpdated", None)
        version = put_resource(sandbox.store, resource, "PUT", instant(self.clock()))
        created = current is None or current.deleted
        self.audit(sandbox, req, "create" if created else "update", version)
        return self.write_response(req, 201 if created else 200, version, "Created" if created else "Updated")

    def conditional_update(self, sandbox: Sandbox, req: Request, rtype: str) -> FhirResponse:
        resource = self.parse_body(req, rtype)
        found = self.matches(sandbox, rtype, req.pairs, req.budget)
        if len(found) > 1:
            raise FhirProblem(412, f"Conditional update matched {len(found)} resources", code="duplicate")
        if found:
            if resource.get("id") not in (None, found[0].id):
                raise FhirProblem(400, "Body id does not match the resource the condition found")
            resource["id"] = found[0].id
        else:
            resource.setdefault("id", self.id_factory())
            if not isinstance(resource["id"], str) or not ID_RE.match(resource["id"]):
                raise FhirProblem(400, "Invalid id in body", expression=f"{rtype}.id")
        return self.store_update(sandbox, req, resource)

    def delete(self, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
        current = sandbox.store.get(rtype, rid)
        if current is None or current.deleted:
            return respond(
                200, outcome(issue("information", "informational", f"{rtype}/{rid} does not exist; nothing deleted"))
            )
        version = Version(rtype, rid, next_version(sandbox.store, rtype, rid), instant(self.clock()), None, "DELETE")
        sandbox.store.put(version)
        self.audit(sandbox, req, "delete", version)
        headers = {"ETag": f'W/"{version.version_id}"'}
        return respond(200, outcome(issue("information", "informational", f"Deleted {rtype}/{rid}")), headers)

    def conditional_delete(self, sandbox: Sandbox, req: Request, rtype: str) -> FhirResponse:
        found = self.matches(sandbox, rtype, req.pairs, req.budget)
        if len(found) > 1:
            raise FhirProblem(412, f"Conditional delete matched {len(found)} resources", code="duplicate")
        if not found:
            return respond(200, outcome(issue("information", "informational", "Nothing matched")))
        return self.delete(sandbox, req, rtype, found[0].id)

    def with_form(self, req: Request) -> Request:
        """A POST `_search` request as the equivalent GET, its form body merged into the query."""
        form: list[tuple[str, str]] = []
        if req.body:
            try:
                form = parse_qsl(req.body.decode("utf-8"), keep_blank_values=True, max_num_fields=1000)
            except (UnicodeDecodeError, ValueError):
                raise FhirProblem(400, "POST _search needs an application/x-www-form-urlencoded body") from None
        return Request("GET", req.segments, req.pairs + form, req.headers, None, req.base, req.budget)

    def search(self, sandbox: Sandbox, req: Request, rtype: str | None) -> FhirResponse:
        return respond(200, bundles.search_bundle(self, sandbox, req, rtype))
