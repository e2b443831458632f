"""Every task's gold plan, played through the real MCP tools against the embedded server, passes
strict and light on variations 0-39, and uses nothing the prompt and its own results did not show."""

from __future__ import annotations

import anyio
import pytest
from gold_origins import hidden_literals
from task_harness import SWEEP, VARIATIONS, play, written_by

from fae.tasks import load_suite
from fae.tasks.state import seeded_state


async def _sweep(engine, task) -> list[str]:
    failures = []
    for variation in SWEEP:
        rendered = task.render(variation)
        # The engine validates the seed of the first variations; the rest are loaded as stored.
        run, state = await play(engine, rendered, validate_seed=variation in VARIATIONS)
        where = f"v{variation}"
        errors = [(name, outcome.result) for name, _, outcome in run.calls if outcome.is_error]
        if errors:
            failures.append(f"{where}: gold plan hit tool errors: {errors!r:.300}")
        if len(run.calls) < task.min_tool_calls:
            failures.append(f"{where}: {len(run.calls)} calls, fewer than {task.min_tool_calls}")
        written = written_by(run)
        for mode, validate in (("strict", task.validate_strict), ("light", task.validate_light)):
            verdict = validate(rendered, run.answer, state, written=written)
            if not verdict.passed:
                failures.append(f"{where} {mode}: {verdict.reasons}")
        failures.extend(f"{where}: {problem}" for problem in hidden_literals(rendered, run))
    return failures


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_gold_plan_passes_strict_and_light_on_every_variation(suite, engine, task_id):
    failures = anyio.run(_sweep, engine, suite[task_id])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_doing_nothing_fails(suite, task_id):
    """An agent that answers nothing and writes nothing fails both validators (no server needed)."""
    task = suite[task_id]
    rendered = task.render(0)
    state = seeded_state(rendered.seed_bundle)
    assert not task.validate_strict(rendered, None, state).passed
    assert not task.validate_light(rendered, None, state).passed
