"""Which records an exchange let its client read, and the body it received of each.

A read is any successful answer that hands a record to its client: a read or
vread, a search or history page (a record in the returned bundle was read), a
compartment search (``Patient/P1/AllergyIntolerance``) or an operation that
returns a bundle (``$everything``), and every GET entry of a batch or
transaction (by id or by search). The trail (who read what, when) and the
oracle (did another actor receive the record while it was wrong) both use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from fae.replay.fold import FhirExchange, parse_json
from fae.replay.source import RunLog
from fae.store import events as ev

# interactions whose successful answer is a bundle of records the client read
_BUNDLE_READS = {
    "search-type": "search",
    "search-system": "search",
    "search-compartment": "compartment",
    "history-instance": "history",
    "history-type": "history",
    "history-system": "history",
    "operation": "operation",
    "unknown": "compartment",
}


class Read(msgspec.Struct, frozen=True):
    """One record handed to a client: how (read, search, history, compartment, operation, batch-read,
    batch-search), which record, the version and the body received (None where the log holds none)."""

    how: str
    ref: str
    version: str | None = None
    resource: dict[str, Any] | None = None


Received = Callable[[int], Any]


def received_bodies(run: RunLog) -> Received:
    """seq of a FHIR event -> the parsed body its client received (the exchange's decoded response)."""
    http: dict[str, ev.HttpExchanged] = {}
    by_seq: dict[int, ev.HttpExchanged] = {}
    for recorded in run.events:
        event = recorded.event
        if isinstance(event, ev.HttpExchanged):
            http[event.exchange_id] = event
        elif isinstance(event, ev.FhirInteracted) and event.exchange_id in http:
            by_seq[recorded.seq] = http[event.exchange_id]

    def body(seq: int) -> Any:
        exchange = by_seq.get(seq)
        if exchange is None:
            return None
        return parse_json(run.body(exchange.decoded_blob or exchange.response_blob))

    return body


def received_once(memo: dict, run: RunLog) -> Received:
    """``received_bodies`` of a run, made once per run context (``RunContext.memo``)."""
    key = ("reads", "received")
    if key not in memo:
        memo[key] = received_bodies(run)
    return memo[key]


def _ref(resource: Any) -> str | None:
    if isinstance(resource, dict) and isinstance(resource.get("resourceType"), str) and resource.get("id"):
        return f"{resource['resourceType']}/{resource['id']}"
    return None


def _version(resource: dict[str, Any]) -> str | None:
    meta = resource.get("meta")
    found = meta.get("versionId") if isinstance(meta, dict) else None
    return str(found) if found is not None else None


def _bundle_reads(bundle: Any, how: str) -> list[Read]:
    """Every record in a bundle's entries (OperationOutcomes and nested bundles' own entries aside)."""
    if not isinstance(bundle, dict) or bundle.get("resourceType") != "Bundle":
        return []
    found = []
    for entry in bundle.get("entry") or []:
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if isinstance(resource, dict) and (ref := _ref(resource)) and resource["resourceType"] != "OperationOutcome":
            found.append(Read(how, ref, _version(resource), resource))
    return found


def _entry_ok(entry: Any) -> bool:
    status = str(((entry or {}).get("response") or {}).get("status", "")) if isinstance(entry, dict) else ""
    return status[:1] == "2"


def _batch_reads(exchange: FhirExchange) -> list[Read]:
    """The GET entries of a batch or transaction: a read by id, or a search whose bundle was returned."""
    request, response = parse_json(exchange.request), parse_json(exchange.response)
    if not isinstance(request, dict) or not isinstance(response, dict):
        return []
    asked = request.get("entry") or []
    answered = response.get("entry") or []
    found: list[Read] = []
    for index, entry in enumerate(asked):
        call = entry.get("request") if isinstance(entry, dict) else None
        if not isinstance(call, dict) or str(call.get("method", "")).upper() not in ("GET", "HEAD"):
            continue
        reply = answered[index] if index < len(answered) else None
        if not isinstance(reply, dict) or not _entry_ok(reply):
            continue
        resource = reply.get("resource")
        if isinstance(resource, dict) and resource.get("resourceType") == "Bundle":
            found.extend(_bundle_reads(resource, "batch-search"))
        elif isinstance(resource, dict) and (ref := _ref(resource)):
            found.append(Read("batch-read", ref, _version(resource), resource))
        else:  # an answer without the body still handed the record over
            path = [p for p in str(call.get("url", "")).split("?")[0].split("/") if p]
            if len(path) >= 2 and path[0][:1].isupper():
                found.append(
                    Read(
                        "batch-read",
                        f"{path[0]}/{path[1]}",
                        path[3] if len(path) >= 4 and path[2] == "_history" else None,
                    )
                )
    return found


def reads_of(exchange: FhirExchange, received: Received | None = None, *, bodies: bool = False) -> list[Read]:
    """The records a successful exchange handed to its client. ``received`` gives the body a GET's client
    received (needed for compartment searches and operations); ``bodies`` asks for each record's body."""
    if not exchange.ok:
        return []
    kind, method = exchange.interaction, exchange.method.upper()
    if kind in ("batch", "transaction"):
        return _batch_reads(exchange)
    if kind in ("read", "vread"):
        if not (exchange.resource_type and exchange.resource_id):
            return []
        body = received(exchange.seq) if (received and bodies) else None
        return [
            Read(
                kind,
                f"{exchange.resource_type}/{exchange.resource_id}",
                exchange.version,
                body if isinstance(body, dict) else None,
            )
        ]
    how = _BUNDLE_READS.get(kind)
    if how is None or (kind == "unknown" and method != "GET"):
        return []
    parse = kind in ("unknown", "operation", "search-compartment") or bodies
    if not parse:
        return [Read(how, ref) for ref in exchange.search_ids]
    if exchange.response is not None:
        bundle = parse_json(exchange.response)
    else:
        bundle = received(exchange.seq) if received else None
    if isinstance(bundle, dict) and bundle.get("type") in ("searchset", "history", "collection", "document"):
        return _bundle_reads(bundle, how)
    return (
        []
        if kind in ("unknown", "operation", "search-compartment")
        else [Read(how, ref) for ref in exchange.search_ids]
    )
