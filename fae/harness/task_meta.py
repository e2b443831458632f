"""Materialise task metadata into a log, so its study views slice runs by family and difficulty offline."""

from __future__ import annotations

from collections.abc import Iterable

from fae.errors import FaeError
from fae.plan import ToolStep
from fae.store.log import EventLog
from fae.store.task_meta import TaskMetaRow, missing_task_variations, write_task_meta
from fae.tasks.fixture import BUILTIN_TASK, render_builtin
from fae.tasks.judged import judged_task
from fae.tasks.mutant_writes import WRITE_CALLS
from fae.tasks.scenarios import TASK_ID as SCENARIO_TASK
from fae.tasks.scenarios import render as render_scenario
from fae.tasks.suite import rendered_task


def task_meta_row(task_id: str, variation: int) -> TaskMetaRow:
    """The metadata of one task variation; a task the suite does not know gets only what its plan says."""
    found = rendered_task(task_id, variation)
    if found is not None:
        _, rendered = found
        meta = rendered.meta
        return TaskMetaRow(
            task_id,
            variation,
            meta.family,
            meta.difficulty,
            meta.writes,
            meta.min_tool_calls,
            _tool_steps(rendered.gold_plan),
        )
    try:
        if task_id == BUILTIN_TASK:
            other = render_builtin(variation)
        elif task_id == SCENARIO_TASK:
            other = render_scenario(variation)
        else:
            return TaskMetaRow(task_id, variation, None, None, None, None, None)
    except FaeError:
        return TaskMetaRow(task_id, variation, None, None, None, None, None)
    # no suite metadata: the task writes when the task its runs keep (fae.tasks.judged) names records to write,
    # or its gold plan writes (the built-in fixture's check names no target)
    steps = [s for s in other.gold_plan.steps if isinstance(s, ToolStep)]
    writes = bool(judged_task(other).targets) or any(s.call in WRITE_CALLS for s in steps)
    return TaskMetaRow(task_id, variation, None, None, writes, None, _tool_steps(other.gold_plan))


def _tool_steps(plan) -> int:
    return sum(isinstance(step, ToolStep) for step in plan.steps)


def materialise_task_meta(log: EventLog, pairs: Iterable[tuple[str, int]] | None = None) -> int:
    """Write the metadata of ``pairs`` (default: every task variation the runs name and the log lacks)."""
    wanted = list(pairs) if pairs is not None else missing_task_variations(log)
    return write_task_meta(log, (task_meta_row(t, v) for t, v in dict.fromkeys(wanted)))
