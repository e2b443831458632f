"""The embedded FHIR R4 engine: sandboxes and the REST interactions, as a pure in-process API.

`FhirEngine.handle` takes a request (method, path relative to a sandbox's FHIR
base, query, headers, body) and returns a `FhirResponse`. It reads no wall clock
and makes no I/O of its own: time and new ids come from callables passed in, so
the same code folds recorded events back into state offline. The engine is a
facade: `sandboxes.Sandboxes` keeps the stores, `interactions.Interactions` and
`routing.dispatch` serve requests. Requests on different sandboxes may run in
different threads at once; each sandbox serves one request at a time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from fae.fhir.budget import Budget
from fae.fhir.interactions import Interactions
from fae.fhir.outcome import FhirProblem
from fae.fhir.routing import dispatch
from fae.fhir.sandboxes import Sandbox, Sandboxes
from fae.fhir.spec import Spec, load_spec
from fae.fhir.transactions import DEFAULT_MAX_ENTRIES
from fae.fhir.types import Resource
from fae.fhir.wire import (
    JSON_TYPE,
    MAX_BODY,
    Clock,
    FhirResponse,
    Request,
    deep_copy,
    dumps,
    error_response,
    instant,
    parse_request,
)

# a request running longer than this answers 503 and changes nothing (see docs/fhir.md)
DEFAULT_BUDGET_S = 30.0


def _real_clock() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return str(uuid.uuid4())


class FhirEngine:
    """Sandboxed FHIR R4 stores behind a REST-shaped `handle` call."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
        audit_events: bool = False,
        spec: Spec | None = None,
        request_budget_s: float | None = DEFAULT_BUDGET_S,
        timer: Callable[[], float] = time.monotonic,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_body: int = MAX_BODY,
    ):
        self.spec = spec or load_spec()
        self.request_budget_s = request_budget_s
        self.timer = timer
        self.max_body = max_body
        self.clock = clock or _real_clock
        self.id_factory = id_factory or _new_id
        self.sandboxes = Sandboxes(self.spec, self.clock, self.id_factory, audit_events, max_entries)
        self.rest = Interactions(self.spec, self.clock, self.id_factory, max_entries)

    # ---- sandboxes -------------------------------------------------------------------------

    @property
    def audit_events(self) -> bool:
        """Whether sandboxes created from now on keep an AuditEvent trail."""
        return self.sandboxes.audit_events

    @audit_events.setter
    def audit_events(self, on: bool) -> None:
        self.sandboxes.audit_events = on

    def create_sandbox(
        self, seed_bundle: Resource | None = None, sandbox_id: str | None = None, *, audit_events: bool | None = None
    ) -> str:
        """Create an isolated store, seeded from a Bundle (collection, batch or transaction)."""
        return self.sandboxes.create(seed_bundle, sandbox_id, audit_events=audit_events)

    def has_sandbox(self, sid: str) -> bool:
        return self.sandboxes.get(sid) is not None

    def sandbox_ids(self) -> list[str]:
        return self.sandboxes.ids()

    def reset_sandbox(self, sid: str) -> None:
        """Put a sandbox back to its seed state (copies two maps; nothing is re-validated)."""
        self.sandboxes.reset(sid)

    def clone_sandbox(self, src_sid: str, new_sid: str | None = None) -> str:
        """A new sandbox with the source's current state, which also becomes the clone's seed."""
        return self.sandboxes.clone(src_sid, new_sid)

    def delete_sandbox(self, sid: str) -> None:
        self.sandboxes.delete(sid)

    def resources(self, sid: str, resource_type: str | None = None) -> list[Resource]:
        """Deep copies of the current (non-deleted) resources, in creation order."""
        return self.sandboxes.resources(sid, resource_type)

    def load_state(self, sid: str, resources: list[Resource]) -> None:
        """Replace a sandbox's state with recorded resource versions (oldest first), keeping their meta."""
        self.sandboxes.load_state(sid, resources)

    def record_version(self, sid: str, resource: Resource) -> None:
        """Fold one recorded write response (a resource with meta) into a sandbox."""
        self.sandboxes.record_version(sid, resource)

    def record_deletion(
        self,
        sid: str,
        resource_type: str,
        resource_id: str,
        version_id: str | None = None,
        last_updated: str | None = None,
    ) -> None:
        """Fold one recorded delete into a sandbox."""
        self.sandboxes.record_deletion(sid, resource_type, resource_id, version_id, last_updated)

    # ---- requests --------------------------------------------------------------------------

    def handle(
        self,
        sid: str,
        method: str,
        path: str,
        query: str = "",
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        base_url: str = "",
    ) -> FhirResponse:
        """Serve one REST interaction against a sandbox; never raises for client input."""
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        try:
            sandbox = self.sandboxes.get(sid)
            if sandbox is None:
                raise FhirProblem(404, f"No sandbox {sid!r}", code="not-found")
            budget = Budget(self.request_budget_s, self.timer)
            if body is not None and len(body) > self.max_body:
                raise FhirProblem(413, f"Body larger than {self.max_body} bytes", code="too-costly")
            request = parse_request(method, path, query, lowered, body, base_url, budget)
            with sandbox.lock:
                return dispatch(self.rest, sandbox, request)
        except FhirProblem as problem:
            return error_response(problem)
        except RecursionError:
            return error_response(FhirProblem(400, "Content nested too deeply"))


__all__ = ["JSON_TYPE", "MAX_BODY", "FhirEngine", "FhirResponse", "Request", "Sandbox", "deep_copy", "dumps", "instant"]
