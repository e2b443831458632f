"""Mutation agents: the gold agent with one mistake each, which a strict (or light) validator must catch.

Most mutants are plans played against the embedded server (an agent that wrote nothing, wrote
the wrong record, also wrote something else, wrote twice, or worked on the wrong patient). The
rest are outcomes of the gold run changed after the fact, where the mistake is about the
answer text alone (a hedged or listed answer, a near number), cannot be sent through a
validating server (a required element missing), or is a change of form the judge must see
through (an equivalent write-back, which must PASS).

Each mutant has a class (``kind``); the kill-rate table is printed per class.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import msgspec

from fae.plan import Plan
from fae.tasks import mutant_answers as worded
from fae.tasks import mutant_writes as writes
from fae.tasks.answer_checks import expected_ids
from fae.tasks.check_spec import AnswerCheck
from fae.tasks.model import Rendered
from fae.tasks.mutant_creates import outcome_mutants
from fae.tasks.state import MemoryState, bundle_resources

Outcome = tuple[str | None, MemoryState, frozenset[str]]
Alter = Callable[[str | None, MemoryState, frozenset[str]], Outcome]

MUST_PASS = ("equivalent-write-back", "equivalent-write-back-sent", "equivalent-create", "honest-wording")
"""Mutant classes that change only form: a validator that fails them is wrong."""


@dataclass(frozen=True)
class Mutant:
    """One faulty agent: a plan to play (None = the gold plan) and an optional change to its outcome."""

    name: str
    plan: Plan | None = None
    alter: Alter | None = None
    light_must_fail: bool = False

    @property
    def kind(self) -> str:
        return self.name.split(".")[0]

    @property
    def must_pass(self) -> bool:
        return self.kind in MUST_PASS


# ---------------------------------------------------------------- the variation's resources


def _seed(rendered: Rendered) -> list[dict[str, Any]]:
    return bundle_resources(rendered.seed_bundle)


def _seed_ids(rendered: Rendered) -> dict[str, list[str]]:
    by_type: dict[str, list[str]] = {}
    for resource in _seed(rendered):
        by_type.setdefault(resource["resourceType"], []).append(resource["id"])
    return by_type


def _mentioned(rendered: Rendered) -> set[str]:
    """Every id-looking string the variation's parameters or check spec mention."""
    text = json.dumps(rendered.params) + msgspec.json.encode(rendered.check_spec).decode()
    return set(re.findall(r"[a-z]+-[0-9a-f]{6}", text))


def _bystander(rendered: Rendered, kind: str = "Patient") -> str:
    mentioned = _mentioned(rendered)
    return next(i for i in _seed_ids(rendered)[kind] if i not in mentioned)


def _other_patient(rendered: Rendered) -> str:
    """The unmentioned patient most other seed resources point at (so a mix-up shows)."""
    mentioned = _mentioned(rendered)
    text = json.dumps(rendered.seed_bundle)
    counts = {pid: text.count(f"Patient/{pid}") for pid in _seed_ids(rendered)["Patient"] if pid not in mentioned}
    return max(sorted(counts), key=lambda pid: counts[pid])


def _refs_in(resource: dict[str, Any]) -> set[str]:
    return set(re.findall(r'"reference": "([^"]+)"', json.dumps(resource)))


def nearest_distractor(rendered: Rendered, ref: str) -> str | None:
    """The seed resource of the target's type most like it (same patient, same status,
    most shared references), not the target."""
    kind, _, rid = ref.partition("/")
    seed = {r["id"]: r for r in _seed(rendered) if r["resourceType"] == kind}
    target = seed.get(rid)
    others = sorted(i for i in seed if i != rid)
    if not others:
        return None
    if target is None:
        return f"{kind}/{others[0]}"
    mine = {r for r in _refs_in(target) if r.startswith("Patient/")}

    def likeness(i: str) -> tuple[bool, bool, int]:
        # The same patient's other record in the same state first (the later booked appointment).
        refs = _refs_in(seed[i])
        return bool(refs & mine), seed[i].get("status") == target.get("status"), len(refs & _refs_in(target))

    return f"{kind}/{max(others, key=likeness)}"


# ---------------------------------------------------------------- answers


def _replace_tag(answer: str | None, tag: str, value: str) -> str:
    pattern = re.compile(rf"(<\s*{tag}\s*>)(.*?)(<\s*/\s*{tag}\s*>)", re.IGNORECASE | re.DOTALL)
    return pattern.sub(lambda m: f"{m.group(1)}{value}{m.group(3)}", answer or "")


