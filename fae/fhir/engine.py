"""The embedded FHIR R4 engine: sandboxes and the REST interactions, as a pure in-process API.

`FhirEngine.handle` takes a request (method, path relative to a sandbox's FHIR
base, query, headers, body) and returns a `FhirResponse`. It reads no wall clock
and makes no I/O of its own: time and new ids come from callables passed in, so
the same code folds recorded events back into state offline.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from urllib.parse import parse_qsl

import msgspec

from fae.errors import FhirError
from fae.fhir import bundles
from fae.fhir.audit import audit_event, identity
from fae.fhir.capability import capability_statement
from fae.fhir.outcome import FhirProblem, issue, outcome
from fae.fhir.references import ID_RE
from fae.fhir.search import SearchContext, filter_resources
from fae.fhir.spec import Spec, load_spec
from fae.fhir.store import Store, Version
from fae.fhir.validate import validate_resource

JSON_TYPE = "application/fhir+json; charset=utf-8"
MAX_BODY = 8 * 1024 * 1024
Clock = Callable[[], datetime]


def _real_clock() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return str(uuid.uuid4())


def instant(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


_ENCODER = msgspec.json.Encoder()


def deep_copy(obj: dict) -> dict:
    """A deep copy of JSON data; a msgspec round trip is several times faster than copy.deepcopy."""
    return msgspec.json.decode(_ENCODER.encode(obj))


def dumps(obj: object) -> bytes:
    return _ENCODER.encode(obj)


@dataclass
class FhirResponse:
    """An HTTP answer: status, headers and body bytes (FHIR JSON or empty)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> object:
        return json.loads(self.body) if self.body else None


@dataclass
class Request:
    """One parsed interaction against a sandbox."""

    method: str
    segments: list[str]
    pairs: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes | None
    base: str

    def prefer(self, key: str) -> str | None:
        for part in self.headers.get("prefer", "").split(","):
            name, _, value = part.strip().partition("=")
            if name.strip().lower() == key:
                return value.strip().strip('"').lower()
        return None

    @property
    def strict(self) -> bool:
        return self.prefer("handling") == "strict"


class Sandbox:
    """One isolated FHIR state, with the seed state it resets to."""

    __slots__ = ("id", "store", "seed", "audit")

    def __init__(self, sandbox_id: str, store: Store, audit: bool):
        self.id = sandbox_id
        self.store = store
        self.seed = store.copy()
        self.audit = audit


