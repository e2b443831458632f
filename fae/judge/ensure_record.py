"""``ensure_record``: did the agent write the one record it was asked to, right, and safely?

Evidence is the access trail (every read and write of every actor, with its
time) and the record's version history. Outcomes:

- ``created_verified`` / ``updated_verified``: one write by the agent, right, and
  nothing else touched; or, with ``accept_corrections``, a create (or update)
  followed by the agent's own fixes when every condition below holds.
- ``needs_review``: anything else; ``problems`` in the evidence say why.
- ``unreadable``: the trail has an exchange with no time or a write body that
  cannot be read, so nothing can be concluded.

Rules that always hold (the "older rules"): the record exists at the read-back
with the expected values and is the right person; the agent wrote no other
record in the window; no other record of the type is the same person; nothing
wrote the record after the read-back; the server's version count in the window
equals the trail's writes.

A correction (more than one write to the record) passes only with
``accept_corrections`` and when: exactly one create then updates and no delete,
each timed and by the agent; every version is the same person; no other actor
read the record from the create to the read-back, and the trail records reads
at all; ``settle_s >= 1`` and the read-back came at least ``settle_s`` after the
last write.

Rule ``evidence`` picks the trail: ``proxy`` (the proxy log) or ``trail`` (the
server's AuditEvents the harness read into the log, ``fae record --audit-events``).
The same conditions judge either; docs/judging.md says what each cannot see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fae.errors import JudgeError
from fae.judge.context import RunContext
from fae.judge.registry import JudgeFn, Rule, Verdict, judge
from fae.judge.trail import HARNESS_IDENTITIES, Trail, audit_trail, proxy_trail, recorded_audit_events
from fae.replay.fold import Exchange
from fae.tasks.write_targets import WriteTarget
from fae.store import events as ev

# Actors that are the evaluation itself: their reads are the check, not an exposure.
OWN_ACTORS = ("agent", "harness", "verifier")


@dataclass(frozen=True)
class Window:
    """From the baseline (after seeding) to the read-back that checked the record."""

    start_seq: int
    readback_seq: int
    readback_at: float | None
    readback_version: str | None


RecordVersion = tuple[str, "dict[str, Any] | None", int | None]  # (version id, resource or None, seq)


def matches(resource: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Every path selects the wanted value: a plain value compared as text (case-sensitive), a
    matcher mapping (``{refs: [..]}``, ``{coding: "system|code"}``, ...) as a task's check applies it."""
    from fae.tasks.checks import match, values

    if resource is None:
        return False
    for path, value in wanted.items():
        found = values(resource, path)
        if isinstance(value, Mapping):
            if match(found, value) is not None:
                return False
        elif str(value) not in [str(v) for v in found]:
            return False
    return True


def verify(target: WriteTarget, trail: Trail, window: Window, versions: Callable[[str], list[RecordVersion]],
           final: Callable[[str, str], dict[str, Any] | None], same_type: list[dict[str, Any]],
           rules: Mapping[str, Any]) -> Verdict:
    """The verdict for one target, from a trail, a window, version histories and the state at read-back."""
    accept = bool(rules["accept_corrections"])
    settle_s = float(rules["settle_s"])
    in_window = [a for a in trail.accesses if window.start_seq < a.seq <= window.readback_seq]
    writes = [a for a in in_window if a.kind == "write"]
    agent_writes = [a for a in writes if a.actor == "agent"]
    evidence: dict[str, Any] = {"source": trail.source, "corrected": False, "settle_s": settle_s}

    if trail.untimed and any(window.start_seq < s <= window.readback_seq for s in trail.untimed):
        evidence["untimed_exchanges"] = [s for s in trail.untimed if window.start_seq < s <= window.readback_seq]
        return Verdict("unreadable", None, evidence)

    # Which record: the one to update, or the agent's first create of the type.
    if target.action == "update":
        ref = f"{target.resource_type}/{target.record_id}"
    else:
        creates = [a for a in agent_writes if a.how == "create" and a.ref.startswith(target.resource_type + "/")]
        if not creates:
            evidence["problems"] = ["no_record_created"]
            return Verdict("needs_review", False, evidence)
        ref = creates[0].ref
    record_type, record_id = ref.split("/", 1)
    to_record = [a for a in writes if a.ref == ref]
    after_check = [a for a in trail.accesses if a.kind == "write" and a.ref == ref and a.seq > window.readback_seq]
    history = [v for v in versions(ref) if v[2] is None or v[2] <= window.readback_seq]
    baseline = [v for v in history if v[2] is None or v[2] <= window.start_seq]
    window_versions = [v for v in history if v[2] is not None and v[2] > window.start_seq]
    at_check = final(record_type, record_id)
    evidence.update({
        "record": ref,
        "writes_to_record": [{"seq": a.seq, "actor": a.actor, "op": a.how, "version": a.version, "at": a.at}
                             for a in to_record],
        "versions": [v[0] for v in window_versions],
        "read_back": {"seq": window.readback_seq, "version": window.readback_version},
    })
    problems: list[str] = []

    # the older rules, in both settings
    if not matches(at_check, target.expected):
        problems.append("final_values_wrong")
    if not matches(at_check, target.identity):
        problems.append("wrong_person")
    others = sorted({a.ref for a in agent_writes if a.ref != ref})
    if others:
        problems.append("other_record_written")
        evidence["other_records_written"] = others
    twins = sorted(f"{r['resourceType']}/{r['id']}" for r in same_type
                   if r.get("id") != record_id and matches(r, target.identity))
    if twins:
        problems.append("same_person_elsewhere")
        evidence["same_person_records"] = twins
    if after_check:
        problems.append("written_after_check")
        evidence["writes_after_check"] = [{"seq": a.seq, "actor": a.actor, "op": a.how} for a in after_check]
    base_version = int(baseline[-1][0]) if baseline and baseline[-1][0].isdigit() else 0
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
            if any(not matches(v[1], target.identity) for v in window_versions if v[1] is not None):
                problems.append("person_changed")
            first = to_record[0].seq
            exposed = [a for a in in_window if a.kind == "read" and a.ref == ref and a.seq >= first
                       and a.seq < window.readback_seq and a.actor not in OWN_ACTORS]
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
                if gap < settle_s:
                    problems.append("read_back_before_settling")
    elif not to_record:
        problems.append("record_not_written")

    evidence["problems"] = problems
    if problems:
        return Verdict("needs_review", False, evidence)
    return Verdict("created_verified" if first_op == "create" else "updated_verified", True, evidence)


