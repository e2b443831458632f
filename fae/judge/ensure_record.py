"""``ensure_record``: did the agent write the records it was asked to, right, and safely?

Evidence is the access trail (every read and write of every actor, with its
time; reads in searches, compartments, operations and batch entries included)
and each record's version history. A task names one target per record
(``fae.tasks.targets``); the verdict over several is verified only if every
target's is. The record under check is the one to update, or the agent's create
that is the target's person or thing; the read-back is the verifier's last read
of that record, else the harness's capture (taken ``settle_s`` after the last
write, ``fae.harness.settle``). Outcomes:

- ``created_verified`` / ``updated_verified``: one write by the agent, right, and
  nothing else touched; or, with ``accept_corrections``, a create (or update)
  followed by the agent's own fixes when every condition below holds.
- ``needs_review``: anything else; ``problems`` in the evidence say why.
- ``unreadable``: the trail has an exchange with no time or a write body that
  cannot be read, or the recording waited less than the ``settle_s`` asked, so
  nothing can be concluded.

Rules that always hold (the "older rules"): the record exists at the read-back
with the expected values and is the right person, as the server returned it;
what the server returned of it at the read-back, and in the capture after a
verifier's read-back, is what the fold predicts (``fae.judge.readback``); the agent wrote no other
record in the window (the task's other targets aside); no other record of the
type is the same person; nothing
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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
import msgspec.structs

from fae.errors import JudgeError
from fae.judge.context import RunContext
from fae.judge.readback import SERVER_READS, ServerRead, as_returned, capture_read, server_differences, verifier_reads
from fae.judge.reads import received_once
from fae.judge.registry import FactsDef, JudgeFn, Rule, Verdict, register_facts, register_judge
from fae.judge.trail import HARNESS_IDENTITIES, Trail, audit_trail, proxy_trail, recorded_audit_events
from fae.judge.verify import (
    OWN_ACTORS,
    Findings,
    RecordVersion,
    Window,
    agent_creates,
    decide,
    find,
    matches,
    record_under_check,
    same_identity,
    verify,
)
from fae.replay.fold import FhirExchange, fold_state
from fae.store import events as ev
from fae.tasks.write_targets import WriteTarget, not_covered, ordered_targets, resolve_created
from fae.util.utf8 import utf8_json

__all__ = ["OWN_ACTORS", "Window", "WriteTarget", "matches", "verify", "ensure_record_judge"]


def _no_target_reason(ctx: RunContext) -> str:
    found = ctx.task
    if found is None:
        return (
            f"task {ctx.run.task_id!r} names no record to verify (a scenario task's file must be in a "
            f"directory on FAE_SCENARIOS_PATH)"
        )
    task, rendered = found
    return f"task {ctx.run.task_id!r} names no record to verify: {not_covered(rendered.check_spec, task.writes)}"


def combine(judged: list[tuple[bool, Verdict]]) -> Verdict:
    """One verdict over several targets (each with whether it is a create): verified only if every target is;
    unreadable if any is."""
    if len(judged) == 1:
        return judged[0][1]
    problems: list[str] = []
    for _, verdict in judged:
        problems.extend(p for p in verdict.evidence.get("problems", []) if p not in problems)
    evidence: dict[str, Any] = {
        "source": judged[0][1].evidence.get("source"),
        "problems": problems,
        "corrected": any(v.evidence.get("corrected") for _, v in judged),
        "targets": [{"outcome": v.outcome, **v.evidence} for _, v in judged],
    }
    if any(v.outcome == "unreadable" for _, v in judged):
        return Verdict("unreadable", None, evidence)
    if all(v.passed for _, v in judged):
        creates = any(create for create, _ in judged)
        return Verdict("created_verified" if creates else "updated_verified", True, evidence)
    return Verdict("needs_review", False, evidence)


class RecordFacts(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """What ``ensure_record`` finds of a run under no rule: each target's findings (with whether the target is a
    create), or why no target can be judged. ``decide_run`` makes the verdict under a rule set; the log stores
    these per run (``fae.judge.facts``), so a rejudge under new rules need not read the run again."""

    targets: list[Findings] = []
    creates: list[bool] = []
    not_applicable: str | None = None


def decide_run(facts: RecordFacts, rules: Mapping[str, Any]) -> Verdict:
    """The verdict a run's findings make under ``rules``."""
    if facts.not_applicable is not None:
        return Verdict("not_applicable", None, {"reason": facts.not_applicable})
    if not facts.targets:
        raise ValueError("findings of ensure_record name no target")
    return combine([(create, decide(found, rules)) for create, found in zip(facts.creates, facts.targets, strict=True)])


