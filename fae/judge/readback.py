"""What the server returned of the record under check, beside what the fold of the log's writes predicts.

``ensure_record``'s verdict rests on the server's answers, never on the fold
alone. Two reads are the server's word on the record: the verifier's last read
of it (the read-back; a read by id answered 404 or 410 says the record is not
there), and the harness's state capture at the run's close (the read-back
when the verifier never read the record, else a look after the check). Each
is compared with the fold at its event: a record the server does not hold, or
holds with other content (``meta`` aside) or another version than the fold, is
a difference, named by record, read, element, fold value and server value.
``state_drift`` compares the same capture with the same fold over every
resource, element by element with the same function, so on the record under
check the two judges see the same differences.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fae.judge.context import RunContext
from fae.judge.reads import reads_of, received_once
from fae.replay.drift import differing_elements
from fae.replay.fold import FoldedState

# The server's answers compared with the fold: the read-back, and the capture after a verifier's read-back.
SERVER_READS = ("read_back", "after_check")
# A read by id answered with one of these says the server holds no such record (410: deleted).
NOT_THERE = (404, 410)
# meta.tag code a server sets on a resource it returned in part (_elements, _summary)
SUBSETTED = "SUBSETTED"


@dataclass(frozen=True)
class ServerRead:
    """One answer of the server about a record: by the verifier or the harness's capture, at an event."""

    by: str  # "verifier" or "capture"
    seq: int
    at: float | None
    found: bool  # False: the server answered that it holds no such record
    resource: dict[str, Any] | None = None  # the body received; None when not found or the log holds none
    version: str | None = None


def verifier_reads(ctx: RunContext, record: str) -> list[ServerRead]:
    """The verifier's reads of ``record`` before the capture, in order: each record handed over (by id, search
    or batch entry) with the body received, and each read by id the server answered with 404 or 410."""
    key = ("readback", "verifier", record)
    if key in ctx.memo:
        return ctx.memo[key]
    capture_seq = ctx.captured[0] if ctx.captured else None
    kind, rid = record.split("/", 1)
    found: list[ServerRead] = []
    for x in ctx.exchanges:
        if x.actor != "verifier" or (capture_seq is not None and x.seq > capture_seq):
            continue
        received = received_once(ctx.memo, ctx.run)  # made only for a run the verifier read in
        if x.status in NOT_THERE and x.interaction == "read" and (x.resource_type, x.resource_id) == (kind, rid):
            found.append(ServerRead("verifier", x.seq, x.started_at, False))
            continue
        for read in reads_of(x, received, bodies=True):
            if read.ref == record:
                found.append(ServerRead("verifier", x.seq, x.started_at, True, read.resource, read.version))
    ctx.memo[key] = found
    return found


def capture_read(ctx: RunContext, record: str, at: float | None = None) -> ServerRead | None:
    """The record as the harness's capture holds it (not found when the capture lacks it); None without one."""
    if ctx.captured is None:
        return None
    seq, capture = ctx.captured
    kind, _, rid = record.partition("/")
    resource = capture.by_key().get((kind, rid))
    if resource is None:
        return ServerRead("capture", seq, at, False)
    version = (resource.get("meta") or {}).get("versionId")
    return ServerRead("capture", seq, at, True, resource, str(version) if version is not None else None)


def predicted(fold: FoldedState, record: str, seq: int) -> tuple[dict[str, Any] | None, str | None]:
    """The record the fold holds after event ``seq``, and its version (None, None: no such record)."""
    kind, rid = record.split("/", 1)
    versions = fold.versions(kind, rid)
    if not versions:
        seeded = fold.seed.read(kind, rid)
        return seeded, "1" if seeded is not None else None
    chosen = None
    for version in versions:
        if version.seq is None or version.seq <= seq:
            chosen = version
    if chosen is None or chosen.resource is None:
        return None, None
    return chosen.resource, chosen.version_id


def _subsetted(resource: Mapping[str, Any]) -> bool:
    tags = (resource.get("meta") or {}).get("tag") or []
    return any(isinstance(t, dict) and t.get("code") == SUBSETTED for t in tags)


def difference(record: str, read: ServerRead, fold: FoldedState, at: str) -> dict[str, Any] | None:
    """How the server's answer differs from the fold at the read's event, or None when they agree.

    ``at`` says which read it is: ``read_back`` or ``after_check`` (the capture after the verifier's read-back).
    A body the server returned in part (tagged SUBSETTED) is compared on the elements it carries.
    """
    folded, fold_version = predicted(fold, record, read.seq)
    base: dict[str, Any] = {"record": record, "at": at, "by": read.by, "seq": read.seq}
    if folded is None:
        if not read.found:
            return None
        return {**base, "difference": "only_on_server", "fold": None, "server_version": read.version}
    if not read.found:
        return {**base, "difference": "missing_on_server", "fold_version": fold_version, "server": None}
    server = read.resource
    if server is not None:
        within = set(server) if _subsetted(server) else None
        elements = differing_elements(folded, server, within)
        if elements:
            return {
                **base,
                "difference": "content",
                "elements": [{"element": k, "fold": folded.get(k), "server": server.get(k)} for k in elements],
                "fold_version": fold_version,
                "server_version": read.version,
            }
    if read.version is not None and fold_version is not None and read.version != fold_version:
        return {**base, "difference": "version", "fold_version": fold_version, "server_version": read.version}
    return None


def as_returned(
    record: str, read: ServerRead | None, otherwise: Callable[[str, str], dict[str, Any] | None]
) -> Callable[[str, str], dict[str, Any] | None]:
    """A reader of the state at the read-back that gives ``record`` as the server returned it: None when the
    server said it holds none, its body when the log holds it whole; any other record, or a body returned in
    part (its returned elements are compared by ``difference``), as ``otherwise`` reads it."""
    kind, rid = record.split("/", 1)

    def read_one(resource_type: str, resource_id: str) -> dict[str, Any] | None:
        if read is None or (resource_type, resource_id) != (kind, rid):
            return otherwise(resource_type, resource_id)
        if not read.found:
            return None
        if read.resource is None or _subsetted(read.resource):
            return otherwise(resource_type, resource_id)
        return read.resource

    return read_one


def server_differences(
    ctx: RunContext,
    record: str,
    read_back: ServerRead | None,
    compared: tuple[str, ...],
    capture: ServerRead | None = None,
) -> list[dict[str, Any]]:
    """The differences between the server's answers and the fold for ``record``: at the read-back (the
    verifier's read, or the capture when ``read_back`` is None) and at the capture after a verifier's
    read-back, each only when named in ``compared``. ``capture`` is the record's ``capture_read`` where the
    caller has it."""
    fold = ctx.full_fold
    found = []
    capture = capture or capture_read(ctx, record)
    reads: list[tuple[str, ServerRead | None]] = (
        [("read_back", read_back), ("after_check", capture)] if read_back is not None else [("read_back", capture)]
    )
    for at, read in reads:
        if at in compared and read is not None and (item := difference(record, read, fold, at)) is not None:
            found.append(item)
    return found
