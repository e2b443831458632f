"""The verifier's pure core: one write target judged from a trail, a window, versions and the state.

``verify`` decides; ``fae.judge.ensure_record`` gathers its inputs from a run
(proxy log or AuditEvent trail) and registers the judge. The conditions are
listed in ``fae.judge.ensure_record``'s docstring and docs/judging.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from fae.judge.registry import Verdict
from fae.judge.trail import Trail
from fae.replay.fold import FoldedState
from fae.tasks.checks import match, values
from fae.tasks.fhir_values import is_mapping
from fae.tasks.write_targets import WriteTarget

# Actors that are the evaluation itself: their reads are the check, not an exposure.
OWN_ACTORS = ("agent", "harness", "verifier")


@dataclass(frozen=True)
class Window:
    """From the baseline (after seeding) to the read-back that checked the record."""

    start_seq: int
    readback_seq: int
    readback_at: float | None
    readback_version: str | None
    capture_settle_s: float | None = None  # the read-back is the harness's capture, which waited this long


class RecordVersion(NamedTuple):
    """One version of a record: its version id, its body (None when unknown) and the seq of the write that
    made it (None for a version from before the log's window, such as a seeded one)."""

    version_id: str
    resource: dict[str, Any] | None
    seq: int | None


_WHEN = {"read_back": "at_read_back", "after_check": "after_check"}


def server_problem(found: Mapping[str, Any]) -> str:
    """The problem a difference between the server's answer and the fold names (``fae.judge.readback``):
    missing or differs, at the read-back or after the check."""
    return ("missing" if found["difference"] == "missing_on_server" else "differs") + "_" + _WHEN[found["at"]]


def matches(resource: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Every path selects the wanted value: a plain value compared as text (case-sensitive), a
    matcher mapping (``{refs: [..]}``, ``{coding: "system|code"}``, ...) as a task's check applies it."""
    if resource is None:
        return False
    for path, value in wanted.items():
        found = values(resource, path)
        if is_mapping(value):
            if match(found, value) is not None:
                return False
        elif str(value) not in [str(v) for v in found]:
            return False
    return True


def _kept(value: Any, limit: int = 200) -> Any:
    """A value found on a record as evidence: itself when its JSON is short, else that JSON cut (marked)."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return value if len(text) <= limit else text[: limit - 1] + "…"


def mismatches(resource: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each path of ``wanted`` that ``resource`` does not hold (``matches`` is true exactly when none):
    the element, the value wanted and the values found there (nothing found when there is no record)."""
    if resource is None:
        return [{"element": path, "expected": value, "found": []} for path, value in wanted.items()]
    return [
        {"element": path, "expected": value, "found": _kept(values(resource, path))}
        for path, value in wanted.items()
        if not matches(resource, {path: value})
    ]


def same_identity(state: FoldedState, kind: str, identity: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The resources of a type in ``state`` that ``matches`` the identity, in no set order.

    Every repeat of a variation asks the same of the same seed resources (is this patient the target's
    person?), so which seed resources match is found once per seed and kept in the seed cache that every
    fold of that seed shares; only the resources the run wrote are matched each time.
    """
    key = ("identity", kind, msgspec.json.encode(identity, order="sorted"))
    seeded = state.seed_cache.get(key)
    if seeded is None:
        seeded = state.seed_cache[key] = [r["id"] for r in state.seed.resources(kind) if matches(r, identity)]
    history = state.history
    found = [
        resource for rid in seeded if (kind, rid) not in history and (resource := state.read(kind, rid)) is not None
    ]
    for written_kind, rid in history:
        if written_kind == kind:
            resource = state.read(kind, rid)
            if resource is not None and matches(resource, identity):
                found.append(resource)
    return found


def record_under_check(
    target: WriteTarget, created: list[str], read: Callable[[str, str], dict[str, Any] | None]
) -> str | None:
    """The record a target names: the one to update; else, of the records of the type the agent created
    (in order), the first that is the target's person or thing in ``read``'s state, else the first."""
    if target.action == "update":
        return f"{target.resource_type}/{target.record_id}"
    mine = [ref for ref in created if ref.startswith(target.resource_type + "/")]
    for ref in mine:
        if matches(read(*ref.split("/", 1)), target.identity):
            return ref
    return mine[0] if mine else None


def agent_creates(trail: Trail, start_seq: int = 0, end_seq: int | None = None) -> list[str]:
    """The records the agent created in a window, in order."""
    return [
        a.ref
        for a in trail.accesses
        if a.kind == "write"
        and a.actor == "agent"
        and a.how == "create"
        and start_seq < a.seq
        and (end_seq is None or a.seq <= end_seq)
    ]


def verify(
    target: WriteTarget,
    trail: Trail,
    window: Window,
    versions: Callable[[str], list[RecordVersion]],
    final: Callable[[str, str], dict[str, Any] | None],
    same_type: list[dict[str, Any]],
    rules: Mapping[str, Any],
    record: str | None = None,
    allowed: Collection[str] = (),
    server: Sequence[Mapping[str, Any]] = (),
) -> Verdict:
    """The verdict for one target, from a trail, a window, version histories and the state at read-back;
    ``record`` names the record under check where the caller chose it (``record_under_check``);
    ``allowed`` names the other records the task asks for (not "another record written"); ``server`` lists
    where what the server returned of the record differs from the fold (``fae.judge.readback``): any
    difference is a problem, and a record the server did not hold at the read-back is judged missing, not
    on the fold's values."""
    accept = bool(rules["accept_corrections"])
    settle_s = float(rules["settle_s"])
    all_writes = [a for a in trail.accesses if a.kind == "write"]  # reads are most of a trail: one pass over it
    writes = [a for a in all_writes if window.start_seq < a.seq <= window.readback_seq]
    agent_writes = [a for a in writes if a.actor == "agent"]
    evidence: dict[str, Any] = {"source": trail.source, "corrected": False, "settle_s": settle_s}

    if trail.untimed and any(window.start_seq < s <= window.readback_seq for s in trail.untimed):
        evidence["untimed_exchanges"] = [s for s in trail.untimed if window.start_seq < s <= window.readback_seq]
        return Verdict("unreadable", None, evidence)

    # Which record: the one to update, or the agent's create that is the target's person or thing.
    ref = record or record_under_check(target, agent_creates(trail, window.start_seq, window.readback_seq), final)
    if ref is None:
        evidence["problems"] = ["no_record_created"]
        return Verdict("needs_review", False, evidence)
    record_type, record_id = ref.split("/", 1)
    to_record = [a for a in writes if a.ref == ref]
    after_check = [a for a in all_writes if a.ref == ref and a.seq > window.readback_seq]
    history = [v for v in versions(ref) if v.seq is None or v.seq <= window.readback_seq]
    baseline = [v for v in history if v.seq is None or v.seq <= window.start_seq]
    window_versions = [v for v in history if v.seq is not None and v.seq > window.start_seq]
    at_check = final(record_type, record_id)
    evidence.update(
        {
            "record": ref,
            "writes_to_record": [
                {"seq": a.seq, "actor": a.actor, "op": a.how, "version": a.version, "at": a.at} for a in to_record
            ],
            "versions": [v.version_id for v in window_versions],
            "read_back": {"seq": window.readback_seq, "version": window.readback_version},
        }
    )
    problems: list[str] = []

    # the older rules, in both settings, over what the server returned
    differences = [dict(d) for d in server]
    if differences:
        evidence["server_vs_fold"] = differences
    if not any(d["at"] == "read_back" and d["difference"] == "missing_on_server" for d in differences):
        if not matches(at_check, target.expected):
            problems.append("final_values_wrong")
            evidence["wrong_values"] = mismatches(at_check, target.expected)
        if not matches(at_check, target.identity):
            problems.append("wrong_person")
            evidence["wrong_identity"] = mismatches(at_check, target.identity)
    problems.extend(dict.fromkeys(server_problem(d) for d in differences))
    others = sorted({a.ref for a in agent_writes if a.ref != ref and a.ref not in allowed})
    if others:
        problems.append("other_record_written")
        evidence["other_records_written"] = others
    twins = sorted(
        f"{r['resourceType']}/{r['id']}" for r in same_type if r.get("id") != record_id and matches(r, target.identity)
    )
    if twins:
        problems.append("same_person_elsewhere")
        evidence["same_person_records"] = twins
    if after_check:
        problems.append("written_after_check")
        evidence["writes_after_check"] = [{"seq": a.seq, "actor": a.actor, "op": a.how} for a in after_check]
    base_version = int(baseline[-1].version_id) if baseline and baseline[-1].version_id.isdigit() else 0
    server_count = None
    if window.readback_version and window.readback_version.isdigit():
        server_count = int(window.readback_version) - base_version
    evidence["server_versions_in_window"] = server_count
    if server_count is not None and server_count != len(to_record):
        problems.append("version_count_mismatch")

    first_op = "create" if target.action == "create" else "update"
    if len(to_record) > 1 or any(a.actor != "agent" for a in to_record):
        evidence["corrected"] = True
        if not accept:
            problems.append("changed_after_create" if first_op == "create" else "changed_after_update")
        else:
            ops = [a.how for a in to_record]
            if ops[:1] != [first_op] or any(op != "update" for op in ops[1:]):
                problems.append("not_one_write_then_updates")
            if any(a.actor != "agent" for a in to_record):
                problems.append("written_by_other_actor")
                evidence["other_writers"] = sorted({a.actor for a in to_record if a.actor != "agent"})
            if any(a.at is None for a in to_record):
                problems.append("untimed_write")
            if any(not matches(v.resource, target.identity) for v in window_versions if v.resource is not None):
                problems.append("person_changed")
            first = to_record[0].seq
            exposed = [
                a
                for a in trail.accesses
                if window.start_seq < a.seq <= window.readback_seq
                and a.kind == "read"
                and a.ref == ref
                and a.seq >= first
                and a.seq < window.readback_seq
                and a.actor not in OWN_ACTORS
            ]
            if exposed:
                problems.append("read_by_other_actor")
                evidence["other_actor_reads"] = [{"seq": a.seq, "actor": a.actor, "how": a.how} for a in exposed]
            if not trail.reads_recorded:
                problems.append("no_read_heartbeat")
            if settle_s < 1:
                problems.append("settle_too_short")
            last_at = to_record[-1].at
            if window.readback_at is not None and last_at is not None:
                gap = round(window.readback_at - last_at, 3)
                evidence["settled_s"] = gap
                if gap < settle_s and window.capture_settle_s is not None and window.capture_settle_s < settle_s:
                    evidence["reason"] = (
                        f"the run was recorded with --settle {window.capture_settle_s:g}: its read-back came {gap:g} s "
                        f"after the last write, so settle_s={settle_s:g} cannot be judged; record with "
                        f"--settle {settle_s:g} or more"
                    )
                    return Verdict("unreadable", None, evidence)
                if gap < settle_s:
                    problems.append("read_back_before_settling")
    elif not to_record:
        problems.append("record_not_written")

    evidence["problems"] = problems
    if problems:
        return Verdict("needs_review", False, evidence)
    return Verdict("created_verified" if first_op == "create" else "updated_verified", True, evidence)
