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
from fae.judge.trail import Access, Trail
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
SERVER_PROBLEMS = ("missing_at_read_back", "differs_at_read_back", "missing_after_check", "differs_after_check")
"""What the server's answers can say against the fold, in the order a verdict lists them (read-back first)."""


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


@dataclass
class Case:
    """What every rule of ``verify`` reads about one target, worked out once; ``evidence`` is the verdict's."""

    target: WriteTarget
    trail: Trail
    window: Window
    ref: str
    record_id: str
    to_record: list[Access]
    after_check: list[Access]
    window_versions: list[RecordVersion]
    at_check: dict[str, Any] | None
    server: list[dict[str, Any]]
    others: list[str]
    twins: list[str]
    server_count: int | None
    evidence: dict[str, Any]

    @property
    def first_op(self) -> str:
        return "create" if self.target.action == "create" else "update"


Problem = Callable[[Case], dict[str, Any] | None]
"""A named rule of ``verify``: None where the record passes it, else the evidence it adds (perhaps none)."""


def _values_checked(case: Case) -> bool:
    """The fold's values are judged unless the server did not hold the record at the read-back."""
    return not any(d["at"] == "read_back" and d["difference"] == "missing_on_server" for d in case.server)


def _server_said(problem: str) -> Problem:
    return lambda case: {} if any(server_problem(d) == problem for d in case.server) else None


