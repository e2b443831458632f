"""Every task's gold plan, played through the real MCP tools against the embedded server, passes."""

from __future__ import annotations

import anyio
import pytest
from task_harness import VARIATIONS, play

from fae.tasks import load_suite

CASES = [(task_id, v) for task_id in load_suite() for v in VARIATIONS]


@pytest.mark.parametrize(("task_id", "variation"), CASES, ids=[f"{t}-v{v}" for t, v in CASES])
def test_gold_plan_passes_strict_and_light(suite, engine, task_id, variation):
    task = suite[task_id]
    rendered = task.render(variation)
    run, state = anyio.run(play, engine, rendered)
    errors = [(name, outcome.result) for name, _, outcome in run.calls if outcome.is_error]
    assert not errors, f"gold plan hit tool errors: {errors}"
    assert len(run.calls) >= task.min_tool_calls
    strict = task.validate_strict(rendered, run.answer, state)
    assert strict.passed, strict.reasons
    light = task.validate_light(rendered, run.answer, state)
    assert light.passed, light.reasons


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_doing_nothing_fails(suite, task_id):
    """An agent that answers nothing and writes nothing fails both validators (no server needed)."""
    from fae.tasks.state import seeded_state

    task = suite[task_id]
    rendered = task.render(0)
    state = seeded_state(rendered.seed_bundle)
    assert not task.validate_strict(rendered, None, state).passed
    assert not task.validate_light(rendered, None, state).passed
