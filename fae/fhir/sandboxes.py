"""Sandbox management: isolated stores, their seeds, reset, clone, and folding recorded state in."""

from __future__ import annotations

import threading
from collections.abc import Callable
from urllib.parse import parse_qsl

from fae.errors import FhirError
from fae.fhir.conditional import conditional_matches
from fae.fhir.jsonbody import clean_copy
from fae.fhir.outcome import FhirProblem
from fae.fhir.references import ID_RE
from fae.fhir.search import SearchContext
from fae.fhir.spec import Spec
from fae.fhir.transactions import (
    DEFAULT_MAX_ENTRIES,
    has_conditional_references,
    resolve_conditional_references,
    rewrite_references,
)
from fae.fhir.types import Resource
from fae.fhir.validate import validate_resource
from fae.fhir.versions import Store, Version, next_version, put_resource
from fae.fhir.wire import Clock, deep_copy, instant


class Sandbox:
    """One isolated FHIR state, the seed state it resets to, and the lock its requests hold."""

    __slots__ = ("id", "store", "seed", "audit", "lock")

    def __init__(self, sandbox_id: str, store: Store, audit: bool):
        self.id = sandbox_id
        self.store = store
        self.seed = store.copy()
        self.audit = audit
        self.lock = threading.RLock()


class Sandboxes:
    """The registry of sandboxes; its lock guards the registry, each sandbox's lock its state."""

    def __init__(
        self,
        spec: Spec,
        clock: Clock,
        id_factory: Callable[[], str],
        audit_events: bool,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ):
        self.spec = spec
        self.max_entries = max_entries
        self.clock = clock
        self.id_factory = id_factory
        self.audit_events = audit_events
        self._sandboxes: dict[str, Sandbox] = {}
        self._lock = threading.Lock()

    def create(
        self, seed_bundle: Resource | None = None, sandbox_id: str | None = None, *, audit_events: bool | None = None
    ) -> str:
        """Create an isolated store, seeded from a Bundle (collection, batch or transaction)."""
        sid = sandbox_id or self.id_factory()
        if not ID_RE.match(sid):
            raise FhirError(f"invalid sandbox id {sid!r}: use 1-64 of A-Z a-z 0-9 - .")
        with self._lock:
            if sid in self._sandboxes:
                raise FhirError(f"sandbox {sid!r} already exists")
        store = self._seed_store(seed_bundle) if seed_bundle else Store()
        audit = self.audit_events if audit_events is None else audit_events
        with self._lock:
            if sid in self._sandboxes:
                raise FhirError(f"sandbox {sid!r} already exists")
            self._sandboxes[sid] = Sandbox(sid, store, audit)
        return sid

    def _seed_store(self, bundle: Resource) -> Store:
        if not isinstance(bundle, dict) or bundle.get("resourceType") != "Bundle":
            raise FhirError("a seed must be a FHIR Bundle")
        try:
            bundle = clean_copy(bundle, "The seed")
        except FhirProblem as problem:
            raise FhirError(str(problem)) from None
        entries = bundle.get("entry") or []
        if not isinstance(entries, list):
            raise FhirError("seed Bundle.entry must be an array")
        if len(entries) > self.max_entries:
            raise FhirError(
                f"seed Bundle has {len(entries)} entries; this server takes at most {self.max_entries} per Bundle"
            )
        resources, urns = [], {}
        for i, entry in enumerate(entries):
            resource = entry.get("resource") if isinstance(entry, dict) else None
            if not isinstance(resource, dict):
                raise FhirError(f"seed Bundle.entry[{i}] has no resource")
            if not resource.get("id"):
                resource["id"] = self.id_factory()
            full_url = entry.get("fullUrl")
            if isinstance(full_url, str) and full_url.startswith("urn:"):
                urns[full_url] = f"{resource.get('resourceType')}/{resource['id']}"
            resources.append(resource)
        now = instant(self.clock())
        if urns:
            for resource in resources:
                rewrite_references(resource, urns)
        self._resolve_conditional(resources, now)
        store = Store()
        for i, resource in enumerate(resources):
            problems = validate_resource(self.spec, resource)
            if problems:
                first = problems[0]
                where = first.get("expression", [""])[0]
                raise FhirError(f"seed Bundle.entry[{i}] is invalid: {first['diagnostics']} ({where})")
            put_resource(store, resource, "POST", now, keep_meta=True)
        return store

    def _resolve_conditional(self, resources: list[Resource], now: str) -> None:
        """Resolve `Type?query` references (Synthea's) against the seed's own resources."""
        if not any(has_conditional_references(r) for r in resources):
            return
        scratch = Store()
        for resource in resources:
            if isinstance(resource.get("resourceType"), str) and isinstance(resource.get("id"), str):
                put_resource(scratch, resource, "POST", now, keep_meta=True)
        ctx = SearchContext(self.spec, scratch, self.clock().timestamp(), strict=True)
        for i, resource in enumerate(resources):
            try:
                resolve_conditional_references(
                    resource,
                    lambda rtype, query: conditional_matches(ctx, rtype, parse_qsl(query)),
                    self.spec.resource_types,
                )
            except FhirProblem as problem:
                raise FhirError(f"seed Bundle.entry[{i}]: {problem}") from None

    def get(self, sid: str) -> Sandbox | None:
        with self._lock:
            return self._sandboxes.get(sid)

    def require(self, sid: str) -> Sandbox:
        sandbox = self.get(sid)
        if sandbox is None:
            raise FhirError(f"no sandbox {sid!r}")
        return sandbox

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._sandboxes)

    def reset(self, sid: str) -> None:
        """Put a sandbox back to its seed state (copies two maps; nothing is re-validated)."""
        sandbox = self.require(sid)
        with sandbox.lock:
            sandbox.store = sandbox.seed.copy()

    def clone(self, src_sid: str, new_sid: str | None = None) -> str:
        """A new sandbox with the source's current state, which also becomes the clone's seed."""
        source = self.require(src_sid)
        sid = new_sid or self.id_factory()
        if not ID_RE.match(sid):
            raise FhirError(f"invalid sandbox id {sid!r}")
        with source.lock:
            store = source.store.copy()
        with self._lock:
            if sid in self._sandboxes:
                raise FhirError(f"sandbox {sid!r} already exists")
            self._sandboxes[sid] = Sandbox(sid, store, source.audit)
        return sid

    def delete(self, sid: str) -> None:
        with self._lock:
            if sid not in self._sandboxes:
                raise FhirError(f"no sandbox {sid!r}")
            del self._sandboxes[sid]

    def resources(self, sid: str, resource_type: str | None = None) -> list[Resource]:
        """Deep copies of the current (non-deleted) resources, in creation order."""
        sandbox = self.require(sid)
        with sandbox.lock:
            store = sandbox.store
            types = [resource_type] if resource_type else store.types()
            return [deep_copy(v.live_resource) for t in types for v in store.live(t)]

    def load_state(self, sid: str, resources: list[Resource]) -> None:
        """Replace a sandbox's state with recorded resource versions (oldest first), keeping their meta."""
        sandbox = self.require(sid)
        store = Store()
        for resource in resources:
            self._record(store, resource)
        with sandbox.lock:
            sandbox.store = store

    def record_version(self, sid: str, resource: Resource) -> None:
        """Fold one recorded write response (a resource with meta) into a sandbox."""
        sandbox = self.require(sid)
        with sandbox.lock:
            self._record(sandbox.store, resource)

    def record_deletion(
        self,
        sid: str,
        resource_type: str,
        resource_id: str,
        version_id: str | None = None,
        last_updated: str | None = None,
    ) -> None:
        """Fold one recorded delete into a sandbox."""
        sandbox = self.require(sid)
        with sandbox.lock:
            store = sandbox.store
            prev = store.get(resource_type, resource_id)
            vid = version_id or next_version(store, resource_type, resource_id)
            when = last_updated or (prev.last_updated if prev else instant(self.clock()))
            store.put(Version(resource_type, resource_id, vid, when, None, "DELETE"))

    def _record(self, store: Store, resource: Resource) -> None:
        if not isinstance(resource, dict) or not resource.get("resourceType") or not resource.get("id"):
            raise FhirError("a recorded resource needs resourceType and id")
        put_resource(store, deep_copy(resource), "PUT", instant(self.clock()), keep_meta=True)