def _unless(holds: bool, evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
    return None if holds else (evidence or {})


RECORD_RULES: tuple[tuple[str, Problem], ...] = (
    (
        "final_values_wrong",
        lambda c: (
            None
            if not _values_checked(c) or matches(c.at_check, c.target.expected)
            else {"wrong_values": mismatches(c.at_check, c.target.expected)}
        ),
    ),
    (
        "wrong_person",
        lambda c: (
            None
            if not _values_checked(c) or matches(c.at_check, c.target.identity)
            else {"wrong_identity": mismatches(c.at_check, c.target.identity)}
        ),
    ),
    *((name, _server_said(name)) for name in SERVER_PROBLEMS),
    ("other_record_written", lambda c: _unless(not c.others, {"other_records_written": c.others})),
    ("same_person_elsewhere", lambda c: _unless(not c.twins, {"same_person_records": c.twins})),
    (
        "written_after_check",
        lambda c: _unless(
            not c.after_check,
            {"writes_after_check": [{"seq": a.seq, "actor": a.actor, "op": a.how} for a in c.after_check]},
        ),
    ),
    (
        "version_count_mismatch",
        lambda c: _unless(c.server_count is None or c.server_count == len(c.to_record)),
    ),
)
"""Rules every target is held to, in the order their problems are listed."""

STRICT_RULES: tuple[tuple[str, Problem], ...] = (
    ("changed_after_create", lambda c: _unless(c.first_op != "create")),
    ("changed_after_update", lambda c: _unless(c.first_op != "update")),
)
"""A record written more than once, or by another actor, when corrections are not accepted. Exactly one of
the two fires (a target is created or updated), so their order is free: swapping them changes no verdict."""


def _exposed(case: Case) -> list[Access]:
    """Reads of the record by anyone but the evaluation, from its first write until the read-back."""
    first = case.to_record[0].seq
    window = case.window
    return [
        a
        for a in case.trail.accesses
        if window.start_seq < a.seq < window.readback_seq
        and a.kind == "read"
        and a.ref == case.ref
        and a.seq >= first
        and a.actor not in OWN_ACTORS
    ]


def _settled(case: Case) -> float | None:
    """Seconds from the record's last write to the read-back, where both are timed."""
    last_at = case.to_record[-1].at
    if case.window.readback_at is None or last_at is None:
        return None
    return round(case.window.readback_at - last_at, 3)


CORRECTION_RULES: tuple[tuple[str, Problem], ...] = (
    (
        "not_one_write_then_updates",
        lambda c: _unless(
            [a.how for a in c.to_record][:1] == [c.first_op] and all(a.how == "update" for a in c.to_record[1:])
        ),
    ),
    (
        "written_by_other_actor",
        lambda c: _unless(
            all(a.actor == "agent" for a in c.to_record),
            {"other_writers": sorted({a.actor for a in c.to_record if a.actor != "agent"})},
        ),
    ),
    ("untimed_write", lambda c: _unless(all(a.at is not None for a in c.to_record))),
    (
        "person_changed",
        lambda c: _unless(
            all(matches(v.resource, c.target.identity) for v in c.window_versions if v.resource is not None)
        ),
    ),
    (
        "read_by_other_actor",
        lambda c: _unless(
            not (exposed := _exposed(c)),
            {"other_actor_reads": [{"seq": a.seq, "actor": a.actor, "how": a.how} for a in exposed]},
        ),
    ),
    ("no_read_heartbeat", lambda c: _unless(c.trail.reads_recorded)),
)
"""A record corrected after its first write, when corrections are accepted: the conditions that make it safe
(with ``SETTLE_RULES`` after them)."""

SettleRule = Callable[["Findings", float], bool]
"""A rule that reads the ``settle_s`` asked: true where the record breaks it."""

SETTLE_RULES: tuple[tuple[str, SettleRule], ...] = (
    ("settle_too_short", lambda f, settle_s: not settle_s >= 1),
    ("read_back_before_settling", lambda f, settle_s: f.settled is not None and f.settled < settle_s),
)
"""The last conditions on a corrected record: the only rules that read a rule's value (``settle_s``)."""

RULE_NAMES: tuple[str, ...] = (
    "no_record_created",
    *(name for name, _ in RECORD_RULES + STRICT_RULES + CORRECTION_RULES + SETTLE_RULES),
    "record_not_written",
)
"""Every problem ``verify`` can name: the codes in a verdict's ``problems`` (``fae.report.reasons`` words each)."""


class Findings(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """What ``find`` concludes of one target under no rule: ``decide`` makes the verdict of it under a rule set.

    ``evidence`` is the verdict's before any rule is applied (its ``settle_s``, where it has one, is filled in
    by ``decide``); ``outcome`` is set where the verdict was decided before any rule (an untimed exchange, no
    record created); ``found`` holds each rule-free rule that fires, by name, with the evidence it adds;
    ``extra`` is evidence the caller adds after the verdict's problems. A Findings is plain data: it is what the
    log stores (``fae.judge.facts``), so ``decide`` over a stored one gives the verdict ``verify`` gives.
    """

    evidence: dict[str, Any]
    outcome: str | None = None
    record: str | None = None
    create: bool = True
    corrected: bool = False
    written: bool = True
    settled: float | None = None
    capture_settle_s: float | None = None
    found: dict[str, dict[str, Any]] = {}
    extra: dict[str, Any] = {}


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
    on the fold's values. The problems are the named rules above, applied in order: ``find`` then ``decide``."""
    return decide(find(target, trail, window, versions, final, same_type, record, allowed, server), rules)


def find(
    target: WriteTarget,
    trail: Trail,
    window: Window,
    versions: Callable[[str], list[RecordVersion]],
    final: Callable[[str, str], dict[str, Any] | None],
    same_type: list[dict[str, Any]],
    record: str | None = None,
    allowed: Collection[str] = (),
    server: Sequence[Mapping[str, Any]] = (),
) -> Findings:
    """What ``verify`` finds of one target before it reads a rule: every rule-free rule applied."""
    evidence: dict[str, Any] = {"source": trail.source, "corrected": False, "settle_s": None}

    if trail.untimed and any(window.start_seq < s <= window.readback_seq for s in trail.untimed):
        evidence["untimed_exchanges"] = [s for s in trail.untimed if window.start_seq < s <= window.readback_seq]
        return Findings(evidence, outcome="unreadable")

    # Which record: the one to update, or the agent's create that is the target's person or thing.
    ref = record or record_under_check(target, agent_creates(trail, window.start_seq, window.readback_seq), final)
    if ref is None:
        evidence["problems"] = ["no_record_created"]
        return Findings(evidence, outcome="needs_review")
    case = _case(target, trail, window, versions, final, same_type, ref, allowed, server, evidence)
    corrected = len(case.to_record) > 1 or any(a.actor != "agent" for a in case.to_record)
    table = RECORD_RULES + (STRICT_RULES + CORRECTION_RULES if corrected else ())
    found = {name: hit for name, problem in table if (hit := problem(case)) is not None}
    return Findings(
        case.evidence,
        record=ref,
        create=case.first_op == "create",
        corrected=corrected,
        written=bool(case.to_record),
        settled=_settled(case) if case.to_record else None,
        capture_settle_s=window.capture_settle_s,
        found=found,
    )


def decide(findings: Findings, rules: Mapping[str, Any]) -> Verdict:
    """The verdict ``findings`` make under ``rules`` (``accept_corrections``, ``settle_s``)."""
    accept = bool(rules["accept_corrections"])
    settle_s = float(rules["settle_s"])
    evidence = dict(findings.evidence)
    if "settle_s" in evidence:
        evidence["settle_s"] = settle_s
    if findings.outcome is not None:
        evidence.update(findings.extra)
        return Verdict(findings.outcome, False if findings.outcome == "needs_review" else None, evidence)
    names = [name for name, _ in RECORD_RULES]
    settle: tuple[tuple[str, SettleRule], ...] = ()
    if findings.corrected:
        evidence["corrected"] = True
        names += [name for name, _ in (CORRECTION_RULES if accept else STRICT_RULES)]
        if accept:
            settle = SETTLE_RULES
            if findings.settled is not None:
                evidence["settled_s"] = findings.settled
    problems: list[str] = []
    for name in names:
        hit = findings.found.get(name)
        if hit is not None:
            problems.append(name)
            evidence.update(hit)
    problems += [name for name, broken in settle if broken(findings, settle_s)]
    if settle and (late := _settle_unjudgeable(findings, settle_s)) is not None:
        evidence["reason"] = late
        evidence.update(findings.extra)
        return Verdict("unreadable", None, evidence)
    if not findings.corrected and not findings.written:
        problems.append("record_not_written")
    evidence["problems"] = problems
    evidence.update(findings.extra)
    if problems:
        return Verdict("needs_review", False, evidence)
    return Verdict("created_verified" if findings.create else "updated_verified", True, evidence)


def _case(
    target: WriteTarget,
    trail: Trail,
    window: Window,
    versions: Callable[[str], list[RecordVersion]],
    final: Callable[[str, str], dict[str, Any] | None],
    same_type: list[dict[str, Any]],
    ref: str,
    allowed: Collection[str],
    server: Sequence[Mapping[str, Any]],
    evidence: dict[str, Any],
) -> Case:
    """The facts of one target's record that the rules read, and ``evidence`` with what every verdict on it shows."""
    record_type, record_id = ref.split("/", 1)
    all_writes = [a for a in trail.accesses if a.kind == "write"]  # reads are most of a trail: one pass over it
    writes = [a for a in all_writes if window.start_seq < a.seq <= window.readback_seq]
    to_record = [a for a in writes if a.ref == ref]
    history = [v for v in versions(ref) if v.seq is None or v.seq <= window.readback_seq]
    baseline = [v for v in history if v.seq is None or v.seq <= window.start_seq]
    base_version = int(baseline[-1].version_id) if baseline and baseline[-1].version_id.isdigit() else 0
    server_count = None
    if window.readback_version and window.readback_version.isdigit():
        server_count = int(window.readback_version) - base_version
    window_versions = [v for v in history if v.seq is not None and v.seq > window.start_seq]
    differences = [dict(d) for d in server]
    evidence = {
        **evidence,
        "record": ref,
        "writes_to_record": [
            {"seq": a.seq, "actor": a.actor, "op": a.how, "version": a.version, "at": a.at} for a in to_record
        ],
        "versions": [v.version_id for v in window_versions],
        "read_back": {"seq": window.readback_seq, "version": window.readback_version},
        "server_versions_in_window": server_count,
    }
    if differences:
        evidence["server_vs_fold"] = differences
    return Case(
        target=target,
        trail=trail,
        window=window,
        ref=ref,
        record_id=record_id,
        to_record=to_record,
        after_check=[a for a in all_writes if a.ref == ref and a.seq > window.readback_seq],
        window_versions=window_versions,
        at_check=final(record_type, record_id),
        server=differences,
        others=sorted({a.ref for a in writes if a.actor == "agent" and a.ref != ref and a.ref not in allowed}),
        twins=sorted(
            f"{r['resourceType']}/{r['id']}"
            for r in same_type
            if r.get("id") != record_id and matches(r, target.identity)
        ),
        server_count=server_count,
        evidence=evidence,
    )


def _settle_unjudgeable(findings: Findings, settle_s: float) -> str | None:
    """Why a settle rule cannot be judged on this run: its read-back was the harness's capture, which waited less
    than the rule asks (the run was recorded with a shorter --settle); None when it can."""
    gap, recorded = findings.settled, findings.capture_settle_s
    if gap is None or gap >= settle_s or recorded is None or recorded >= settle_s:
        return None
    return (
        f"the run was recorded with --settle {recorded:g}: its read-back came {gap:g} s "
        f"after the last write, so settle_s={settle_s:g} cannot be judged; record with "
        f"--settle {settle_s:g} or more"
    )
