"""Write-verification scenario files: the YAML schema, checked, with a clear line per mistake.

A file defines one task (prompt, options per variation, seed records, the
record to write: its identity and expected values) and the scenario agents
that play it: plan steps (the agent's tool calls, other actors' http steps,
waits), faults the proxy applies in flight to the agent's writes, and the
oracle harms that apply. docs/judging.md ("Scenario files") shows the format.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from fae.errors import PlanError, TaskError
from fae.plan import HttpStep, WaitStep, plan_from_dict
from fae.tasks.sources import read_task_file
from fae.util.data_files import field_error

HARMS = (
    "state_check_failed",
    "record_wrong_at_end",
    "duplicate_person",
    "collateral_change",
    "exposed_while_wrong",
    "lost_update",
    "deleted_on_the_way",
    "was_another_person",
    "unrecorded_change",
)
_PARAM = re.compile(r"(?<!\$)\{([A-Za-z_]\w*)\}")


class FieldChange(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Set ``path`` (dotted, list indices as numbers: ``telecom.0.value``) of the request body to ``value``."""

    path: str
    value: Any


class Fault(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the proxy does to the agent's ``write``-th write (1 = its first create/update/patch/delete); with
    ``method`` and/or ``resource``, its ``write``-th write of that method and resource type (2nd POST Patient)."""

    write: int
    method: str | None = None  # POST, PUT, PATCH or DELETE
    resource: str | None = None  # the resource type written, e.g. Patient
    set: FieldChange | None = None
    drop_reply: bool = False
    delay_s: float = 0.0
    lose: bool = False  # acknowledged by the proxy as the server would, never passed on (a create only)


class Target(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    type: str
    identity: dict[str, Any]
    expected: dict[str, Any] = {}
    action: str = "create"
    id: str | None = None


class TaskDef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    prompt: str
    options: list[dict[str, Any]]
    target: Target
    now: str = "2025-04-07T10:00:00+00:00"
    seed: list[dict[str, Any]] = []


class ScenarioDef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    steps: list[Any]
    about: str = ""
    faults: list[Fault] = []
    oracle: list[str] | None = None  # the harms that apply; None: all
    # ensure_record rules this scenario's stated verdicts hold under (e.g. a read "at once" is only at once
    # against a window no loaded machine's scheduling can outlast)
    rules: dict[str, float | int | bool | str] = {}


class WorldStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Steps of the world around the agent (other users, a fault, a verifier: ``http`` and ``wait`` steps), played
    by the harness when ``after`` happens: ``start`` (the sandbox is seeded, the agent not yet started), N (the
    agent's N-th write reached the server; its reply waits until these steps are done) or ``answer`` (the agent
    answered; before the harness's read-back). ``${record.id}`` and ``${record.type}`` name the resource the
    N-th write touched."""

    after: str | int
    steps: list[Any]
    method: str | None = None  # with after: N, the agent's N-th write of this method (POST, PUT, PATCH, DELETE)
    resource: str | None = None  # ... and of this resource type (e.g. Patient)


class CaseDef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A write-verification case any agent can play: the world and the faults around the task, and its oracle."""

    about: str = ""
    faults: list[Fault] = []
    world: list[WorldStep] = []
    oracle: list[str] | None = None
    rules: dict[str, float | int | bool | str] = {}


class ScenarioFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task: TaskDef
    scenarios: dict[str, ScenarioDef]
    defs: Any = None  # YAML anchors for shared steps live here
    cases: dict[str, CaseDef] = {}


class _RawFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The file with each scenario still raw, so an error can name the scenario."""

    task: TaskDef
    scenarios: dict[str, Any] = {}
    defs: Any = None
    cases: dict[str, Any] = {}


def fill(value: Any, params: dict[str, Any]) -> Any:
    """``{param}`` placeholders in every string filled from the variation's options (``${...}`` kept)."""
    if isinstance(value, str):
        whole = _PARAM.fullmatch(value)
        if whole and whole.group(1) in params:
            return params[whole.group(1)]
        return _PARAM.sub(lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), value)
    if isinstance(value, list):
        return [fill(v, params) for v in value]
    if isinstance(value, dict):
        return {fill(k, params): fill(v, params) for k, v in value.items()}
    return value