def proxy_window(ctx: RunContext, record: str | None) -> tuple[Window, ServerRead | None] | None:
    """Baseline: the sandbox seeded. Read-back: the verifier's last read of the record under check (by id,
    search or batch entry, or a read by id the server answered "not found"), else the harness's capture.
    Returns the window and that verifier's read (None: the capture is the read-back)."""
    seeded = ctx.run.first(ev.SandboxSeeded)
    if seeded is None or ctx.captured is None:
        return None
    found = verifier_reads(ctx, record) if record is not None else []
    if found:
        chosen = found[-1]
        return Window(seeded.seq, chosen.seq, chosen.at, chosen.version), chosen
    capture = _capture_read(ctx)
    if capture is None:
        return None
    return Window(seeded.seq, ctx.captured[0], capture.started_at, None, recorded_settle_s(ctx)), None


def recorded_settle_s(ctx: RunContext) -> float:
    """How long the harness waited after the agent's last write before its capture (0 for runs recorded
    before it waited)."""
    started = ctx.run.first(ev.RunStarted)
    found = started.event.settle_s if started is not None and isinstance(started.event, ev.RunStarted) else None
    return float(found) if found is not None else 0.0


def _capture_read(ctx: RunContext) -> FhirExchange | None:
    """The harness's state capture read: its last search before ``StateCaptured``."""
    if ctx.captured is None:
        return None
    captures = [
        x
        for x in ctx.exchanges
        if x.actor == "harness" and x.seq < ctx.captured[0] and x.interaction.startswith("search")
    ]
    return captures[-1] if captures else None


EVIDENCE = ("proxy", "trail")


@register_judge(
    "ensure_record",
    accept_corrections=Rule(True, "a create followed by the agent's own fixes may pass (see conditions)"),
    settle_s=Rule(1.0, "seconds the read-back must wait after the last write; corrections need >= 1", minimum=0.0),
    evidence=Rule(
        "proxy",
        "whose record of reads and writes: proxy (the proxy log) or trail (the "
        "server's AuditEvents, recorded with --audit-events)",
    ),
)
def ensure_record_judge(rules: dict) -> JudgeFn:
    """Verify the one record the agent was to write, from the proxy log's or the server's trail and the fold."""
    return ensure_record_fn(rules)


def ensure_record_fn(rules: Mapping[str, Any], compared: tuple[str, ...] = SERVER_READS) -> JudgeFn:
    """The judge over a rule set. ``compared`` names the server's answers compared with the fold (the
    read-back, the capture after the check); the registered judge compares both, and only the scenario
    table's verifier mutants (``fae.judge.verifier_mutants``) leave any out."""
    found, decided = _found_text(rules, compared), _decided(rules)
    return lambda ctx: decided(found(ctx))


def _found_text(rules: Mapping[str, Any], compared: tuple[str, ...] = SERVER_READS) -> Callable[[RunContext], str]:
    """What the judge finds of a run, as the JSON text the log keeps."""
    found = record_facts(rules, compared)
    return lambda ctx: facts_text(found(ctx))


def facts_text(facts: RecordFacts) -> str:
    """Findings as the log keeps them: JSON, UTF-8. A lone surrogate (a hostile body's ``"\\ud800"``) cannot be
    UTF-8 and becomes U+FFFD; a number that is no JSON number (infinity, NaN) becomes null."""
    return utf8_json(facts, _FACTS_JSON).decode()


def _decided(rules: Mapping[str, Any]) -> Callable[[str], Verdict]:
    """The verdict a run's findings, as the log keeps them, make under ``rules``."""
    return lambda text: decide_run(_READ_FACTS.decode(text), rules)


_FACTS_JSON = msgspec.json.Encoder()
_READ_FACTS = msgspec.json.Decoder(RecordFacts)
register_facts(
    "ensure_record",
    FactsDef(inputs=lambda rules: f"evidence={rules['evidence']}", find=_found_text, decide=_decided),
)