def target_for(task_id: str, variation: int) -> WriteTarget | None:
    """The write a task's variation asks for: a write-verification scenario's, or a suite write task's
    single record (``fae.tasks.write_targets``)."""
    from fae.tasks.scenarios import scenario_target
    from fae.tasks.write_targets import suite_target

    return scenario_target(task_id, variation) or suite_target(task_id, variation)


def _no_target_reason(ctx: RunContext) -> str:
    from fae.tasks.write_targets import not_covered

    found = ctx.task
    if found is None:
        return f"task {ctx.run.task_id!r} names no record to verify"
    task, rendered = found
    return f"task {ctx.run.task_id!r} names no single record to verify: {not_covered(rendered.check_spec, task.writes)}"


def proxy_window(ctx: RunContext, target: WriteTarget) -> Window | None:
    """Baseline: the sandbox seeded. Read-back: the verifier's last read of the record, else the capture."""
    seeded = ctx.run.first(ev.SandboxSeeded)
    if seeded is None or ctx.captured is None:
        return None
    capture_seq = ctx.captured[0]
    reads = [x for x in ctx.exchanges if x.actor == "verifier" and x.ok and x.interaction in ("read", "vread")
             and x.resource_type == target.resource_type and x.seq <= capture_seq]
    if reads:
        chosen = reads[-1]
        return Window(seeded.seq, chosen.seq, chosen.started_at, chosen.version)
    capture = _capture_read(ctx)
    if capture is None:
        return None
    return Window(seeded.seq, capture_seq, capture.started_at, None)


def _capture_read(ctx: RunContext) -> Exchange | None:
    """The harness's state capture read: its last search before ``StateCaptured``."""
    if ctx.captured is None:
        return None
    captures = [x for x in ctx.exchanges if x.actor == "harness" and x.seq < ctx.captured[0]
                and x.interaction.startswith("search")]
    return captures[-1] if captures else None


EVIDENCE = ("proxy", "trail")


@judge("ensure_record",
       accept_corrections=Rule(True, "a create followed by the agent's own fixes may pass (see conditions)"),
       settle_s=Rule(1.0, "seconds the read-back must wait after the last write; corrections need >= 1",
                     minimum=0.0),
       evidence=Rule("proxy", "whose record of reads and writes: proxy (the proxy log) or trail (the "
                              "server's AuditEvents, recorded with --audit-events)"))
def ensure_record_judge(rules: dict) -> JudgeFn:
    """Verify the one record the agent was to write, from the proxy log's or the server's trail and the fold."""
    if rules["evidence"] not in EVIDENCE:
        raise JudgeError(f"rule evidence of judge 'ensure_record' is one of {', '.join(EVIDENCE)}, "
                         f"got {rules['evidence']!r}")

    def run(ctx: RunContext) -> Verdict:
        target = target_for(ctx.run.task_id, ctx.run.variation)
        if target is None:
            return Verdict("not_applicable", None, {"reason": _no_target_reason(ctx)})
        if rules["evidence"] == "trail":
            return trail_verdict(ctx, target, rules)
        window = proxy_window(ctx, target)
        if window is None:
            return Verdict("unreadable", None, {"reason": "the run has no seed or no read-back to bound the window"})
        fold = ctx.full_fold
        trail = proxy_trail(ctx.exchanges, fold)
        if fold.problems:
            return Verdict("unreadable", None, {"reason": "write bodies the fold cannot read",
                                                "fold_problems": fold.problems})
        at_check = ctx.fold if window.readback_seq >= (ctx.captured[0] if ctx.captured else 0) else \
            _fold_at(ctx, window.readback_seq)
        if window.readback_version is None:
            record = _record_ref(trail, target, window)
            if record:
                captured = {(r.get("resourceType"), r.get("id")): r for r in ctx.captured[1]} if ctx.captured else {}
                found = captured.get(tuple(record.split("/", 1)))
                version = (found or {}).get("meta", {}).get("versionId")
                window = Window(window.start_seq, window.readback_seq, window.readback_at,
                                str(version) if version is not None else None)

        def versions(ref: str) -> list[RecordVersion]:
            kind, rid = ref.split("/", 1)
            return [(v.version_id, v.resource, v.seq) for v in fold.versions(kind, rid)]

        return verify(target, trail, window, versions, at_check.read, at_check.resources(target.resource_type),
                      rules)

    return run


