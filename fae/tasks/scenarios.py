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

from fae.errors import TaskError
from fae.plan import Plan, plan_from_dict
from fae.tasks.model import FixtureVariation
from fae.tasks.scenario_files import Fault, ScenarioDef, TaskDef, fill, load_file
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
    return task_id in registry().tasks


def params_for(variation: int, task_id: str = TASK_ID) -> dict[str, Any]:
    """The options of one variation of a scenario task (variation n takes options[n % count])."""
    task = _task(task_id)
    return dict(task.options[variation % len(task.options)])


def _task(task_id: str) -> TaskDef:
    found = registry().tasks.get(task_id)
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
    first = next(iter(scenario_names(task_id)), None)
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


def scenario_faults(agent: str, variation: int) -> list[Fault]:
    """The faults the proxy applies in a run of agent ``scenario:NAME`` (none for other agents)."""
    if not agent.startswith("scenario:") or agent[9:] not in registry().scenarios:
        return []
    task_id, scenario = _scenario(agent[9:])
    p = params_for(variation, task_id)
    return [
        Fault(
            f.write,
            set=type(f.set)(f.set.path, fill(f.set.value, p)) if f.set else None,
            drop_reply=f.drop_reply,
            delay_s=f.delay_s,
            lose=f.lose,
        )
        for f in scenario.faults
    ]


def scenario_oracle(agent: str) -> list[str] | None:
    """The harms the oracle judges for agent ``scenario:NAME`` (None: all)."""
    if not agent.startswith("scenario:") or agent[9:] not in registry().scenarios:
        return None
    return _scenario(agent[9:])[1].oracle


def scenario_rules(agent: str) -> dict[str, Any]:
    """The ensure_record rules the verdicts of agent ``scenario:NAME`` are stated under (empty: the defaults)."""
    if not agent.startswith("scenario:") or agent[9:] not in registry().scenarios:
        return {}
    return dict(_scenario(agent[9:])[1].rules)


SCENARIOS = tuple(name for name, (task, _, _) in builtin_registry().scenarios.items() if task == TASK_ID)
