"""A task kept in the log judges exactly as the task it was rendered from, for gold and every mutant."""

from __future__ import annotations

import anyio
import pytest

from fae.harness.task_play import play, written_by
from fae.tasks import load_suite
from fae.tasks.judged import decode, encode, for_run
from fae.tasks.mutants import mutants


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_a_kept_task_judges_as_its_task(engine, task_id):
    task = load_suite()[task_id]
    rendered = task.render(0)
    kept = decode(encode(for_run(rendered, "gold")))
    assert kept.writes == task.writes and kept.meta == rendered.meta and kept.check_spec == rendered.check_spec

    async def outcomes():
        gold_run, gold_state = await play(engine, rendered, validate_seed=False)
        found = [(gold_run.answer, gold_state, written_by(gold_run), "gold")]
        for mutant in mutants(rendered, gold_run.answer, gold_state):
            answer, state, written = gold_run.answer, gold_state, written_by(gold_run)
            if mutant.plan is not None:
                run, state = await play(engine, rendered, mutant.plan, validate_seed=False)
                answer, written = run.answer, written_by(run)
            if mutant.alter is not None:
                answer, state, written = mutant.alter(answer, state, written)
            found.append((answer, state, written, mutant.name))
        return found

    for answer, state, written, name in anyio.run(outcomes):
        for mode in ("strict", "light"):
            want = getattr(task, f"validate_{mode}")(rendered, answer, state, written=written)
            got = getattr(kept, f"validate_{mode}")(kept, answer, state, written=written)
            assert (got.passed, got.reasons, got.evidence) == (want.passed, want.reasons, want.evidence), (name, mode)
