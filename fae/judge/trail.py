"""The access trail of a run: every read and write of every resource, by actor, with its time.

Two sources. The proxy log sees every exchange of every actor that went through
the proxy, reads by search included (a resource in a search bundle was read).
A server's AuditEvent trail (Medplum-like servers) sees what the server chose
to audit: on the embedded server, reads and writes but no searches, and only
the identity the caller presented. A run recorded with ``--audit-events`` holds
that trail as the harness's reads of ``AuditEvent`` after the run
(``recorded_audit_events``). docs/judging.md compares the two.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec

from fae.judge.reads import Received, reads_of
from fae.replay.fold import FhirExchange, FoldedState, parse_json
from fae.replay.source import RunLog
from fae.store import events as ev

READS = (
    "read",
    "vread",
    "search-type",
    "search-system",
    "search-compartment",
    "history-instance",
    "history-type",
    "history-system",
)


class Access(msgspec.Struct, frozen=True):
    """One actor touching one resource: a read (how: read, search, history) or a write (create, update, delete)."""

    seq: int
    at: float | None
    actor: str
    kind: str  # "read" or "write"
    how: str
    ref: str
    version: str | None = None


class Trail(msgspec.Struct, frozen=True):
    """Accesses in order, whether the source records reads at all, and exchanges it could not time."""

    source: str
    accesses: tuple[Access, ...]
    reads_recorded: bool
    untimed: tuple[int, ...] = ()


def proxy_trail(exchanges: Iterable[FhirExchange], fold: FoldedState, received: Received | None = None) -> Trail:
    """The trail the proxy log gives: reads from exchanges (``fae.judge.reads``: searches, compartments,
    operations and batch entries included), writes from the fold's versions."""
    accesses: list[Access] = []
    untimed: list[int] = []
    reads = False
    for exchange in exchanges:
        if exchange.started_at is None and exchange.interaction != "sandbox-admin":
            untimed.append(exchange.seq)
        if exchange.ok and exchange.interaction in READS:
            reads = True
        actor = exchange.actor or "unknown"
        for read in reads_of(exchange, received):
            reads = True
            accesses.append(Access(exchange.seq, exchange.started_at, actor, "read", read.how, read.ref, read.version))
    for versions in fold.history.values():
        for index, version in enumerate(versions):
            if version.seq is None:
                continue
            had_before = index > 0 and versions[index - 1].resource is not None
            how = "delete" if version.resource is None else ("update" if had_before else "create")
            accesses.append(
                Access(
                    version.seq, version.at, version.actor or "unknown", "write", how, version.ref, version.version_id
                )
            )
    accesses.sort(key=lambda a: (a.seq, a.kind != "write"))
    return Trail("proxy", tuple(accesses), reads, tuple(untimed))


_AUDIT_HOW = {
    "create": "create",
    "update": "update",
    "patch": "update",
    "delete": "delete",
    "read": "read",
    "vread": "read",
}


# The evaluation's own plumbing: seeding and reading back are not accesses to judge.
HARNESS_IDENTITIES = ("harness", "setup")


def audit_trail(
    audit_events: Iterable[dict[str, Any]], actors: dict[str, str] | None = None, leave_out: Iterable[str] = ()
) -> Trail:
    """The trail a server's AuditEvents give; ``actors`` maps the identities they name to actors,
    and accesses by the actors in ``leave_out`` are dropped."""
    dropped = set(leave_out)
    rows: list[tuple[str, Access]] = []
    for event in audit_events:
        subtype = next((c.get("code") for c in event.get("subtype") or [] if isinstance(c, dict)), None)
        how = _AUDIT_HOW.get(str(subtype))
        entity = next((e.get("what", {}).get("reference") for e in event.get("entity") or []), None)
        if how is None or not isinstance(entity, str):
            continue
        parts = entity.split("/")
        ref, version = "/".join(parts[:2]), (parts[3] if len(parts) >= 4 and parts[2] == "_history" else None)
        who = next((a.get("who", {}).get("display") for a in event.get("agent") or []), None) or "anonymous"
        recorded = event.get("recorded")
        try:
            at = datetime.fromisoformat(str(recorded).replace("Z", "+00:00")).timestamp()
        except ValueError:
            at = None
        actor = (actors or {}).get(who, who)
        if actor in dropped:
            continue
        rows.append((str(recorded), Access(0, at, actor, "read" if how == "read" else "write", how, ref, version)))
    rows.sort(key=lambda row: (row[1].at is None, row[1].at or 0.0))
    accesses = tuple(Access(i + 1, a.at, a.actor, a.kind, a.how, a.ref, a.version) for i, (_, a) in enumerate(rows))
    return Trail(
        "trail", accesses, any(a.kind == "read" for a in accesses), tuple(a.seq for a in accesses if a.at is None)
    )


class RecordedTrail(msgspec.Struct, frozen=True):
    """A server's AuditEvents as the harness read them into the log, and the events that hold them."""

    audit_events: tuple[dict[str, Any], ...]
    seqs: tuple[int, ...]
    unreadable: tuple[int, ...] = ()


def recorded_audit_events(run: RunLog) -> RecordedTrail | None:
    """The AuditEvents the harness read after the run (``fae record --audit-events``), page by page,
    or None when the run holds no such read (recorded without a trail)."""
    http: dict[str, tuple[str | None, ev.HttpExchanged]] = {}
    found: list[dict[str, Any]] = []
    seqs: list[int] = []
    unreadable: list[int] = []
    for recorded in run.events:
        event = recorded.event
        if isinstance(event, ev.HttpExchanged):
            http[event.exchange_id] = (recorded.actor, event)
            continue
        if not (
            isinstance(event, ev.FhirInteracted)
            and event.interaction == "search-type"
            and event.resource_type == "AuditEvent"
        ):
            continue
        actor, exchange = http.get(event.exchange_id, (None, None))
        if actor != "harness":
            continue
        status = event.status if event.status is not None else (exchange.status if exchange else None)
        if exchange is None or status != 200:
            continue
        seqs.append(recorded.seq)
        bundle = parse_json(run.body(exchange.decoded_blob or exchange.response_blob))
        if not isinstance(bundle, dict):
            unreadable.append(recorded.seq)
            continue
        found.extend(
            e["resource"]
            for e in bundle.get("entry") or []
            if isinstance(e, dict)
            and isinstance(e.get("resource"), dict)
            and e["resource"].get("resourceType") == "AuditEvent"
        )
    if not seqs:
        return None
    return RecordedTrail(tuple(found), tuple(seqs), tuple(unreadable))