def _right_ref(rendered: Rendered, want: AnswerCheck, gold_answer: str | None, tag: str) -> str | None:
    """The ``Type/id`` an id-valued tag must name (for a created resource, what the gold answered)."""
    if want.updated is not None:
        return want.updated
    if want.created is not None:
        found = re.search(rf"<{tag}>(.*?)</{tag}>", gold_answer or "")
        return f"{want.created}/{found.group(1).strip()}" if found else None
    ids = _ids(want)
    if not ids:
        return None
    for kind, known in _seed_ids(rendered).items():
        if ids[0] in known:
            return f"{kind}/{ids[0]}"
    return None


def _ids(want: AnswerCheck) -> list[str]:
    """The ids an ``id`` or ``ids`` check wants (none for another kind)."""
    return expected_ids(str(want.id)) if want.id is not None else expected_ids(want.ids or [])


def _wrong_value(rendered: Rendered, tag: str, want: AnswerCheck) -> str:
    seed = _seed_ids(rendered)
    all_ids = [i for ids in seed.values() for i in ids]
    if want.count is not None:
        return str(int(want.count) + 1)
    if want.number is not None:
        return str(Decimal(str(want.number)) + 1)
    if want.term is not None:
        return next(t for t in want.among or [] if t != want.term)
    if want.words is not None:
        return "UNKNOWN"
    expected = _ids(want)
    if expected:
        prefix = expected[0].split("-")[0]
        others = [i for i in all_ids if i.startswith(prefix + "-") and i not in expected]
        # A list answer that misses one id, or a single answer naming a look-alike.
        return ", ".join(expected[1:]) if len(expected) > 1 else others[0]
    if want.created is not None or want.updated is not None:
        kind = want.created or str(want.updated).split("/")[0]
        taken = (want.updated or "/").split("/")[1]
        return next(i for i in seed.get(kind, []) + all_ids if i != taken)
    # Expected NONE: answer with a resource of the type the task is about.
    kind = rendered.meta.required_resources[-1]
    return seed.get(kind, all_ids)[0]


def _answer_mutants(rendered: Rendered, gold_answer: str | None) -> list[Mutant]:
    made: list[Mutant] = []
    for tag, want in rendered.check_spec.answer.items():
        wrong = _wrong_value(rendered, tag, want)
        right = re.search(rf"<{tag}>(.*?)</{tag}>", gold_answer or "", re.DOTALL)
        right_text = right.group(1).strip() if right else ""
        made.append(Mutant(f"wrong-answer.{tag}", alter=_with_tag(tag, wrong)))
        # Hedged: the right answer, then a contradicting one (or the other way round).
        made.append(
            Mutant(
                f"hedged-answer.{tag}",
                alter=_append(f" On reflection: <{tag}>{wrong}</{tag}>"),
                light_must_fail=True,
            )
        )
        made.append(
            Mutant(
                f"hedged-answer-first.{tag}",
                alter=_prepend(f"Maybe <{tag}>{wrong}</{tag}>, or else: "),
                light_must_fail=True,
            )
        )
        single = any(k is not None for k in (want.id, want.created, want.updated, want.term))
        if single and right_text and not (want.id is not None and not expected_ids(str(want.id))):
            candidates = _candidates(rendered, want, right_text)
            made.append(Mutant(f"candidate-list.{tag}", alter=_with_tag(tag, ", ".join(candidates))))
        if want.number is not None:
            target = Decimal(str(want.number))
            swapped = str(target)[::-1] if "." in str(target) else None
            made.append(Mutant(f"near-number.{tag}", alter=_with_tag(tag, f"{target + Decimal('0.1')} %")))
            if swapped and swapped != str(target):
                made.append(Mutant(f"near-number-digits.{tag}", alter=_with_tag(tag, swapped)))
        if want.count is not None:
            made.append(Mutant(f"near-number.{tag}", alter=_with_tag(tag, str(int(want.count) - 1))))
        right_ref = _right_ref(rendered, want, gold_answer, tag)
        if right_ref and any(k is not None for k in (want.id, want.ids, want.updated, want.created)):
            distractor = nearest_distractor(rendered, right_ref)
            if distractor:
                value = right_text.replace(right_ref.split("/")[1], distractor.split("/")[1])
                made.append(Mutant(f"distractor-id.{tag}", alter=_with_tag(tag, value)))
        # Read as words: the right value negated, or the prompt's answer format handed back (both modes must
        # fail); the right answer reworded (both must pass).
        for name, rewrite in [*worded.negated(tag, want, right_text), *worded.echoes(rendered, tag)]:
            made.append(Mutant(name, alter=_rewritten(rewrite), light_must_fail=True))
        made += [Mutant(name, alter=_rewritten(r)) for name, r in worded.honest(rendered, tag, want, right_text)]
    for name, rewrite in worded.contract_echoed(rendered):
        made.append(Mutant(name, alter=_rewritten(rewrite), light_must_fail=True))
    return made


