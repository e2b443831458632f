"""Every task's gold plan, played through the real MCP tools against the embedded server, passes
strict and light on variations 0-39, and uses nothing the prompt and its own results did not show."""

from __future__ import annotations

import anyio
import pytest
from task_harness import SWEEP, VARIATIONS

from fae.harness.task_check import gold_problems
from fae.tasks import load_suite
from fae.tasks.state import seeded_state


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_gold_plan_passes_strict_and_light_on_every_variation(suite, engine, task_id):
    # the engine validates the seeds of the first variations; the rest are loaded as stored
    failures = anyio.run(lambda: gold_problems(engine, suite[task_id], SWEEP, validated=VARIATIONS))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_doing_nothing_fails(suite, task_id):
    """An agent that answers nothing and writes nothing fails both validators (no server needed)."""
    task = suite[task_id]
    rendered = task.render(0)
    state = seeded_state(rendered.seed_bundle)
    assert not task.validate_strict(rendered, None, state).passed
    assert not task.validate_light(rendered, None, state).passed
