"""Recording runs through the real stack (proxy, embedded FHIR, MCP) for judge and replay tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from fae.agents.scripted_agent import ScriptedAgent
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.tasks.scenarios import builtin_registry, registry, render_scenario_task, scenario_plan

# every scenario agent of the built-in scenario files
BUILTIN_SCENARIOS = tuple(builtin_registry().scenarios)


async def record_runs(log: Path, runs: Sequence[tuple[RunSpec, Any, Any]], concurrency: int = 8) -> dict[str, str]:
    """Record (spec, rendered task, agent) triples into one log; returns run id -> status."""
    statuses: dict[str, str] = {}
    limiter = anyio.CapacityLimiter(concurrency)
    async with open_stack(log) as stack:

        async def one(spec: RunSpec, rendered: Any, agent: Any) -> None:
            async with limiter:
                statuses[spec.run_id] = await execute_run(stack, spec, rendered, agent)

        async with anyio.create_task_group() as group:
            for spec, rendered, agent in runs:
                group.start_soon(one, spec, rendered, agent)
    return statuses


def scenario_runs(names: Sequence[str], variation: int = 0) -> list[tuple[RunSpec, Any, Any]]:
    """One run per scenario agent, as ``fae record --agent scenario:NAME`` makes it (its faults armed)."""
    made = []
    for name in names:
        task_id = registry().scenarios[name][0]
        agent = ScriptedAgent(name=f"scenario:{name}", plan=scenario_plan(name, variation))
        spec = RunSpec(
            run_id=f"{task_id}.v{variation}.{name}",
            task_id=task_id,
            variation=variation,
            agent=agent.name,
            repeat=0,
            suite="write-verification",
        )
        made.append((spec, render_scenario_task(task_id, variation), agent))
    return made


def _mutants_module():
    """The suite's mutation agents (fae.tasks.mutants)."""
    from fae.tasks import mutants

    return mutants


def suite_runs(variation: int = 0) -> tuple[list[tuple[RunSpec, Any, Any]], set[str]]:
    """Every task's gold run, and per task one mutation agent that plays a plan (kinds taken in turn).

    Mutants that change an outcome after the fact (a wrong answer, a dropped field) cannot be
    recorded live and are left out, and so are those that must pass (a change of form only). Returns the runs and
    the mutation kinds covered.
    """
    from fae.tasks import load_suite

    mutants = _mutants_module()
    made: list[tuple[RunSpec, Any, Any]] = []
    kinds: set[str] = set()
    for index, task_id in enumerate(load_suite()):
        task = load_suite()[task_id]
        rendered = task.render(variation)
        gold = ScriptedAgent(name="scripted:gold", plan=None)
        made.append((RunSpec(f"{task_id}.v{variation}.gold", task_id, variation, gold.name, 0), rendered, gold))
        if mutants is None:
            continue
        playable = [
            m
            for m in mutants.mutants(rendered)
            if m.plan is not None and m.alter is None and not getattr(m, "must_pass", False)
        ]
        if not playable:
            continue
        chosen = playable[index % len(playable)]
        kinds.add(chosen.name)
        agent = ScriptedAgent(name=f"mutant:{chosen.name}", plan=chosen.plan)
        made.append(
            (RunSpec(f"{task_id}.v{variation}.{chosen.name}", task_id, variation, agent.name, 0), rendered, agent)
        )
    return made, kinds