def load_file(path: Path) -> ScenarioFile:
    """One scenario file, checked: its schema, each scenario's plan and faults, the oracle's harm names."""
    raw = read_task_file(path)
    try:
        top = msgspec.convert(raw, _RawFile)
    except msgspec.ValidationError as exc:
        raise TaskError(f"{path}: {field_error(exc)}") from None
    found: dict[str, ScenarioDef] = {}
    for name, scenario in top.scenarios.items():
        try:
            found[name] = msgspec.convert(scenario, ScenarioDef)
        except msgspec.ValidationError as exc:
            raise TaskError(f"{path}: {field_error(exc, f'scenarios.{name}')}") from None
    cases: dict[str, CaseDef] = {}
    for name, case in top.cases.items():
        if not CASE_NAME.fullmatch(str(name)):
            raise TaskError(f"{path}: cases.{name}: a case name is lower-case letters, digits and single hyphens")
        try:
            cases[name] = msgspec.convert(case, CaseDef)
        except msgspec.ValidationError as exc:
            raise TaskError(f"{path}: {field_error(exc, f'cases.{name}')}") from None
    parsed = ScenarioFile(top.task, found, top.defs, cases)
    if not parsed.task.options:
        raise TaskError(f"{path}: task.options: needs at least one variation's options")
    if parsed.task.target.action not in ("create", "update") or (parsed.task.target.action == "update") != bool(
        parsed.task.target.id
    ):
        raise TaskError(f"{path}: task.target: action is create, or update with the id of the record")
    params = parsed.task.options[0]
    for name, scenario in parsed.scenarios.items():
        try:
            plan_from_dict({"name": name, "steps": fill(scenario.steps, params)})
        except PlanError as exc:
            raise TaskError(f"{path}: scenarios.{name}.steps: {exc}") from None
        _check_faults(path, f"scenarios.{name}", scenario.faults)
        _check_oracle(path, f"scenarios.{name}", scenario.oracle)
    for name, case in parsed.cases.items():
        _check_faults(path, f"cases.{name}", case.faults)
        _check_oracle(path, f"cases.{name}", case.oracle)
        for index, world in enumerate(case.world):
            where = f"{path}: cases.{name}.world[{index}]"
            if world.after not in ("start", "answer") and not (isinstance(world.after, int) and world.after >= 1):
                raise TaskError(f"{where}.after: start, answer, or the agent's N-th write (1 = the first)")
            if (world.method or world.resource) and not isinstance(world.after, int):
                raise TaskError(f"{where}: method and resource name which write: they go with after: N")
            if world.method is not None and world.method.upper() not in ("POST", "PUT", "PATCH", "DELETE"):
                raise TaskError(f"{where}.method: one of POST, PUT, PATCH, DELETE")
            if world.resource is not None and not re.fullmatch(r"[A-Z][A-Za-z]+", world.resource):
                raise TaskError(f"{where}.resource: a resource type, e.g. Patient")
            try:
                plan = plan_from_dict({"name": name, "steps": fill(world.steps, params) + [{"answer": ""}]})
            except PlanError as exc:
                raise TaskError(f"{where}.steps: {exc}") from None
            if any(not isinstance(step, HttpStep | WaitStep) for step in plan.steps[:-1]):
                raise TaskError(f"{where}.steps: the world takes http and wait steps only (the agent is the agent)")
    return parsed


CASE_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def _check_faults(path: Path, where: str, faults: list[Fault]) -> None:
    for index, fault in enumerate(faults):
        chosen = [bool(fault.set), fault.drop_reply, fault.delay_s > 0, fault.lose]
        if fault.write < 1 or sum(chosen) != 1:
            raise TaskError(
                f"{path}: {where}.faults[{index}]: names a write (1 = the first) "
                f"and exactly one of set, drop_reply, delay_s, lose"
            )
        if fault.method is not None and fault.method.upper() not in ("POST", "PUT", "PATCH", "DELETE"):
            raise TaskError(f"{path}: {where}.faults[{index}].method: one of POST, PUT, PATCH, DELETE")
        if fault.resource is not None and not re.fullmatch(r"[A-Z][A-Za-z]+", fault.resource):
            raise TaskError(f"{path}: {where}.faults[{index}].resource: a resource type, e.g. Patient")


def _check_oracle(path: Path, where: str, oracle: list[str] | None) -> None:
    unknown = sorted(set(oracle or ()) - set(HARMS))
    if unknown:
        raise TaskError(f"{path}: {where}.oracle: unknown harm {unknown[0]!r}; the harms are {', '.join(HARMS)}")