def _rewritten(rewrite: worded.Rewrite) -> Alter:
    return lambda a, s, w: (rewrite(a or ""), s, w)


def _candidates(rendered: Rendered, want: AnswerCheck, right: str) -> list[str]:
    """The right value among look-alikes of the same kind, as an agent listing every candidate would."""
    if want.term is not None:
        return list(want.among or [])
    prefix = right.split("/")[-1].split("-")[0]
    others = [i for ids in _seed_ids(rendered).values() for i in ids if i.startswith(prefix + "-")]
    others = [i for i in others if i not in right][:3] or ["x-000000"]
    return [others[0], right, *others[1:]]


def _with_tag(tag: str, value: str) -> Alter:
    return lambda a, s, w: (_replace_tag(a, tag, value), s, w)


def _append(text: str) -> Alter:
    return lambda a, s, w: ((a or "") + text, s, w)


def _prepend(text: str) -> Alter:
    return lambda a, s, w: (text + (a or ""), s, w)


# ---------------------------------------------------------------- writes


def write_mutants(rendered: Rendered, gold_answer: str | None) -> list[Mutant]:
    """Agents that write too much, too little, twice, the wrong record or the wrong patient's."""
    gold = rendered.gold_plan
    spec = rendered.check_spec
    made = [Mutant("collateral-write", plan=writes.collateral_write(gold, _bystander(rendered)))]
    name, plan = writes.extra_or_duplicate_create(gold)
    made.append(Mutant(name, plan=plan))
    partial = writes.partial_update(gold)
    if partial is not None:
        made.append(Mutant("partial-update", plan=partial))

    patient = rendered.params.get("patient_id")
    # Working on the wrong patient only shows where the answer or a write depends on the work.
    answer_uses_results = "${" in writes.answer_step(gold).answer
    if patient and (answer_uses_results or rendered.meta.writes):
        other = _other_patient(rendered)
        steps = tuple(writes.replace_in_step(s, patient, other) for s in gold.steps)
        if steps != gold.steps:
            made.append(Mutant("wrong-patient", plan=Plan(name="wrong-patient", steps=steps)))

    targets = [e.ref for e in spec.updates]
    untouched = writes.reformattable(rendered)
    made.append(
        Mutant(
            "equivalent-write-back", alter=writes.equivalent_write_back(targets + ([untouched] if untouched else []))
        )
    )
    if untouched:
        resource = next(r for r in _seed(rendered) if f"{r['resourceType']}/{r['id']}" == untouched)
        made.append(Mutant("equivalent-write-back-sent", plan=writes.sent_write_back(rendered.gold_plan, resource)))
    if not rendered.meta.writes:
        return made
    made.append(Mutant("did-nothing", alter=writes.did_nothing, light_must_fail=True))
    made.append(Mutant("no-write", plan=writes.no_write(gold, gold_answer), light_must_fail=True))
    made.append(Mutant("missing-field", alter=writes.drop_first_field(spec), light_must_fail=True))
    for entry in spec.updates:
        distractor = nearest_distractor(rendered, entry.ref)
        kind = entry.ref.split("/")[0]
        wrong = writes.wrong_record(gold, entry.ref, distractor) if distractor else None
        if wrong is not None:
            made.append(Mutant(f"wrong-record.{kind}", plan=wrong, light_must_fail=True))
        if writes.has_nested_leaf(rendered, entry):
            made.append(Mutant(f"nested-collateral.{kind}", alter=writes.nested_collateral(entry)))
    return made


# ---------------------------------------------------------------- all of them


def mutants(rendered: Rendered, gold_answer: str | None = None, gold_state: MemoryState | None = None) -> list[Mutant]:
    """The faulty agents for one variation of a task (``gold_answer``: what the gold agent said; ``gold_state``: what
    it left, on which the written-form mutants of ``fae.tasks.mutant_creates`` are built)."""
    made = [*_answer_mutants(rendered, gold_answer), *write_mutants(rendered, gold_answer)]
    if gold_state is not None:
        made.extend(Mutant(name, alter=alter) for name, alter in outcome_mutants(rendered, gold_state))
    return made
