"""Fold a run's events into FHIR state: the seed plus every recorded write response.

The fold is pure: a run's events and bodies in, a ``FoldedState`` out. It is a
``fae.tasks.StateView`` (so task validators read it as they read a live
sandbox), keeps every version of every resource with the event that wrote it,
and loads into the embedded FHIR engine on demand so searches run offline with
the live server's semantics. Resources handed out are shared, read-only values.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from fae.errors import ReplayDrift
from fae.replay.source import Recorded, RunLog
from fae.store import events as ev
from fae.tasks.state import ResourcesByType, by_type_and_id

WRITES = (
    "create",
    "update",
    "update-conditional",
    "patch",
    "patch-conditional",
    "delete",
    "delete-conditional",
    "transaction",
    "batch",
)
_ETAG = re.compile(r'(?:W/)?"([^"]+)"')
_decoder = msgspec.json.Decoder()


def parse_json(body: bytes | None) -> Any:
    """A JSON body, or None when there is none or it is not JSON."""
    if not body:
        return None
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError:
        return None


class FhirExchange(msgspec.Struct, frozen=True):
    """One FHIR exchange as the log saw it: HTTP facts joined with what it meant."""

    seq: int
    actor: str | None
    started_at: float | None
    method: str
    path: str
    status: int | None
    interaction: str
    resource_type: str | None
    resource_id: str | None
    version: str | None
    search_ids: tuple[str, ...]
    request: bytes | None
    response: bytes | None
    response_headers: tuple[ev.Header, ...]
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        for header in self.response_headers:
            if header.name.lower() == name:
                return header.value
        return None


def fhir_exchanges(run: RunLog) -> list[FhirExchange]:
    """Every FHIR exchange of a run in seq order (the FhirInteracted event's seq)."""
    http: dict[str, tuple[Recorded, ev.HttpExchanged]] = {}
    found: list[FhirExchange] = []
    for recorded in run.events:
        event = recorded.event
        if isinstance(event, ev.HttpExchanged):
            http[event.exchange_id] = (recorded, event)
        elif isinstance(event, ev.FhirInteracted):
            pair = http.get(event.exchange_id)
            if pair is None:
                raise ReplayDrift(
                    f"FHIR event for exchange {event.exchange_id} has no HTTP exchange",
                    run_id=run.run_id,
                    seq=recorded.seq,
                )
            rec, exchange = pair
            found.append(
                FhirExchange(
                    seq=recorded.seq,
                    actor=rec.actor,
                    started_at=exchange.started_at,
                    method=exchange.method,
                    path=exchange.path,
                    status=event.status if event.status is not None else exchange.status,
                    interaction=event.interaction,
                    resource_type=event.resource_type,
                    resource_id=event.resource_id,
                    version=event.version,
                    search_ids=event.search_ids,
                    request=run.body(exchange.request_blob) if exchange.method != "GET" else None,
                    response=run.body(exchange.decoded_blob or exchange.response_blob)
                    if exchange.method != "GET"
                    else None,
                    response_headers=exchange.response_headers,
                    error=exchange.error,
                )
            )
    return found


class FoldedVersion(msgspec.Struct, frozen=True):
    """One version of a resource in the fold (``resource`` is None for a delete)."""

    resource_type: str
    id: str
    version_id: str
    resource: dict[str, Any] | None
    seq: int | None  # the event that wrote it; None for the seed
    actor: str | None
    at: float | None

    @property
    def ref(self) -> str:
        return f"{self.resource_type}/{self.id}"


_SEED_SNAPSHOT = object()  # the seed cache's key for the seed's own snapshot


@dataclass
class FoldedState(ResourcesByType):
    """The state of a run's sandbox after some event: a StateView with version history."""

    seed_resources: list[dict[str, Any]]
    upto: int | None = None
    history: dict[tuple[str, str], list[FoldedVersion]] = field(default_factory=dict)
    problems: list[dict[str, Any]] = field(default_factory=list)
    # what readers derive from seed resources (their canonical JSON, say), shared by every fold of the same seed
    seed_cache: dict[Any, Any] = field(default_factory=dict, repr=False)
    # what readers derive from this state (a task check's diff against the seed), emptied by every write
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        seed = self.seed_cache.get(_SEED_SNAPSHOT)
        if seed is None:  # made once per seed: every fold of the seed reads the same snapshot
            seed = self.seed_cache[_SEED_SNAPSHOT] = ResourcesByType(by_type_and_id(self.seed_resources))
        self.seed = seed
        # copy on write: a type's resources are the seed's own mapping until a write to that type copies it
        super().__init__(dict(seed._by_type))
        self._copied: set[str] = set()
        self._engine: Any = None

    def written_refs(self) -> list[tuple[str, str]]:
        """(type, id) of every resource a write touched; all others are the seed's own objects, unchanged."""
        return list(self.history)

    def versions(self, resource_type: str, resource_id: str) -> list[FoldedVersion]:
        """Every version of one resource, oldest first, the seed version included."""
        return list(self.history.get((resource_type, resource_id), ()))

    def apply(self, version: FoldedVersion) -> None:
        key = (version.resource_type, version.id)
        if key not in self.history:
            seeded = self.seed.read(*key)
            self.history[key] = [FoldedVersion(*key, "1", seeded, None, None, None)] if seeded is not None else []
        self.history[key].append(version)
        if version.resource_type not in self._copied:
            self._copied.add(version.resource_type)
            self._by_type[version.resource_type] = dict(self._by_type.get(version.resource_type, {}))
        items = self._by_type[version.resource_type]
        if version.resource is None:
            items.pop(version.id, None)
        else:
            items[version.id] = version.resource
        self._engine = None
        self.derived.clear()

    def engine(self) -> tuple[Any, str]:
        """The folded state loaded into an embedded FHIR engine sandbox: (engine, sandbox id)."""
        if self._engine is None:
            from fae.fhir.engine import FhirEngine

            engine = FhirEngine()
            sid = engine.create_sandbox(sandbox_id="folded")
            loaded = []
            for resource in self.all():
                meta = dict(resource.get("meta") or {})
                meta.setdefault("versionId", self._current_version(resource))
                loaded.append({**resource, "meta": meta})
            engine.load_state(sid, loaded)
            self._engine = (engine, sid)
        return self._engine

    def _current_version(self, resource: dict[str, Any]) -> str:
        versions = self.history.get((resource["resourceType"], resource["id"]))
        return versions[-1].version_id if versions else "1"

    def search(self, resource_type: str, query: str = "") -> list[dict[str, Any]]:
        """A type search over the folded state, served by the embedded engine."""
        engine, sid = self.engine()
        reply = engine.handle(sid, "GET", resource_type, query + ("&" if query else "") + "_count=1000")
        bundle = reply.json()
        if reply.status != 200:
            raise ReplayDrift(f"search {resource_type}?{query} over folded state failed: {reply.status}")
        return [e["resource"] for e in bundle.get("entry") or [] if e.get("search", {}).get("mode", "match") == "match"]


def seed_resources(bundle: Any, *, run_id: str | None = None) -> list[dict[str, Any]]:
    """The resources a seed Bundle puts in a sandbox (entries need ids, as the harness writes them)."""
    if not isinstance(bundle, dict) or bundle.get("resourceType") != "Bundle":
        raise ReplayDrift("the recorded seed is not a FHIR Bundle", run_id=run_id)
    resources = []
    for index, entry in enumerate(bundle.get("entry") or []):
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if not isinstance(resource, dict) or not resource.get("id") or not resource.get("resourceType"):
            raise ReplayDrift(f"seed entry {index} has no resource with an id; it cannot be folded", run_id=run_id)
        resources.append(resource)
    return resources


def _version_of(exchange: FhirExchange, resource: Any) -> str | None:
    if isinstance(resource, dict) and isinstance(resource.get("meta"), dict):
        found = resource["meta"].get("versionId")
        if found:
            return str(found)
    if exchange.version:
        return exchange.version
    etag = exchange.header("etag")
    if etag:
        match = _ETAG.match(etag)
        return match.group(1) if match else etag.strip('"')
    return None


def _next_version(state: FoldedState, rtype: str, rid: str) -> str:
    versions = state.history.get((rtype, rid))
    if not versions:
        return "2" if state.seed.read(rtype, rid) is not None else "1"
    last = versions[-1].version_id
    return str(int(last) + 1) if last.isdigit() else str(len(versions) + 1)


def _fold_write(state: FoldedState, exchange: FhirExchange) -> None:
    """Apply one successful write exchange; note what cannot be folded."""

    def problem(reason: str) -> None:
        state.problems.append({"seq": exchange.seq, "interaction": exchange.interaction, "reason": reason})

    if exchange.interaction in ("transaction", "batch"):
        _fold_bundle(state, exchange, problem)
        return
    if exchange.interaction in ("delete", "delete-conditional"):
        if not exchange.resource_type or not exchange.resource_id:
            problem("a conditional delete does not name the resource it deleted")
            return
        if state.read(exchange.resource_type, exchange.resource_id) is None:
            return  # deleting what is not there changes nothing
        version = _version_of(exchange, None) or _next_version(state, exchange.resource_type, exchange.resource_id)
        state.apply(
            FoldedVersion(
                exchange.resource_type,
                exchange.resource_id,
                version,
                None,
                exchange.seq,
                exchange.actor,
                exchange.started_at,
            )
        )
        return
    written = parse_json(exchange.response)
    if not (isinstance(written, dict) and written.get("resourceType") == exchange.resource_type and written.get("id")):
        # return=minimal: the request body is what was stored, under the id and version the server gave
        written = parse_json(exchange.request)
        if exchange.interaction.startswith("patch") or not isinstance(written, dict) or not exchange.resource_id:
            problem("the write response carries no resource and the request cannot stand in for it")
            return
        written = {**written, "id": exchange.resource_id}
    written_version = _version_of(exchange, written)
    if written_version is None:
        problem("the write response names no version")
        return
    state.apply(
        FoldedVersion(
            written["resourceType"],
            written["id"],
            written_version,
            written,
            exchange.seq,
            exchange.actor,
            exchange.started_at,
        )
    )


def _fold_bundle(state: FoldedState, exchange: FhirExchange, problem: Any) -> None:
    request = parse_json(exchange.request)
    response = parse_json(exchange.response)
    if not isinstance(response, dict) or not isinstance(request, dict):
        problem("a transaction whose request or response body cannot be read")
        return
    asked = request.get("entry") or []
    for index, entry in enumerate(response.get("entry") or []):
        reply = entry.get("response") or {}
        status = str(reply.get("status", ""))[:3]
        method = ((asked[index].get("request") or {}).get("method", "") if index < len(asked) else "").upper()
        if not status.startswith("2") or method in ("GET", "HEAD"):
            continue
        location = [p for p in str(reply.get("location", "")).split("/") if p]
        rtype: str | None
        rid: str | None
        vid: str | None
        if "_history" in location and location.index("_history") >= 2:
            at = location.index("_history")
            rtype, rid, vid = location[at - 2], location[at - 1], location[at + 1] if at + 1 < len(location) else None
        else:
            rtype = rid = vid = None
        resource = entry.get("resource")
        if method == "DELETE":
            target = str((asked[index].get("request") or {}).get("url", "")).split("?")[0].split("/")
            if len(target) >= 2 and state.read(target[-2], target[-1]) is not None:
                state.apply(
                    FoldedVersion(
                        target[-2],
                        target[-1],
                        _next_version(state, target[-2], target[-1]),
                        None,
                        exchange.seq,
                        exchange.actor,
                        exchange.started_at,
                    )
                )
            continue
        if not isinstance(resource, dict):
            resource = asked[index].get("resource") if index < len(asked) else None
            if not isinstance(resource, dict) or not rtype:
                problem(f"transaction entry {index} names no stored resource")
                continue
            resource = {**resource, "id": rid}
        rtype, rid = resource.get("resourceType"), resource.get("id")
        vid = vid or (resource.get("meta") or {}).get("versionId")
        if not rtype or not rid or not vid:
            problem(f"transaction entry {index} names no resource version")
            continue
        state.apply(FoldedVersion(rtype, rid, str(vid), resource, exchange.seq, exchange.actor, exchange.started_at))


_SEEDS: OrderedDict[str, tuple[list[dict[str, Any]], dict[Any, Any]]] = OrderedDict()
# As many seeds as the other per-variation caches keep variations (``rendered_task``, ``_suite_targets``): a log
# whose suites cycle through more seeds than are kept parses every run's seed again and makes its seed cache anew,
# which cost a quarter of the runs per CPU-second where 147 seeds met a cache of 64. A seed with its cache is
# ~170 KiB: 1,024 of them about 170 MiB, held only by a log with that many variations.
SEEDS_KEPT = 1024


def _seed_of(run: RunLog, seeded: Recorded) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    """A seed's resources and its seed cache, made once per seed body: repeats of a variation share them."""
    assert isinstance(seeded.event, ev.SandboxSeeded) and seeded.event.seed_blob
    digest = seeded.event.seed_blob
    found = _SEEDS.get(digest)
    if found is not None:
        _SEEDS.move_to_end(digest)
        return found
    body = run.body(digest)
    if body is None:
        raise ReplayDrift("the seed body is missing from the log", run_id=run.run_id, seq=seeded.seq)
    found = _SEEDS[digest] = (seed_resources(parse_json(body), run_id=run.run_id), {})
    while len(_SEEDS) > SEEDS_KEPT:
        _SEEDS.popitem(last=False)
    return found


def _resets(exchange: FhirExchange) -> bool:
    return exchange.interaction == "sandbox-admin" and exchange.ok and exchange.path.rstrip("/").endswith("$reset")


def folds_after(exchanges: Iterable[FhirExchange], seq: int) -> bool:
    """Whether an exchange after ``seq`` can change a fold (a write, or a sandbox reset): if none, the fold at
    ``seq`` is the fold after the last event."""
    return any(x.seq > seq and (x.interaction in WRITES or _resets(x)) for x in exchanges)


def fold_state(run: RunLog, upto: int | None = None, *, exchanges: Iterable[FhirExchange] | None = None) -> FoldedState:
    """The run's sandbox state after event ``upto`` (default: after the last event)."""
    seeded = run.first(ev.SandboxSeeded)
    if seeded is None or not isinstance(seeded.event, ev.SandboxSeeded) or not seeded.event.seed_blob:
        raise ReplayDrift("the run has no recorded seed; its state cannot be folded", run_id=run.run_id)
    resources, cache = _seed_of(run, seeded)
    state = FoldedState(resources, upto=upto, seed_cache=cache)
    for exchange in exchanges if exchanges is not None else fhir_exchanges(run):
        if upto is not None and exchange.seq > upto:
            break
        if _resets(exchange):
            state = FoldedState(state.seed_resources, upto=upto, problems=state.problems, seed_cache=state.seed_cache)
            continue
        if exchange.interaction not in WRITES:
            continue
        if exchange.status is None:
            state.problems.append(
                {
                    "seq": exchange.seq,
                    "interaction": exchange.interaction,
                    "reason": f"the write got no response ({exchange.error or 'no status'})",
                }
            )
            continue
        if exchange.ok:
            _fold_write(state, exchange)
    return state
