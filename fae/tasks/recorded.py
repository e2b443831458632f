"""The variation fae renders now for a recorded run, and what of the recording it no longer matches.

Judges score a run against the task as the suite renders it today, not against a copy kept in the log. When
a task file or fae itself changed after the recording so that the variation now renders another seed, prompt
or clock, the run played a different task than the one it would be judged on: its ids, values and question
are not the ones asked for, and the verdicts would score the agent on a task it never saw.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from functools import lru_cache

from fae.tasks.fixture import BUILTIN_TASK, render_builtin
from fae.tasks.model import FixtureVariation, Played, Rendered
from fae.tasks.scenario_files import TaskDef
from fae.tasks.scenarios import is_scenario_task, render_scenario_task, task_definition
from fae.tasks.suite import rendered_task

_KEPT = 1024  # variations, as rendered_task keeps
_scenario_renderings: OrderedDict[tuple[int, int], tuple[TaskDef, FixtureVariation]] = OrderedDict()


def rendering_now(task_id: str, variation: int) -> FixtureVariation | Rendered | None:
    """The variation as fae renders it now, looked up as the harness does (the built-in fixture, a scenario
    task, a suite task); None when fae has no such task (or cannot render it)."""
    if task_id == BUILTIN_TASK:
        return _builtin(variation)
    if is_scenario_task(task_id):
        return _scenario(task_id, variation)
    found = rendered_task(task_id, variation)
    return None if found is None else found[1]


@lru_cache(maxsize=64)
def _builtin(variation: int) -> FixtureVariation:
    return render_builtin(variation)


def _scenario(task_id: str, variation: int) -> FixtureVariation:
    """Rendered once per definition and variation: a scenario directory read anew is a new definition."""
    definition = task_definition(task_id)
    key = (id(definition), variation)
    kept = _scenario_renderings.get(key)
    if kept is not None and kept[0] is definition:
        _scenario_renderings.move_to_end(key)
        return kept[1]
    rendering = render_scenario_task(task_id, variation)
    _scenario_renderings[key] = (definition, rendering)
    while len(_scenario_renderings) > _KEPT:
        _scenario_renderings.popitem(last=False)
    return rendering


def unlike(played: Played, *, seed: str | None, prompt: str | None, now: str | None) -> list[str]:
    """What a run's recording (its seed's hash, prompt and clock; None where the log has none) holds that the
    variation rendered now does not, a word or two each; empty when everything recorded matches."""
    found: list[str] = []
    if seed is not None and seed != played.seed:
        found.append("seed")
    if prompt is not None and prompt != played.prompt:
        found.append("prompt")
    if now is not None and not _same_instant(now, played.now):
        found.append(f"clock: recorded {now}, now {played.now}")
    return found


def _same_instant(recorded: str, rendered: str) -> bool:
    if recorded == rendered:
        return True
    try:
        return datetime.fromisoformat(recorded) == datetime.fromisoformat(rendered)
    except ValueError:
        return False
