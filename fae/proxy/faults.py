"""Faults the proxy applies in flight to an agent's writes, for write-verification scenarios.

The harness arms a run's faults (``FaultBook.arm``) before its agent starts.
The ``FaultAddon`` runs after the recording addon in every hook, so the log
keeps what the agent sent and what the server answered, while the server gets
the changed request and the agent gets the dropped or delayed reply; the
exchange's ``fault`` field says which fault touched it:

- ``set``: a field of the agent's N-th write request body is changed before
  it reaches the server (the server stores the changed record);
- ``drop_reply``: the server handles the write, the agent's connection is
  cut before the reply reaches it;
- ``delay_s``: the request waits that long before it goes on;
- ``lose``: the proxy answers the agent's create itself, as the server would
  (201, the body sent under a new id, version 1), and never passes it on: a
  write acknowledged that the server does not hold, as after a failover to a
  replica that had not received it. It needs no hook in the server, so it
  works in front of any server; the log keeps the acknowledgement the agent
  got, and every later read shows what the server really holds.

An armed run's agent writes are buffered whole, never streamed (see
``fae.proxy.addon``): a ``set`` must change the body before it goes on, and a
dropped reply must not have been let through already.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mitmproxy import http

from fae.proxy.addon import EXCHANGE_KEY, ROUTE_KEY
from fae.proxy.exchange import Exchange
from fae.proxy.routes import Route
from fae.tasks.scenario_files import Fault

_DROP_KEY = "fae_drop_reply"
_AFTER_KEY = "fae_after_write"
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_TYPE = re.compile(r"[A-Z][A-Za-z]+")


Written = dict[str, Any]
"""What a write touched, as a world step sees it (``${record.id}``): ``{"type", "id", "method", "status"}``."""
AfterWrite = Callable[[Written], Awaitable[None]]


@dataclass(frozen=True)
class After:
    """What to do after the agent's ``write``-th write (of ``method`` and ``resource`` when named, as for a fault)."""

    write: int
    then: AfterWrite
    method: str | None = None
    resource: str | None = None


@dataclass
class FaultBook:
    """The faults armed per run, each run's agent writes so far (method, resource type), and what happens after
    the N-th: the harness's steps of a case's world, awaited before the write's reply goes on to the agent."""

    armed: dict[str, list[Fault]] = field(default_factory=dict)
    after: dict[str, list[After]] = field(default_factory=dict)
    kinds: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)

    def arm(self, run_id: str, faults: list[Fault], after: Sequence[After] = ()) -> None:
        self.armed[run_id] = list(faults)
        self.after[run_id] = list(after)
        self.kinds[run_id] = []

    def disarm(self, run_id: str) -> None:
        self.armed.pop(run_id, None)
        self.after.pop(run_id, None)
        self.kinds.pop(run_id, None)

    def next_write(self, run_id: str, method: str = "", kind: str | None = None) -> list[Fault]:
        """Count one agent write of the run (its ``method`` on resource type ``kind``); the faults that apply to
        it: by the run's write order, or by the order of its writes of the fault's method and resource type."""
        if run_id not in self.armed:
            return []
        seen = self.kinds.setdefault(run_id, [])
        seen.append((method.upper(), kind))
        return _due(self.armed[run_id], seen)

    def after_this(self, run_id: str) -> list[AfterWrite]:
        """What is to happen after the write ``next_write`` just counted."""
        seen = self.kinds.get(run_id)
        return [a.then for a in _due(self.after.get(run_id, []), seen)] if seen else []


def _due[Item: (Fault, After)](items: list[Item], seen: list[tuple[str, str | None]]) -> list[Item]:
    """The items (faults, world steps) that name the last of the run's writes ``seen``: by its order among the
    run's writes, or among those of the item's method and resource type."""
    method, kind = seen[-1]
    return [item for item in items if _matches(item, method, kind) and item.write == _nth(item, seen)]


def _matches(fault: Fault | After, method: str, kind: str | None) -> bool:
    return (fault.method is None or fault.method.upper() == method) and (
        fault.resource is None or fault.resource == kind
    )


def _nth(fault: Fault | After, seen: list[tuple[str, str | None]]) -> int:
    """How many of the run's writes so far are of the fault's method and resource type."""
    return sum(1 for method, kind in seen if _matches(fault, method, kind))


def write_kind(path: str) -> str | None:
    """The resource type a FHIR write's path names (``None``: a batch/transaction at the base)."""
    parts = [part for part in path.partition("?")[0].split("/") if part]
    return next((part for part in parts if _TYPE.fullmatch(part)), None)


def set_path(body: Any, path: str, value: Any) -> Any:
    """``body`` with the dotted ``path`` (list indices as numbers) set to ``value``, made where missing."""
    keys = path.split(".")
    node = body
    for index, key in enumerate(keys):
        last = index == len(keys) - 1
        if isinstance(node, list) and key.isdigit():
            position = int(key)
            while len(node) <= position:
                node.append({})
            if last:
                node[position] = value
            else:
                node = node[position]
        elif isinstance(node, dict):
            if last:
                node[key] = value
            else:
                node = node.setdefault(key, [] if keys[index + 1].isdigit() else {})
        else:
            raise ValueError(f"cannot set {path!r}: {'.'.join(keys[:index]) or 'the body'} is not an object or list")
    return body


def describe(fault: Fault) -> str:
    """One line naming what a fault does, as the exchange it touched records it."""
    parts = []
    if fault.set is not None:
        parts.append(f"set {fault.set.path}={json.dumps(fault.set.value)} in the request the server got")
    if fault.drop_reply:
        parts.append("reply dropped before it reached the agent")
    if fault.delay_s:
        parts.append(f"request held {fault.delay_s:g} s")
    if fault.lose:
        parts.append("acknowledged by the proxy and never passed to the server")
    which = " ".join(part for part in (fault.method, fault.resource) if part)
    return f"write {fault.write}{' ' + which if which else ''}: " + ", ".join(parts or ["no change"])