def _fold_at(ctx: RunContext, seq: int):
    from fae.replay.fold import fold_state

    return fold_state(ctx.run, seq, exchanges=ctx.exchanges)


def _record_ref(trail: Trail, target: WriteTarget, window: Window) -> str | None:
    if target.action == "update":
        return f"{target.resource_type}/{target.record_id}"
    for access in trail.accesses:
        if (access.kind == "write" and access.actor == "agent" and access.how == "create"
                and window.start_seq < access.seq <= window.readback_seq
                and access.ref.startswith(target.resource_type + "/")):
            return access.ref
    return None




def trail_verdict(ctx: RunContext, target: WriteTarget, rules: Mapping[str, Any]) -> Verdict:
    """The verdict from the server's AuditEvent trail as the harness read it into the log.

    Who read and wrote what, and when, comes from the trail alone (the harness's and setup's
    own entries left out); what each version said comes from the fold, matched by version id,
    as a ``_history`` read would give it; the record at a capture read-back is the capture's.
    """
    recorded = recorded_audit_events(ctx.run)
    if recorded is None:
        return Verdict("unreadable", None, {
            "source": "trail", "reason": "no trail recorded: the run holds no read of the server's "
                                         "AuditEvents (record with --audit-events)"})
    if recorded.unreadable:
        return Verdict("unreadable", None, {"source": "trail", "reason": "AuditEvent pages that cannot be parsed",
                                            "trail_reads": list(recorded.unreadable)})
    fold = ctx.full_fold
    if fold.problems:
        return Verdict("unreadable", None, {"source": "trail", "reason": "write bodies the fold cannot read",
                                            "fold_problems": fold.problems})
    trail = audit_trail(recorded.audit_events, leave_out=HARNESS_IDENTITIES)
    window = trail_window(ctx, trail, target)
    if window is None:
        return Verdict("unreadable", None, {"source": "trail",
                                            "reason": "the run has no seed or no read-back to bound the window"})
    captured = {(r.get("resourceType"), r.get("id")): r for r in ctx.captured[1]} if ctx.captured else {}
    at_capture = window.readback_seq > len(trail.accesses)
    seeded = ctx.run.first(ev.SandboxSeeded)
    seed_seq = seeded.seq if seeded else 0

    def versions(ref: str) -> list[RecordVersion]:
        kind, rid = ref.split("/", 1)
        folded = fold.versions(kind, rid)
        bodies = {v.version_id: v.resource for v in folded}
        before = [(v.version_id, v.resource, None) for v in folded if v.seq is None or v.seq <= seed_seq]
        written = [(a.version or "?", bodies.get(a.version or ""), a.seq) for a in trail.accesses
                   if a.kind == "write" and a.ref == ref]
        return before + written

    def final(kind: str, rid: str) -> dict[str, Any] | None:
        if at_capture or window.readback_version is None:
            return captured.get((kind, rid))
        return next((v.resource for v in fold.versions(kind, rid) if v.version_id == window.readback_version), None)

    same_type = [r for (kind, _), r in captured.items() if kind == target.resource_type]
    verdict = verify(target, trail, window, versions, final, same_type, rules)
    verdict.evidence["audit_events"] = len(recorded.audit_events)
    verdict.evidence["trail_reads"] = list(recorded.seqs)
    return verdict


def trail_window(ctx: RunContext, trail: Trail, target: WriteTarget) -> Window | None:
    """The window over the trail: from its start (seeding is not in it) to the verifier's last read of
    the record's type, else to the harness's capture, after every audited access, at the capture's time."""
    if ctx.run.first(ev.SandboxSeeded) is None or ctx.captured is None:
        return None
    reads = [a for a in trail.accesses if a.actor == "verifier" and a.kind == "read"
             and a.ref.startswith(target.resource_type + "/")]
    if reads:
        chosen = reads[-1]
        return Window(0, chosen.seq, chosen.at, chosen.version)
    capture = _capture_read(ctx)
    if capture is None:
        return None
    after_all = len(trail.accesses) + 1
    record = _record_ref(trail, target, Window(0, after_all, capture.started_at, None))
    found = next((r for r in ctx.captured[1] if record and f"{r.get('resourceType')}/{r.get('id')}" == record), None)
    version = (found or {}).get("meta", {}).get("versionId")
    return Window(0, after_all, capture.started_at, str(version) if version is not None else None)
