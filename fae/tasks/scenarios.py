"""Write-verification scenarios as public data: tasks and scenario agents loaded from YAML files.

Built-in files live in ``fae/tasks/data/scenarios/``; a user adds more in a
directory named by ``FAE_SCENARIOS_PATH`` (several joined by the path
separator) or ``fae record --scenarios-dir DIR`` (``add_scenario_dir``). Each
file is one task and its scenario agents (``fae.tasks.scenario_files``). A
scenario agent is a plan: the agent's MCP tool calls, plus the world around it
as ``http`` steps by other actors and ``wait`` steps, and faults the proxy
applies to the agent's writes. Its oracle label is not declared: the ``oracle``
judge computes it from what the log shows happened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from fae.errors import TaskError
from fae.plan import Plan, plan_from_dict
from fae.tasks.model import FixtureVariation
from fae.tasks.scenario_files import CaseDef, Fault, ScenarioDef, TaskDef, WorldStep, fill, load_file
from fae.tasks.write_targets import WriteTarget

TASK_ID = "wv-register-patient"
BUILTIN_DIR = Path(__file__).parent / "data" / "scenarios"
PATH_VARIABLE = "FAE_SCENARIOS_PATH"
_added: list[Path] = []


@dataclass(frozen=True)
class ScenarioTask(FixtureVariation):
    """A rendered variation of a write-verification task, with the record it is to write."""

    target: WriteTarget | None = None


@dataclass(frozen=True)
class Registry:
    """Every scenario task and scenario agent, with the file that defines it."""

    tasks: dict[str, tuple[Path, TaskDef]] = field(default_factory=dict)
    scenarios: dict[str, tuple[str, ScenarioDef, Path]] = field(default_factory=dict)
    cases: dict[str, tuple[str, CaseDef, Path]] = field(default_factory=dict)
    """Case tasks (``TASK--CASE``): the task they play, the case, the file."""


CASE_SEPARATOR = "--"
"""A case task's id is its task's id, this, and the case's name: ``wv-register-patient--acknowledged-create-lost``."""


def add_scenario_dir(path: str | Path) -> None:
    """Load scenario files from ``path`` too (``fae record --scenarios-dir``); a directory already searched is
    not added again (a worker is handed its driver's whole list, the built-in directory first: loaded twice,
    every scenario clashed with itself and each lookup re-read and refused every file)."""
    folder = Path(path)
    if not folder.is_dir():
        raise TaskError(f"scenarios directory {folder} does not exist")
    if folder.resolve() not in {known.resolve() for known in scenario_dirs()}:
        _added.append(folder)


def scenario_dirs() -> tuple[Path, ...]:
    """The built-in directory, then ``FAE_SCENARIOS_PATH``'s, then those added."""
    return (BUILTIN_DIR, *_env_dirs(os.environ.get(PATH_VARIABLE, "")), *_added)


@lru_cache(maxsize=8)
def _env_dirs(value: str) -> tuple[Path, ...]:
    """The directories a ``FAE_SCENARIOS_PATH`` value names, checked once per value (judging asks every run)."""
    from_env = tuple(Path(p) for p in value.split(os.pathsep) if p)
    for folder in from_env:
        if not folder.is_dir():
            raise TaskError(f"{PATH_VARIABLE} names {folder}, which is not a directory")
    return from_env


@lru_cache(maxsize=8)
def _load(dirs: tuple[Path, ...]) -> Registry:
    registry = Registry()
    for folder in dirs:
        for path in sorted(folder.glob("*.yaml")):
            parsed = load_file(path)
            task_id = parsed.task.id
            if task_id in registry.tasks:
                raise TaskError(f"{path}: task.id: {task_id!r} is already defined in {registry.tasks[task_id][0]}")
            registry.tasks[task_id] = (path, parsed.task)
            for name, scenario in parsed.scenarios.items():
                if name in registry.scenarios:
                    raise TaskError(f"{path}: scenarios.{name}: already defined in {registry.scenarios[name][2]}")
                registry.scenarios[name] = (task_id, scenario, path)
            for name, case in parsed.cases.items():
                registry.cases[f"{task_id}{CASE_SEPARATOR}{name}"] = (task_id, case, path)
    return registry


def registry() -> Registry:
    """The scenarios of every directory: built-in, ``FAE_SCENARIOS_PATH`` and added."""
    return _load(scenario_dirs())


def builtin_registry() -> Registry:
    """The scenarios fae ships (``fae/tasks/data/scenarios``)."""
    return _load((BUILTIN_DIR,))


def scenario_names(task_id: str | None = None) -> list[str]:
    """The scenario agents (of one task, or all)."""
    return [name for name, (task, _, _) in registry().scenarios.items() if task_id in (None, task)]


def is_scenario_task(task_id: str) -> bool:
    """A scenario task, or a case task (``TASK--CASE``) of one."""
    found = registry()
    return task_id in found.tasks or task_id in found.cases


def case_names(task_id: str | None = None) -> list[str]:
    """The case tasks (of one scenario task, or all)."""
    return [name for name, (task, _, _) in registry().cases.items() if task_id in (None, task)]


def case_of(task_id: str) -> CaseDef | None:
    """The case a case task plays, or None for any other task."""
    found = registry().cases.get(task_id)
    return found[1] if found is not None else None