class FhirEngine:
    """Sandboxed FHIR R4 stores behind a REST-shaped `handle` call."""

    def __init__(self, *, clock: Clock | None = None, id_factory: Callable[[], str] | None = None,
                 audit_events: bool = False, spec: Spec | None = None):
        self.spec = spec or load_spec()
        self.clock = clock or _real_clock
        self.id_factory = id_factory or _new_id
        self.audit_events = audit_events
        self._sandboxes: dict[str, Sandbox] = {}
        self._lock = threading.RLock()

    # ---- sandboxes -------------------------------------------------------------------------

    def create_sandbox(self, seed_bundle: dict | None = None, sandbox_id: str | None = None,
                       *, audit_events: bool | None = None) -> str:
        """Create an isolated store, seeded from a Bundle (collection, batch or transaction)."""
        sid = sandbox_id or self.id_factory()
        if not ID_RE.match(sid):
            raise FhirError(f"invalid sandbox id {sid!r}: use 1-64 of A-Z a-z 0-9 - .")
        with self._lock:
            if sid in self._sandboxes:
                raise FhirError(f"sandbox {sid!r} already exists")
            store = self._seed_store(seed_bundle) if seed_bundle else Store()
            audit = self.audit_events if audit_events is None else audit_events
            self._sandboxes[sid] = Sandbox(sid, store, audit)
        return sid

    def _seed_store(self, bundle: dict) -> Store:
        if not isinstance(bundle, dict) or bundle.get("resourceType") != "Bundle":
            raise FhirError("a seed must be a FHIR Bundle")
        entries = bundle.get("entry") or []
        if not isinstance(entries, list):
            raise FhirError("seed Bundle.entry must be an array")
        resources, urns = [], {}
        for i, entry in enumerate(entries):
            resource = entry.get("resource") if isinstance(entry, dict) else None
            if not isinstance(resource, dict):
                raise FhirError(f"seed Bundle.entry[{i}] has no resource")
            resource = deep_copy(resource)
            if not resource.get("id"):
                resource["id"] = self.id_factory()
            full_url = entry.get("fullUrl")
            if isinstance(full_url, str) and full_url.startswith("urn:"):
                urns[full_url] = f"{resource.get('resourceType')}/{resource['id']}"
            resources.append(resource)
        store = Store()
        now = instant(self.clock())
        for i, resource in enumerate(resources):
            if urns:
                bundles.rewrite_references(resource, urns)
            problems = validate_resource(self.spec, resource)
            if problems:
                first = problems[0]
                where = first.get("expression", [""])[0]
                raise FhirError(f"seed Bundle.entry[{i}] is invalid: {first['diagnostics']} ({where})")
            self._put(store, resource, "POST", now, keep_meta=True)
        return store

    def _sandbox(self, sid: str) -> Sandbox:
        sandbox = self._sandboxes.get(sid)
        if sandbox is None:
            raise FhirError(f"no sandbox {sid!r}")
        return sandbox

    def has_sandbox(self, sid: str) -> bool:
        return sid in self._sandboxes

    def sandbox_ids(self) -> list[str]:
        return list(self._sandboxes)

    def reset_sandbox(self, sid: str) -> None:
        """Put a sandbox back to its seed state (copies two maps; nothing is re-validated)."""
        with self._lock:
            sandbox = self._sandbox(sid)
            sandbox.store = sandbox.seed.copy()

    def clone_sandbox(self, src_sid: str, new_sid: str | None = None) -> str:
        """A new sandbox with the source's current state, which also becomes the clone's seed."""
        with self._lock:
            source = self._sandbox(src_sid)
            sid = new_sid or self.id_factory()
            if not ID_RE.match(sid):
                raise FhirError(f"invalid sandbox id {sid!r}")
            if sid in self._sandboxes:
                raise FhirError(f"sandbox {sid!r} already exists")
            self._sandboxes[sid] = Sandbox(sid, source.store.copy(), source.audit)
        return sid

    def delete_sandbox(self, sid: str) -> None:
        with self._lock:
            self._sandbox(sid)
            del self._sandboxes[sid]

    def resources(self, sid: str, resource_type: str | None = None) -> list[dict]:
        """Deep copies of the current (non-deleted) resources, in creation order."""
        with self._lock:
            store = self._sandbox(sid).store
            types = [resource_type] if resource_type else store.types()
            return [deep_copy(v.resource) for t in types for v in store.live(t)]

    def load_state(self, sid: str, resources: list[dict]) -> None:
        """Replace a sandbox's state with recorded resource versions, keeping their meta.

        Several versions of one resource may be given, oldest first; the last is current.
        """
        with self._lock:
            sandbox = self._sandbox(sid)
            store = Store()
            for resource in resources:
                self._record(store, resource)
            sandbox.store = store

    def record_version(self, sid: str, resource: dict) -> None:
        """Fold one recorded write response (a resource with meta) into a sandbox."""
        with self._lock:
            self._record(self._sandbox(sid).store, resource)

    def record_deletion(self, sid: str, resource_type: str, resource_id: str,
                        version_id: str | None = None, last_updated: str | None = None) -> None:
        """Fold one recorded delete into a sandbox."""
        with self._lock:
            store = self._sandbox(sid).store
            prev = store.get(resource_type, resource_id)
            vid = version_id or self._next_version(store, resource_type, resource_id)
            when = last_updated or (prev.last_updated if prev else instant(self.clock()))
            store.put(Version(resource_type, resource_id, vid, when, None, "DELETE"))

    def _record(self, store: Store, resource: dict) -> None:
        if not isinstance(resource, dict) or not resource.get("resourceType") or not resource.get("id"):
            raise FhirError("a recorded resource needs resourceType and id")
        self._put(store, deep_copy(resource), "PUT", instant(self.clock()), keep_meta=True)

    # ---- storage helpers -------------------------------------------------------------------

    @staticmethod
    def _next_version(store: Store, rtype: str, rid: str) -> str:
        history = store.instance_history(rtype, rid)
        if not history:
            return "1"
        last = history[-1].version_id
        return str(int(last) + 1) if last.isascii() and last.isdigit() else str(len(history) + 1)

    def _put(self, store: Store, resource: dict, method: str, now: str,
             keep_meta: bool = False) -> Version:
        rtype, rid = resource["resourceType"], resource["id"]
        meta = dict(resource.get("meta") or {})
        if not (keep_meta and meta.get("versionId")):
            meta["versionId"] = self._next_version(store, rtype, rid)
        if not (keep_meta and meta.get("lastUpdated")):
            meta["lastUpdated"] = now
        rest = {k: v for k, v in resource.items() if k not in ("resourceType", "id", "meta")}
        resource = {"resourceType": rtype, "id": rid, "meta": meta, **rest}
        version = Version(rtype, rid, str(meta["versionId"]), meta["lastUpdated"], resource, method)
        store.put(version)
        return version

    # ---- requests --------------------------------------------------------------------------

    def handle(self, sid: str, method: str, path: str, query: str = "",
               headers: dict[str, str] | None = None, body: bytes | None = None,
               base_url: str = "") -> FhirResponse:
        """Serve one REST interaction against a sandbox; never raises for client input."""
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        try:
            with self._lock:
                sandbox = self._sandboxes.get(sid)
                if sandbox is None:
                    raise FhirProblem(404, f"No sandbox {sid!r}", code="not-found")
                request = self._parse(method, path, query, lowered, body, base_url)
                return self.dispatch(sandbox, request)
        except FhirProblem as problem:
            return self.error(problem)
        except RecursionError:
            return self.error(FhirProblem(400, "Content nested too deeply"))

    def _parse(self, method: str, path: str, query: str, headers: dict[str, str],
               body: bytes | None, base_url: str) -> Request:
        if body is not None and len(body) > MAX_BODY:
            raise FhirProblem(413, f"Body larger than {MAX_BODY} bytes", code="too-costly")
        try:
            pairs = parse_qsl(query or "", keep_blank_values=True, strict_parsing=False,
                              max_num_fields=1000)
        except ValueError as exc:
            raise FhirProblem(400, f"Malformed query string: {exc}") from None
        segments = [s for s in path.strip("/").split("/") if s] if path else []
        if any(s in (".", "..") for s in segments):
            raise FhirProblem(400, "Path segments '.' and '..' are not allowed")
        fmt = next((v for k, v in pairs if k == "_format"), "")
        accept = headers.get("accept", "")
        if "xml" in fmt or ("xml" in accept and "json" not in accept and "*/*" not in accept):
            raise FhirProblem(415, "Only FHIR JSON is supported (application/fhir+json)",
                              code="not-supported")
        if body and "xml" in headers.get("content-type", ""):
            raise FhirProblem(415, "Only FHIR JSON bodies are supported (application/fhir+json)",
                              code="not-supported")
        verb = method.upper()
        # HEAD is answered as GET; the HTTP layer drops the body
        return Request("GET" if verb == "HEAD" else verb, segments, pairs, headers, body,
                       base_url.rstrip("/"))

    def error(self, problem: FhirProblem) -> FhirResponse:
        return FhirResponse(problem.status, {"Content-Type": JSON_TYPE}, dumps(problem.outcome()))

    def respond(self, status: int, payload: object | None, headers: dict[str, str] | None = None
                ) -> FhirResponse:
        out = {"Content-Type": JSON_TYPE} if payload is not None else {}
        out.update(headers or {})
        return FhirResponse(status, out, dumps(payload) if payload is not None else b"")

    def dispatch(self, sandbox: Sandbox, req: Request, assigned_id: str | None = None) -> FhirResponse:
        seg, method = req.segments, req.method
        if not seg:
            if method == "POST":
                return bundles.process_bundle(self, sandbox, req)
            if method == "GET":
                return self.search(sandbox, req, None)
            raise FhirProblem(405, f"{method} is not allowed on the base URL")
        head = seg[0]
        if head == "metadata" and len(seg) == 1:
            if method != "GET":
                raise FhirProblem(405, "Only GET is allowed on /metadata")
            return self.respond(200, capability_statement(self.spec, req.base))
        if head == "_history" and len(seg) == 1 and method == "GET":
            return bundles.history(self, sandbox, req, None, None)
        if head == "_search" and len(seg) == 1 and method == "POST":
            return self.search(sandbox, self._with_form(req), None)
        if head.startswith("$") or (len(seg) > 1 and seg[-1].startswith("$")):
            raise FhirProblem(400, f"Operation {seg[-1][:60]!r} is not supported", code="not-supported")
        if head not in self.spec.resource_types:
            raise FhirProblem(404, f"Unknown resource type {head!r}", code="not-supported")
        rtype = head
        if len(seg) == 1:
            if method == "GET":
                return self.search(sandbox, req, rtype)
            if method == "POST":
                return self.create(sandbox, req, rtype, assigned_id)
            if method == "PUT" and req.pairs:
                return self.conditional_update(sandbox, req, rtype)
            if method == "DELETE" and req.pairs:
                return self.conditional_delete(sandbox, req, rtype)
            raise FhirProblem(405, f"{method} is not allowed on {rtype}")
        second = seg[1]
        if second == "_search" and len(seg) == 2:
            if method != "POST":
                raise FhirProblem(405, "Use POST for _search")
            return self.search(sandbox, self._with_form(req), rtype)
        if second == "_history" and len(seg) == 2:
            if method != "GET":
                raise FhirProblem(405, "Only GET is allowed on _history")
            return bundles.history(self, sandbox, req, rtype, None)
        if not ID_RE.match(second):
            raise FhirProblem(400, f"Invalid id {second[:70]!r}: 1-64 of A-Z a-z 0-9 - .")
        if len(seg) == 2:
            if method in ("GET", "HEAD"):
                return self.read(sandbox, req, rtype, second)
            if method == "PUT":
                return self.update(sandbox, req, rtype, second)
            if method == "DELETE":
                return self.delete(sandbox, req, rtype, second)
            raise FhirProblem(405, f"{method} is not allowed on {rtype}/{second}")
        if seg[2] == "_history" and method == "GET":
            if len(seg) == 3:
                return bundles.history(self, sandbox, req, rtype, second)
            if len(seg) == 4:
                return self.vread(sandbox, req, rtype, second, seg[3])
        raise FhirProblem(404, f"Unknown path {'/'.join(seg)[:120]!r}", code="not-found")

    # ---- interactions ----------------------------------------------------------------------

    def parse_body(self, req: Request, rtype: str | None) -> dict:
        if not req.body:
            raise FhirProblem(400, "A request body (FHIR JSON resource) is required")
        try:
            resource = json.loads(req.body, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FhirProblem(400, f"Body is not valid JSON: {str(exc)[:200]}") from None
        if not isinstance(resource, dict):
            raise FhirProblem(400, "Body must be a JSON object (a FHIR resource)")
        actual = resource.get("resourceType")
        if not isinstance(actual, str) or actual not in self.spec.resource_types:
            raise FhirProblem(400, f"Unknown or missing resourceType {actual!r}",
                              expression="resourceType")
        if rtype and actual != rtype:
            raise FhirProblem(400, f"resourceType {actual!r} does not match the URL type {rtype!r}",
                              expression="resourceType")
        return resource

    def validate(self, resource: dict) -> None:
        problems = validate_resource(self.spec, resource)
        if problems:
            raise FhirProblem(422, problems[0]["diagnostics"], issues=problems)

    def _write_headers(self, req: Request, version: Version) -> dict[str, str]:
        moment = datetime.fromisoformat(version.last_updated.replace("Z", "+00:00"))
        prefix = f"{req.base}/" if req.base else ""
        return {"ETag": f'W/"{version.version_id}"',
                "Last-Modified": format_datetime(moment.astimezone(UTC), usegmt=True),
                "Location": f"{prefix}{version.resource_type}/{version.id}/_history/{version.version_id}"}

    def _write_response(self, req: Request, status: int, version: Version, message: str) -> FhirResponse:
        headers = self._write_headers(req, version)
        mode = req.prefer("return") or "representation"
        if mode == "minimal":
            return self.respond(status, None, headers)
        if mode == "operationoutcome":
            return self.respond(status, outcome(issue("information", "informational", message)), headers)
        return self.respond(status, version.resource, headers)

    def _audit(self, sandbox: Sandbox, req: Request, interaction: str, version: Version) -> None:
        if not sandbox.audit or version.resource_type == "AuditEvent":
            return
        entity = f"{version.resource_type}/{version.id}/_history/{version.version_id}"
        event = audit_event(interaction, entity, identity(req.headers), instant(self.clock()))
        event["id"] = self.id_factory()
        self._put(sandbox.store, event, "POST", event["recorded"])

    def _matches(self, sandbox: Sandbox, rtype: str, query: str | list[tuple[str, str]],
                 strict: bool = True) -> list[Version]:
        pairs = parse_qsl(query, keep_blank_values=True) if isinstance(query, str) else query
        ctx = SearchContext(self.spec, sandbox.store, self.clock().timestamp(), strict=strict)
        return filter_resources(ctx, rtype, pairs)

    def create(self, sandbox: Sandbox, req: Request, rtype: str, assigned_id: str | None = None
               ) -> FhirResponse:
        resource = self.parse_body(req, rtype)
        condition = req.headers.get("if-none-exist")
        if condition:
            found = self._matches(sandbox, rtype, condition.split("?", 1)[-1])
            if len(found) > 1:
                raise FhirProblem(412, f"If-None-Exist matched {len(found)} resources", code="duplicate")
            if found:
                return self._write_response(req, 200, found[0], "Matched an existing resource")
        resource.pop("id", None)
        self.validate(resource)
        resource["id"] = assigned_id or self.id_factory()
        meta = resource.get("meta")
        if isinstance(meta, dict):
            meta.pop("versionId", None)
        version = self._put(sandbox.store, resource, "POST", instant(self.clock()))
        self._audit(sandbox, req, "create", version)
        return self._write_response(req, 201, version, "Created")

    def read(self, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
        version = sandbox.store.get(rtype, rid)
        if version is None:
            raise FhirProblem(404, f"{rtype}/{rid} is not known", code="not-found")
        if version.deleted:
            raise FhirProblem(410, f"{rtype}/{rid} was deleted", code="deleted")
        self._audit(sandbox, req, "read", version)
        headers = self._write_headers(req, version)
        del headers["Location"]
        if req.headers.get("if-none-match", "").replace("W/", "") == f'"{version.version_id}"':
            return self.respond(304, None, headers)
        return self.respond(200, self._shaped(req, version.resource), headers)

    def _shaped(self, req: Request, resource: dict) -> dict:
        from fae.fhir.shaping import select_elements, summarise, summary_mode
        mode = summary_mode(req.pairs)
        if mode and mode != "count":
            resource = summarise(self.spec, resource, mode)
        names = [n.strip() for k, v in req.pairs if k == "_elements" for n in v.split(",") if n.strip()]
        return select_elements(resource, names) if names else resource

    def vread(self, sandbox: Sandbox, req: Request, rtype: str, rid: str, vid: str) -> FhirResponse:
        version = sandbox.store.version(rtype, rid, vid)
        if version is None:
            raise FhirProblem(404, f"{rtype}/{rid}/_history/{vid[:20]} is not known", code="not-found")
        if version.deleted:
            raise FhirProblem(410, f"{rtype}/{rid} version {vid} is a deletion", code="deleted")
        self._audit(sandbox, req, "vread", version)
        headers = self._write_headers(req, version)
        del headers["Location"]
        return self.respond(200, version.resource, headers)

    def update(self, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
        resource = self.parse_body(req, rtype)
        body_id = resource.get("id")
        if body_id is None:
            raise FhirProblem(400, "The resource body must carry an id equal to the URL id",
                              expression=f"{rtype}.id")
        if body_id != rid:
            raise FhirProblem(400, f"Body id {str(body_id)[:70]!r} does not match URL id {rid!r}",
                              expression=f"{rtype}.id")
        return self._update(sandbox, req, resource)

    def _update(self, sandbox: Sandbox, req: Request, resource: dict) -> FhirResponse:
        rtype, rid = resource["resourceType"], resource["id"]
        current = sandbox.store.get(rtype, rid)
        if_match = req.headers.get("if-match")
        if if_match:
            wanted = if_match.strip().removeprefix("W/").strip('"')
            if current is None or current.deleted or current.version_id != wanted:
                have = "none" if current is None or current.deleted else current.version_id
                raise FhirProblem(412, f"If-Match {if_match!r} does not match the current version "
                                       f"({have})", code="conflict")
        self.validate(resource)
        meta = resource.get("meta")
        if isinstance(meta, dict):
            meta.pop("versionId", None)
            meta.pop("lastUpdated", None)
        version = self._put(sandbox.store, resource, "PUT", instant(self.clock()))
        created = current is None or current.deleted
        self._audit(sandbox, req, "create" if created else "update", version)
        return self._write_response(req, 201 if created else 200, version,
                                    "Created" if created else "Updated")

    def conditional_update(self, sandbox: Sandbox, req: Request, rtype: str) -> FhirResponse:
        resource = self.parse_body(req, rtype)
        found = self._matches(sandbox, rtype, req.pairs)
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
        return self._update(sandbox, req, resource)

    def delete(self, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
        current = sandbox.store.get(rtype, rid)
        if current is None or current.deleted:
            return self.respond(200, outcome(issue("information", "informational",
                                                   f"{rtype}/{rid} does not exist; nothing deleted")))
        version = Version(rtype, rid, self._next_version(sandbox.store, rtype, rid),
                          instant(self.clock()), None, "DELETE")
        sandbox.store.put(version)
        self._audit(sandbox, req, "delete", version)
        headers = {"ETag": f'W/"{version.version_id}"'}
        return self.respond(200, outcome(issue("information", "informational",
                                               f"Deleted {rtype}/{rid}")), headers)

    def conditional_delete(self, sandbox: Sandbox, req: Request, rtype: str) -> FhirResponse:
        found = self._matches(sandbox, rtype, req.pairs)
        if len(found) > 1:
            raise FhirProblem(412, f"Conditional delete matched {len(found)} resources", code="duplicate")
        if not found:
            return self.respond(200, outcome(issue("information", "informational", "Nothing matched")))
        return self.delete(sandbox, req, rtype, found[0].id)

    def _with_form(self, req: Request) -> Request:
        form: list[tuple[str, str]] = []
        if req.body:
            try:
                form = parse_qsl(req.body.decode("utf-8"), keep_blank_values=True, max_num_fields=1000)
            except (UnicodeDecodeError, ValueError):
                raise FhirProblem(400, "POST _search needs an application/x-www-form-urlencoded body"
                                  ) from None
        return Request("GET", req.segments, req.pairs + form, req.headers, None, req.base)

    def search(self, sandbox: Sandbox, req: Request, rtype: str | None) -> FhirResponse:
        return self.respond(200, bundles.search_bundle(self, sandbox, req, rtype))