def acknowledgement(request: http.Request, now: datetime) -> http.Response | str:
    """The reply a server gives to a create it stored, for a create the proxy does not pass on (``lose``);
    a one-line reason when the write is not a create of a resource at its type's URL."""
    path = request.path.partition("?")[0].rstrip("/")
    kind = path.rpartition("/")[2]
    try:
        body = json.loads(request.get_text() or "null")
    except ValueError:
        body = None
    if request.method.upper() != "POST" or not _TYPE.fullmatch(kind) or not isinstance(body, dict):
        return "lose applies to a create (POST of a resource to its type's URL)"
    if body.get("resourceType") != kind:
        return f"lose applies to a create: the body is not a {kind}"
    rid = str(uuid.uuid4())
    stamp = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    meta = {k: v for k, v in (body.get("meta") or {}).items() if k != "versionId"}
    stored = {**body, "id": rid, "meta": {**meta, "versionId": "1", "lastUpdated": stamp}}
    # the client's own base, as the server writes it when the proxy tells it where its clients are; else relative
    forwarded = request.headers.get("x-forwarded-host")
    where = f"{path.rpartition('/')[0]}/{kind}/{rid}/_history/1"
    location = (
        f"{request.headers.get('x-forwarded-proto', 'http')}://{forwarded}"
        f"{request.headers.get('x-forwarded-prefix', '')}{where}"
        if forwarded
        else f"{kind}/{rid}/_history/1"
    )
    minimal = "return=minimal" in request.headers.get("prefer", "").replace(" ", "")
    return http.Response.make(
        201,
        b"" if minimal else json.dumps(stored).encode(),
        {
            "content-type": "application/fhir+json",
            "location": location,
            "etag": 'W/"1"',
        },
    )


class FaultAddon:
    """Applies armed faults to agent writes on FHIR upstreams; does nothing for runs without faults."""

    def __init__(self, book: FaultBook):
        self.book = book

    def _may_fault(self, flow: http.HTTPFlow) -> Route | None:
        """The route of an agent's FHIR write, when it could be faulted."""
        route: Route | None = flow.metadata.get(ROUTE_KEY)
        if (
            route is None
            or flow.response is not None
            or route.actor != "agent"
            or route.upstream.kind != "fhir"
            or flow.request.method.upper() not in WRITE_METHODS
        ):
            return None
        return route

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        route = self._may_fault(flow)
        if route is not None and route.run_id in self.book.armed:
            flow.request.stream = False

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if (
            flow.metadata.get(_DROP_KEY)
            and flow.response is not None
            and not flow.response.headers.get("content-type", "").startswith("text/event-stream")
        ):
            flow.response.stream = False

    async def request(self, flow: http.HTTPFlow) -> None:
        route = self._may_fault(flow)
        if route is None:
            return
        faults = self.book.next_write(route.run_id, flow.request.method, write_kind(flow.request.path))
        then = self.book.after_this(route.run_id)
        if then:
            flow.metadata[_AFTER_KEY] = then
        exchange: Exchange | None = flow.metadata.get(EXCHANGE_KEY)
        if faults and exchange is not None:  # the log keeps what the agent sent, and says what the proxy changed
            exchange.fault = "; ".join(describe(fault) for fault in faults)
        for fault in faults:
            if fault.delay_s:
                await asyncio.sleep(fault.delay_s)
            if fault.lose:
                made = acknowledgement(flow.request, datetime.now(UTC))
                flow.response = (
                    http.Response.make(500, f"fae fault: {made}\n".encode()) if isinstance(made, str) else made
                )
                return
            if fault.drop_reply:
                flow.metadata[_DROP_KEY] = True
            if fault.set is not None:
                try:
                    body = set_path(json.loads(flow.request.get_text() or "{}"), fault.set.path, fault.set.value)
                except ValueError as exc:
                    flow.response = http.Response.make(500, f"fae fault: {exc}\n".encode())
                    return
                flow.request.set_text(json.dumps(body))

    async def response(self, flow: http.HTTPFlow) -> None:
        then: list[AfterWrite] = flow.metadata.pop(_AFTER_KEY, [])
        for step in then if flow.response is not None else ():
            await step(written(flow))  # the world acts on the write before the agent hears back
        if flow.metadata.get(_DROP_KEY):
            flow.kill()  # the write happened and was recorded; its reply never reaches the agent


def written(flow: http.HTTPFlow) -> Written:
    """The resource a write touched: its id from the reply's Location or body (a create), else from its path."""
    path = [part for part in flow.request.path.partition("?")[0].split("/") if part]
    kind = next((part for part in reversed(path) if _TYPE.fullmatch(part)), None)
    rid: str | None = None
    if kind is not None and path.index(kind) + 1 < len(path) and path[path.index(kind) + 1] != "_history":
        rid = path[path.index(kind) + 1]
    response = flow.response
    if rid is None and response is not None:
        location = [part for part in response.headers.get("location", "").split("/") if part]
        if kind in location and location.index(kind) + 1 < len(location):
            rid = location[location.index(kind) + 1]
        else:
            try:
                body = json.loads(response.get_text() or "null")
            except ValueError:
                body = None
            if isinstance(body, dict) and isinstance(body.get("id"), str):
                rid = body["id"]
    return {
        "type": kind,
        "id": rid,
        "method": flow.request.method.upper(),
        "status": response.status_code if response is not None else None,
    }