def record_facts(
    rules: Mapping[str, Any], compared: tuple[str, ...] = SERVER_READS
) -> Callable[[RunContext], RecordFacts]:
    """What the judge finds of a run before it applies ``accept_corrections`` and ``settle_s``: only the rule
    ``evidence`` (whose trail) changes it."""
    if rules["evidence"] not in EVIDENCE:
        raise JudgeError(
            f"rule evidence of judge 'ensure_record' is one of {', '.join(EVIDENCE)}, got {rules['evidence']!r}"
        )
    one = trail_findings if rules["evidence"] == "trail" else proxy_findings

    def run(ctx: RunContext) -> RecordFacts:
        targets = ctx.targets
        if not targets:
            return RecordFacts(not_applicable=_no_target_reason(ctx))
        created: dict[str, str] = {}
        chosen: list[str] = []
        judged: list[tuple[WriteTarget, Findings]] = []
        judged_with: list[list[str]] = []  # the other records each target was judged with
        for target in ordered_targets(targets):
            target = resolve_created(target, created)
            found = one(ctx, target, chosen, compared)
            if found.outcome == "unreadable" and found.record is None:
                return RecordFacts([found], [target.action == "create"])  # the run itself cannot be judged
            judged_with.append(list(chosen))
            if found.record:
                chosen.append(found.record)
                if target.action == "create":
                    created.setdefault(target.resource_type, found.record)
            judged.append((target, found))
        if len(judged) > 1:  # "another record written" spares the records the task asks for
            again = []
            for (target, found), before in zip(judged, judged_with, strict=True):
                others = [r for r in chosen if r != found.record]  # the same as before: the same findings
                again.append((target, found if others == before else one(ctx, target, others, compared)))
            judged = again
        return RecordFacts([f for _, f in judged], [t.action == "create" for t, _ in judged])

    return run


def proxy_findings(
    ctx: RunContext, target: WriteTarget, others: Sequence[str] = (), compared: tuple[str, ...] = SERVER_READS
) -> Findings:
    """One target from the proxy log; ``others`` are the records chosen for the task's other targets."""
    fold = ctx.full_fold
    if fold.problems:
        return Findings(
            {"reason": "write bodies the fold cannot read", "fold_problems": fold.problems}, outcome="unreadable"
        )
    key = ("ensure_record", "proxy_trail")
    if key not in ctx.memo:
        ctx.memo[key] = proxy_trail(ctx.exchanges, fold, received_once(ctx.memo, ctx.run))
    trail = ctx.memo[key]
    record = record_under_check(target, [r for r in agent_creates(trail) if r not in others], ctx.fold.read)
    bounded = proxy_window(ctx, record)
    if bounded is None:
        return Findings({"reason": "the run has no seed or no read-back to bound the window"}, outcome="unreadable")
    window, checked = bounded
    at_check = (
        ctx.fold
        if window.readback_seq >= (ctx.captured[0] if ctx.captured else 0)
        else _fold_at(ctx, window.readback_seq)
    )
    capture = capture_read(ctx, record) if record else None
    if window.readback_version is None and (checked is None or checked.found) and capture is not None:
        window = Window(
            window.start_seq, window.readback_seq, window.readback_at, capture.version, window.capture_settle_s
        )
    if (
        record
        and target.action == "create"
        and record not in agent_creates(trail, window.start_seq, window.readback_seq)
    ):
        record = None  # created after the read-back: as if not created

    def versions(ref: str) -> list[RecordVersion]:
        kind, rid = ref.split("/", 1)
        return [RecordVersion(v.version_id, v.resource, v.seq) for v in fold.versions(kind, rid)]

    same_type = same_identity(at_check, target.resource_type, target.identity)
    final = at_check.read
    server: list[dict[str, Any]] = []
    if record:
        server = server_differences(ctx, record, checked, compared, capture)
        if "read_back" in compared:  # the record at the check is what the server returned, not what the fold says
            final = as_returned(record, checked or capture, at_check.read)
    return find(target, trail, window, versions, final, same_type, record, allowed=others, server=server)


def _fold_at(ctx: RunContext, seq: int):
    return fold_state(ctx.run, seq, exchanges=ctx.exchanges)


