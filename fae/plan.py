"""Plan files: a scripted agent's behaviour written as data.

A plan is a list of steps. A tool step calls one MCP tool with arguments; an
answer step gives the final answer and ends the plan. Arguments and answers may
refer to earlier results with ``${name.path}`` where ``name`` is the ``save``
name of an earlier tool step (or a variable given when the plan is run) and
``path`` walks dict keys and list indices (``${slots.entry.0.resource.id}``).
A string that is exactly one reference takes the referenced value whole (a
dict stays a dict); a reference inside a longer string is formatted into it.
A ``*`` in a path walks the rest of it from every item of a list
(``${slots.entry.*.resource.id}``): whole, it gives the list; inside text, the
items joined with ", " (nothing, for an empty list).
``{"$merge": [base, patch]}`` deep-merges dicts, so an update can be written as
"the resource I read, with status busy". See docs/plans.md.

Two more steps play the world around the agent, for write-verification
scenarios: an ``http`` step sends one FHIR request as another actor
(``other-user``, ``fault``, ``verifier``) through the recording proxy, or with
``via: direct`` straight to the server so the proxy never sees it; a ``wait``
step sleeps a number of seconds.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import msgspec
import yaml

from fae.errors import PlanError, first_line
from fae.util.data_files import field_error, read_yaml

_REF = re.compile(r"\$\{([A-Za-z_][\w-]*(?:\.(?:[\w-]+|\*))*)\}")


SaveName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][\w-]*$")]
"""A ``save`` name: what ``${name}`` refers to later, so an identifier (dashes allowed)."""


class ToolStep(msgspec.Struct, frozen=True, tag="tool", forbid_unknown_fields=True):
    """Call the MCP tool ``call`` with ``args``; keep the result under ``save``."""

    call: str
    args: dict[str, Any] = {}
    save: SaveName | None = None


class AnswerStep(msgspec.Struct, frozen=True, tag="answer", forbid_unknown_fields=True):
    """Give the final answer text and stop."""

    answer: str


class HttpRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What an ``http`` step sends: a method, a path below the FHIR base, and a body where it has one."""

    method: str
    path: str
    body: Any = None


HttpActor = Literal["other-user", "fault", "verifier"]
HTTP_ACTORS: tuple[str, ...] = get_args(HttpActor)


class HttpStep(msgspec.Struct, frozen=True, tag="http", forbid_unknown_fields=True):
    """Send ``http`` (method, path below the FHIR base, optional body) as ``actor``; keep the reply under ``save``."""

    http: dict[str, Any]
    actor: HttpActor = "other-user"
    via: Literal["proxy", "direct"] = "proxy"
    save: SaveName | None = None


class WaitStep(msgspec.Struct, frozen=True, tag="wait", forbid_unknown_fields=True):
    """Sleep ``wait`` seconds (0 to 60)."""

    wait: Annotated[float, msgspec.Meta(ge=0, le=60)]


Step = ToolStep | AnswerStep | HttpStep | WaitStep


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A named sequence of steps; ``description`` says what behaviour it plays."""

    name: str
    steps: tuple[Step, ...]
    description: str = ""


_KINDS: tuple[tuple[str, type[Step]], ...] = (
    ("answer", AnswerStep),
    ("call", ToolStep),
    ("http", HttpStep),
    ("wait", WaitStep),
)
"""A step's kind, told by the key it has (checked in this order)."""


def _step_from_raw(index: int, raw: Any) -> Step:
    """One step of a plan file, decoded as the kind its key names; a wrong or unknown field is named."""
    where = f"step {index + 1}"
    if not isinstance(raw, dict):
        raise PlanError(f"{where}: expected a mapping, got {type(raw).__name__}")
    kind = next((kind for key, kind in _KINDS if key in raw), None)
    if kind is None:
        raise PlanError(f"{where}: needs 'call' (a tool step), 'answer', 'http' or 'wait'")
    try:
        step = msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise PlanError(field_error(exc, where, kind=kind, raw=raw)) from None
    if isinstance(step, HttpStep):
        try:
            msgspec.convert(step.http, HttpRequest)
        except msgspec.ValidationError as exc:
            raise PlanError(field_error(exc, f"{where}.http", kind=HttpRequest, raw=step.http)) from None
    return step