def base_task(task_id: str) -> str:
    """The scenario task a case task plays (the task itself for any other)."""
    found = registry().cases.get(task_id)
    return found[0] if found is not None else task_id


def params_for(variation: int, task_id: str = TASK_ID) -> dict[str, Any]:
    """The options of one variation of a scenario task (variation n takes options[n % count])."""
    task = _task(task_id)
    return dict(task.options[variation % len(task.options)])


def task_definition(task_id: str) -> TaskDef:
    """The definition of a scenario task, or of the task a case task plays."""
    return _task(task_id)


def _task(task_id: str) -> TaskDef:
    found = registry().tasks.get(base_task(task_id))
    if found is None:
        raise TaskError(f"unknown scenario task {task_id!r}")
    return found[1]


def render_scenario_task(task_id: str, variation: int, plan: Plan | None = None) -> ScenarioTask:
    """A variation of a scenario task: prompt, seed, clock and target filled from its options."""
    task = _task(task_id)
    p = params_for(variation, task_id)
    seed = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": fill(r, p), "request": {"method": "PUT", "url": f"{r['resourceType']}/{fill(r['id'], p)}"}}
            for r in task.seed
        ],
    }
    now = datetime.fromisoformat(task.now) + timedelta(days=variation)
    first = next(iter(scenario_names(base_task(task_id))), None)
    return ScenarioTask(
        task_id=task_id,
        variation=variation,
        prompt=fill(task.prompt, p),
        now=now,
        seed_bundle=seed,
        params=p,
        target=_target(task, p),
        gold_plan=plan or (scenario_plan(first, variation) if first else plan_from_dict({"steps": [{"answer": ""}]})),
    )


def render(variation: int, plan: Plan | None = None) -> ScenarioTask:
    """A variation of the built-in task ``wv-register-patient``."""
    return render_scenario_task(TASK_ID, variation, plan)


def _target(task: TaskDef, p: dict[str, Any]) -> WriteTarget:
    t = task.target
    return WriteTarget(
        t.type,
        identity=fill(dict(t.identity), p),
        expected=fill(dict(t.expected), p),
        action=t.action,
        record_id=fill(t.id, p) if t.id else None,
    )


def scenario_target(task_id: str, variation: int) -> WriteTarget | None:
    """The record a scenario task asks for, or None for any other task."""
    if not is_scenario_task(task_id):
        return None
    return _target(_task(task_id), params_for(variation, task_id))


def _scenario(name: str) -> tuple[str, ScenarioDef]:
    found = registry().scenarios.get(name)
    if found is None:
        raise TaskError(f"unknown scenario {name!r}; the scenarios are: {', '.join(registry().scenarios)}")
    return found[0], found[1]


def scenario_plan(name: str, variation: int = 0) -> Plan:
    """A scenario agent's plan for one variation of its task."""
    task_id, scenario = _scenario(name)
    return plan_from_dict({"name": name, "steps": fill(scenario.steps, params_for(variation, task_id))})


def _played(agent: str, task_id: str | None) -> tuple[str, CaseDef | ScenarioDef] | None:
    """What a run plays around its agent, with the task whose options fill it: a case task's case, whatever the
    agent; else agent ``scenario:NAME``'s scenario; else nothing."""
    case = case_of(task_id) if task_id is not None else None
    if case is not None and task_id is not None:
        return task_id, case
    if agent.startswith("scenario:") and agent[9:] in registry().scenarios:
        return _scenario(agent[9:])
    return None


def scenario_faults(agent: str, variation: int, task_id: str | None = None) -> list[Fault]:
    """The faults the proxy applies in a run: a case task's, whatever the agent; else agent ``scenario:NAME``'s."""
    found = _played(agent, task_id)
    return _filled_faults(found[1].faults, params_for(variation, found[0])) if found else []


def _filled_faults(faults: list[Fault], p: dict[str, Any]) -> list[Fault]:
    """The faults with ``{param}`` in a ``set`` value filled (every other field kept as the file says)."""
    return [
        msgspec.structs.replace(f, set=type(f.set)(f.set.path, fill(f.set.value, p))) if f.set else f for f in faults
    ]


def case_world(task_id: str, variation: int) -> list[tuple[WorldStep, Plan]]:
    """A case task's world: (when, the steps as a plan) in file order, filled from the variation's options."""
    case = case_of(task_id)
    if case is None:
        return []
    p = params_for(variation, task_id)
    return [
        (world, plan_from_dict({"name": "world", "steps": [*fill(world.steps, p), {"answer": ""}]}))
        for world in case.world
    ]


def scenario_oracle(agent: str, task_id: str | None = None) -> list[str] | None:
    """The harms the oracle judges in a run: a case task's; else agent ``scenario:NAME``'s (None: all)."""
    found = _played(agent, task_id)
    return found[1].oracle if found else None


def scenario_rules(agent: str, task_id: str | None = None) -> dict[str, Any]:
    """The ensure_record rules a run's verdicts are stated under: a case task's; else agent ``scenario:NAME``'s
    (empty: the defaults)."""
    found = _played(agent, task_id)
    return dict(found[1].rules) if found else {}


SCENARIOS = tuple(name for name, (task, _, _) in builtin_registry().scenarios.items() if task == TASK_ID)