def trail_findings(
    ctx: RunContext, target: WriteTarget, others: Sequence[str] = (), compared: tuple[str, ...] = SERVER_READS
) -> Findings:
    """The verdict from the server's AuditEvent trail as the harness read it into the log.

    Who read and wrote what, and when, comes from the trail alone (the harness's and setup's
    own entries left out); what each version said comes from the fold, matched by version id,
    as a ``_history`` read would give it; the record at the read-back is what the server returned
    (the bodies are the proxy log's: a trail keeps none), compared with the fold as the proxy's is.
    """
    recorded = recorded_audit_events(ctx.run)
    if recorded is None:
        return Findings(
            {
                "source": "trail",
                "reason": "no trail recorded: the run holds no read of the server's "
                "AuditEvents (record with --audit-events)",
            },
            outcome="unreadable",
        )
    if recorded.unreadable:
        return Findings(
            {
                "source": "trail",
                "reason": "AuditEvent pages that cannot be parsed",
                "trail_reads": list(recorded.unreadable),
            },
            outcome="unreadable",
        )
    fold = ctx.full_fold
    if fold.problems:
        return Findings(
            {"source": "trail", "reason": "write bodies the fold cannot read", "fold_problems": fold.problems},
            outcome="unreadable",
        )
    trail = audit_trail(recorded.audit_events, leave_out=HARNESS_IDENTITIES)
    bounded = trail_window(ctx, trail, target, others)
    if bounded is None:
        reason = "the run has no seed or no read-back to bound the window"
        return Findings({"source": "trail", "reason": reason}, outcome="unreadable")
    window, record = bounded
    captured = ctx.captured[1].by_key() if ctx.captured else {}
    at_capture = window.readback_seq > len(trail.accesses)
    seeded = ctx.run.first(ev.SandboxSeeded)
    seed_seq = seeded.seq if seeded else 0

    def versions(ref: str) -> list[RecordVersion]:
        kind, rid = ref.split("/", 1)
        folded = fold.versions(kind, rid)
        bodies = {v.version_id: v.resource for v in folded}
        before: list[RecordVersion] = [
            RecordVersion(v.version_id, v.resource, None) for v in folded if v.seq is None or v.seq <= seed_seq
        ]
        written = [
            RecordVersion(a.version or "?", bodies.get(a.version or ""), a.seq)
            for a in trail.accesses
            if a.kind == "write" and a.ref == ref
        ]
        return before + written

    def final(kind: str, rid: str) -> dict[str, Any] | None:
        if at_capture or window.readback_version is None:
            return captured.get((kind, rid))
        return next((v.resource for v in fold.versions(kind, rid) if v.version_id == window.readback_version), None)

    same_type = [r for (kind, _), r in captured.items() if kind == target.resource_type]
    server: list[dict[str, Any]] = []
    read_at_check: Callable[[str, str], dict[str, Any] | None] = final
    if record:
        found = [] if at_capture else verifier_reads(ctx, record)
        checked = found[-1] if found else None
        server = server_differences(ctx, record, checked, compared)
        if "read_back" in compared and checked is not None:
            read_at_check = as_returned(record, checked, final)
    findings = find(target, trail, window, versions, read_at_check, same_type, record, allowed=others, server=server)
    return msgspec.structs.replace(
        findings, extra={"audit_events": len(recorded.audit_events), "trail_reads": list(recorded.seqs)}
    )


def trail_window(
    ctx: RunContext, trail: Trail, target: WriteTarget, others: Sequence[str] = ()
) -> tuple[Window, str | None] | None:
    """The window over the trail and the record under check: from the trail's start (seeding is not in
    it) to the verifier's last read of the record, else to the harness's capture, after every audited
    access, at the capture's time."""
    if ctx.run.first(ev.SandboxSeeded) is None or ctx.captured is None:
        return None
    captured = {f"{r.get('resourceType')}/{r.get('id')}": r for r in ctx.captured[1]}
    record = record_under_check(
        target, [r for r in agent_creates(trail) if r not in others], lambda kind, rid: captured.get(f"{kind}/{rid}")
    )
    reads = [a for a in trail.accesses if a.actor == "verifier" and a.kind == "read" and a.ref == record]
    if reads:
        chosen = reads[-1]
        return Window(0, chosen.seq, chosen.at, chosen.version), record
    capture = _capture_read(ctx)
    if capture is None:
        return None
    version = (captured.get(record or "") or {}).get("meta", {}).get("versionId")
    return Window(
        0,
        len(trail.accesses) + 1,
        capture.started_at,
        str(version) if version is not None else None,
        recorded_settle_s(ctx),
    ), record
