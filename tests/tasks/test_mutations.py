"""Mutation agents fail the validators (strict, and light where light must see it); form-only
changes pass both. The kill rate is printed per mutant class."""

from __future__ import annotations

from collections import defaultdict

import anyio
import pytest

from fae.harness.task_check import judge_mutants
from fae.tasks import load_suite
from fae.tasks.mutant_answers import is_value

RESULTS: dict[str, list[tuple[str, bool, bool, str]]] = {}
"""task id -> (mutant name, must pass, judged right, why) per mutant."""

MUST_KILL_CLASSES = {
    "wrong-answer",
    "hedged-answer",
    "hedged-answer-first",
    "candidate-list",
    "near-number",
    "near-number-digits",
    "distractor-id",
    "collateral-write",
    "duplicate-create",
    "extra-create",
    "partial-update",
    "wrong-patient",
    "did-nothing",
    "no-write",
    "missing-field",
    "wrong-record",
    "nested-collateral",
    "contradicting-element",
    "contradicting-sibling",
    "mixed-items",
    "unit-swap",
    "system-swap",
    "refset-swap",
    "negated-term",
    "negated-id",
    "negated-number",
    "placeholder-echo",
}


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_mutants_are_killed_and_form_changes_pass(suite, engine, task_id):
    task = suite[task_id]
    outcomes = anyio.run(judge_mutants, engine, task)
    RESULTS[task_id] = outcomes
    kinds = {name.split(".")[0] for name, *_ in outcomes}
    assert {"wrong-answer", "hedged-answer", "equivalent-write-back", "placeholder-echo", "honest-wording"} <= kinds
    if any(is_value(want) for want in task.render(0).check_spec.answer.values()):
        assert kinds & {"negated-term", "negated-id", "negated-number"}
    if task.writes:
        assert {"no-write", "did-nothing", "missing-field"} <= kinds
        if task.check.updates:
            assert "wrong-record" in kinds
    wrong = [f"{name}: {why}" for name, _, right, why in outcomes if not right]
    assert not wrong, "judged wrongly:\n" + "\n".join(wrong)


def test_mutation_kill_rate_per_class(suite, engine, capsys):
    """Per mutant class: how many were killed (target 100 %), and false kills of form-only changes (target 0)."""
    for task_id in suite:
        if task_id not in RESULTS:
            RESULTS[task_id] = anyio.run(judge_mutants, engine, suite[task_id])
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # applied, right, must pass
    for outcomes in RESULTS.values():
        for name, must_pass, right, _ in outcomes:
            row = table[name.split(".")[0]]
            row[0] += 1
            row[1] += right
            row[2] = must_pass
    lines = [f"{'mutant class':<27} {'tasks':>6} {'killed':>7} {'rate':>7}   (must pass: false kills)"]
    for kind in sorted(table):
        applied, right, must_pass = table[kind]
        if must_pass:
            lines.append(f"{kind:<27} {applied:>6} {'-':>7} {'-':>7}   false kills {applied - right}")
        else:
            lines.append(f"{kind:<27} {applied:>6} {right:>7} {100 * right / applied:>6.1f}%")
    killed = sum(r for k, (a, r, m) in table.items() if not m)
    total = sum(a for k, (a, r, m) in table.items() if not m)
    lines.append(f"{'all that must fail':<27} {total:>6} {killed:>7} {100 * killed / total:>6.1f}%")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    unknown = {k for k, (a, r, m) in table.items() if not m} - MUST_KILL_CLASSES
    assert not unknown, f"mutant classes without a kill target: {unknown}"
    assert all(r == a for a, r, _ in table.values()), "\n".join(lines)
