"""``fae tasks check``: a task directory's tasks load, their gold plans pass and are fair, their mutants die.

The same checks fae's own suite passes in its tests, for anyone's tasks: each
task's schema (by loading it), each variation's gold plan played through the
real MCP tools against the embedded server (strict and light must pass, and it
may use nothing the prompt and its own results did not show), and every mutant
of ``fae.tasks.mutants`` (each must fail, or pass where it changes only form).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field

from fae.fhir.engine import FhirEngine
from fae.harness.gold_origins import hidden_literals
from fae.harness.task_play import play, written_by
from fae.tasks.model import Task
from fae.tasks.mutants import mutants


@dataclass
class TaskReport:
    """What checking one task found: problems (empty when it is fine) and mutants judged per class."""

    task_id: str
    problems: list[str] = field(default_factory=list)
    mutants: Counter = field(default_factory=Counter)
    """class -> mutants of it the validators judged right."""
    applied: Counter = field(default_factory=Counter)
    """class -> mutants of it that were tried."""


async def judge_mutants(engine: FhirEngine, task: Task, variation: int = 0) -> list[tuple[str, bool, bool, str]]:
    """(mutant name, must pass, judged right, why) for each mutant of a task variation."""
    rendered = task.render(variation)
    gold_run, gold_state = await play(engine, rendered, validate_seed=False)
    outcomes = []
    for mutant in mutants(rendered, gold_run.answer, gold_state):
        if mutant.plan is None:
            answer, state, written = gold_run.answer, gold_state, written_by(gold_run)
        else:
            run, state = await play(engine, rendered, mutant.plan, validate_seed=False)
            answer, written = run.answer, written_by(run)
        if mutant.alter is not None:
            answer, state, written = mutant.alter(answer, state, written)
        strict = task.validate_strict(rendered, answer, state, written=written)
        light = task.validate_light(rendered, answer, state, written=written)
        if mutant.must_pass:
            right = strict.passed and light.passed
            why = f"strict {strict.reasons} light {light.reasons}"
        else:
            right = not strict.passed and (not mutant.light_must_fail or not light.passed)
            why = f"passed strict={strict.passed} light={light.passed}; answer {answer!r:.200}"
        outcomes.append((mutant.name, mutant.must_pass, right, why))
    return outcomes


async def gold_problems(
    engine: FhirEngine, task: Task, variations: Sequence[int], *, validated: Container[int] | None = None
) -> list[str]:
    """Why the task's gold plan does not pass (or is unfair) on each of ``variations``; empty when it does.

    ``validated``: the variations whose seeds the engine validates (default all); the others are
    loaded as stored versions, which is most of a play's cost saved on long sweeps.
    """
    failures = []
    for variation in variations:
        rendered = task.render(variation)
        run, state = await play(engine, rendered, validate_seed=validated is None or variation in validated)
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
        failures.extend(f"{where}: {problem}" for problem in hidden_literals(rendered, run, task.derived))
    return failures


async def check_tasks(
    tasks: Sequence[Task], variations: Sequence[int], *, on_task: Callable[[TaskReport], None] | None = None
) -> list[TaskReport]:
    """Check every task: gold on each variation, mutants on the first; reports in the tasks' order."""
    engine = FhirEngine(request_budget_s=None)
    reports = []
    for task in tasks:
        report = TaskReport(task.id)
        report.problems += await gold_problems(engine, task, variations)
        for name, _must_pass, right, why in await judge_mutants(engine, task, variations[0] if variations else 0):
            kind = name.split(".")[0]
            report.applied[kind] += 1
            report.mutants[kind] += right
            if not right:
                report.problems.append(f"mutant {name} judged wrongly: {why}")
        reports.append(report)
        if on_task is not None:
            on_task(report)
    return reports