def plan_from_dict(raw: Any, *, default_name: str = "plan") -> Plan:
    """Build a Plan from parsed YAML/JSON, checking its shape."""
    if isinstance(raw, list):
        raw = {"steps": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        raise PlanError("a plan is a mapping with a list of 'steps' (or a bare list of steps)")
    steps = tuple(_step_from_raw(i, s) for i, s in enumerate(raw["steps"]))
    if not steps:
        raise PlanError("a plan needs at least one step")
    for i, step in enumerate(steps[:-1]):
        if isinstance(step, AnswerStep):
            raise PlanError(f"step {i + 1}: the answer must be the last step")
    return Plan(
        name=str(raw.get("name", default_name)),
        steps=steps,
        description=str(raw.get("description", "")),
    )


def load_plan(path: str | Path) -> Plan:
    """Read a plan file (YAML or JSON)."""
    path = Path(path)
    return plan_from_dict(_plain(read_plan_file(path)), default_name=path.stem)


def read_plan_file(path: Path) -> Any:
    """A plan file's YAML or JSON value, or one line saying why the file cannot give one (``load_plan`` and a
    plans directory read each plan file this way)."""
    try:
        return read_yaml(path)
    except OSError as exc:
        raise PlanError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PlanError(f"plan {path} is not valid YAML/JSON: {first_line(exc)}") from None


def _plain(value: Any) -> Any:
    """YAML reads unquoted dates as date objects; tool arguments need their ISO text."""
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _walk(name: str, path: list[str], scope: dict[str, Any]) -> Any:
    if name not in scope:
        known = ", ".join(sorted(scope)) or "none"
        raise PlanError(f"reference ${{{name}}} names no earlier result (known: {known})")
    return _walk_value(scope[name], name, path)


def _walk_value(value: Any, walked: str, path: list[str]) -> Any:
    for index, part in enumerate(path):
        if part == "*":
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            if not isinstance(value, list):
                raise PlanError(f"reference ${{{walked}.*}} is not a list in the result")
            rest = path[index + 1 :]
            return [_walk_value(item, f"{walked}.{n}", rest) for n, item in enumerate(value)]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, dict) and path[index + 1 : index + 2] == ["*"]:
            value = []  # a searchset without matches has no entry list: nothing to walk
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            raise PlanError(f"reference ${{{walked}.{part}}} does not exist in the result")
        walked = f"{walked}.{part}"
    return value


def lookup(reference: str, scope: dict[str, Any]) -> Any:
    """The value a dotted reference (without ``${}``) points at."""
    name, *path = reference.split(".")
    return _walk(name, path, scope)


def _deep_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            merged[key] = _deep_merge(merged.get(key), value) if key in merged else value
        return merged
    return patch


def resolve(value: Any, scope: dict[str, Any]) -> Any:
    """Replace every reference and ``$merge`` in ``value`` using ``scope``."""
    if isinstance(value, str):
        whole = _REF.fullmatch(value)
        if whole:
            return lookup(whole.group(1), scope)

        def fmt(match: re.Match[str]) -> str:
            found = lookup(match.group(1), scope)
            if ".*" in match.group(1) and isinstance(found, list):
                return ", ".join(f if isinstance(f, str) else json.dumps(f) for f in found)
            return found if isinstance(found, str) else json.dumps(found)

        return _REF.sub(fmt, value)
    if isinstance(value, list):
        return [resolve(item, scope) for item in value]
    if isinstance(value, dict):
        if set(value) == {"$merge"}:
            parts = resolve(value["$merge"], scope)
            if not isinstance(parts, list) or not parts:
                raise PlanError("$merge takes a non-empty list of mappings")
            merged: Any = {}
            for part in parts:
                if isinstance(part, str):
                    try:
                        part = json.loads(part)
                    except ValueError:
                        raise PlanError("$merge got text that is not a JSON object") from None
                if not isinstance(part, dict):
                    raise PlanError("$merge takes a list of mappings")
                merged = _deep_merge(merged, part)
            return merged
        return {key: resolve(item, scope) for key, item in value.items()}
    return value


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The plain-data form of a plan (what a plan file holds)."""
    steps: list[dict[str, Any]] = []
    for step in plan.steps:
        if isinstance(step, AnswerStep):
            steps.append({"answer": step.answer})
        elif isinstance(step, HttpStep):
            entry: dict[str, Any] = {"http": step.http, "actor": step.actor, "via": step.via}
            if step.save:
                entry["save"] = step.save
            steps.append(entry)
        elif isinstance(step, WaitStep):
            steps.append({"wait": step.wait})
        else:
            entry = {"call": step.call, "args": step.args}
            if step.save:
                entry["save"] = step.save
            steps.append(entry)
    return {"name": plan.name, "description": plan.description, "steps": steps}
