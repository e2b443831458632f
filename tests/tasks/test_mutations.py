"""Mutation agents fail the strict validator (and, missing a required field, the light one)."""

from __future__ import annotations

import anyio
import pytest
from task_harness import play
from task_mutants import mutants

from fae.tasks import load_suite

RESULTS: dict[str, list[tuple[str, bool]]] = {}


def _judge_mutants(engine, task) -> list[tuple[str, bool]]:
    rendered = task.render(0)
    gold_run, gold_state = anyio.run(play, engine, rendered)
    outcomes = []
    for mutant in mutants(rendered):
        if mutant.plan is None:
            answer, state = gold_run.answer, gold_state
        else:
            run, state = anyio.run(play, engine, rendered, mutant.plan)
            answer = run.answer
        if mutant.alter is not None:
            answer, state = mutant.alter(answer, state)
        killed = not task.validate_strict(rendered, answer, state).passed
        if mutant.light_must_fail:
            killed = killed and not task.validate_light(rendered, answer, state).passed
        outcomes.append((mutant.name, killed))
    return outcomes


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_mutants_are_killed(suite, engine, task_id):
    outcomes = _judge_mutants(engine, suite[task_id])
    RESULTS[task_id] = outcomes
    assert len(outcomes) >= 2
    names = {name.split(":")[0] for name, _ in outcomes}
    assert "wrong-answer" in names
    assert names & {
        "collateral-write",
        "duplicate-create",
        "extra-create",
        "wrong-patient",
        "did-nothing",
    }
    if suite[task_id].writes:
        assert "missing-field" in names
    survivors = [name for name, killed in outcomes if not killed]
    assert not survivors, f"mutants not caught: {survivors}"


def test_mutation_kill_rate(suite, engine, capsys):
    """The suite-wide kill rate (target 100 %), printed for the record."""
    for task_id in suite:
        if task_id not in RESULTS:
            RESULTS[task_id] = _judge_mutants(engine, suite[task_id])
    total = sum(len(v) for v in RESULTS.values())
    killed = sum(k for v in RESULTS.values() for _, k in v)
    with capsys.disabled():
        print(
            f"\nmutation kill rate: {killed}/{total} = {100 * killed / total:.1f}% "
            f"over {len(RESULTS)} tasks"
        )
    assert killed == total
