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
from typing import Any

import msgspec
import yaml

from fae.errors import PlanError
from fae.util.data_files import read_yaml

_REF = re.compile(r"\$\{([A-Za-z_][\w-]*(?:\.(?:[\w-]+|\*))*)\}")


class ToolStep(msgspec.Struct, frozen=True, tag="tool", forbid_unknown_fields=True):
    """Call the MCP tool ``call`` with ``args``; keep the result under ``save``."""

    call: str
    args: dict[str, Any] = {}
    save: str | None = None


class AnswerStep(msgspec.Struct, frozen=True, tag="answer", forbid_unknown_fields=True):
    """Give the final answer text and stop."""

    answer: str


class HttpStep(msgspec.Struct, frozen=True, tag="http", forbid_unknown_fields=True):
    """Send ``http`` (method, path below the FHIR base, optional body) as ``actor``; keep the reply under ``save``."""

    http: dict[str, Any]
    actor: str = "other-user"
    via: str = "proxy"
    save: str | None = None


class WaitStep(msgspec.Struct, frozen=True, tag="wait", forbid_unknown_fields=True):
    """Sleep ``wait`` seconds."""

    wait: float


HTTP_ACTORS = ("other-user", "fault", "verifier")

Step = ToolStep | AnswerStep | HttpStep | WaitStep


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A named sequence of steps; ``description`` says what behaviour it plays."""

    name: str
    steps: tuple[Step, ...]
    description: str = ""


def _step_from_raw(index: int, raw: Any) -> Step:
    if not isinstance(raw, dict):
        raise PlanError(f"step {index + 1}: expected a mapping, got {type(raw).__name__}")
    if "answer" in raw:
        extra = set(raw) - {"answer"}
        if extra:
            raise PlanError(f"step {index + 1}: an answer step has no field {sorted(extra)[0]!r}")
        if not isinstance(raw["answer"], str):
            raise PlanError(f"step {index + 1}: answer must be text")
        return AnswerStep(answer=raw["answer"])
    if "call" in raw:
        extra = set(raw) - {"call", "args", "save"}
        if extra:
            raise PlanError(f"step {index + 1}: a tool step has no field {sorted(extra)[0]!r}")
        args = raw.get("args") or {}
        if not isinstance(raw["call"], str) or not isinstance(args, dict):
            raise PlanError(f"step {index + 1}: 'call' must be a tool name and 'args' a mapping")
        save = raw.get("save")
        if save is not None and not re.fullmatch(r"[A-Za-z_][\w-]*", str(save)):
            raise PlanError(f"step {index + 1}: save name {save!r} is not an identifier")
        return ToolStep(call=raw["call"], args=args, save=save)
    if "http" in raw:
        extra = set(raw) - {"http", "actor", "via", "save"}
        if extra:
            raise PlanError(f"step {index + 1}: an http step has no field {sorted(extra)[0]!r}")
        request = raw["http"]
        if (
            not isinstance(request, dict)
            or not isinstance(request.get("method"), str)
            or not isinstance(request.get("path"), str)
            or set(request) - {"method", "path", "body"}
        ):
            raise PlanError(f"step {index + 1}: 'http' takes method, path and an optional body")
        actor, via = raw.get("actor", "other-user"), raw.get("via", "proxy")
        if actor not in HTTP_ACTORS or via not in ("proxy", "direct"):
            raise PlanError(f"step {index + 1}: actor is one of {', '.join(HTTP_ACTORS)} and via is proxy or direct")
        save = raw.get("save")
        if save is not None and not re.fullmatch(r"[A-Za-z_][\w-]*", str(save)):
            raise PlanError(f"step {index + 1}: save name {save!r} is not an identifier")
        return HttpStep(http=request, actor=actor, via=via, save=save)
    if "wait" in raw:
        if set(raw) - {"wait"} or not isinstance(raw["wait"], (int, float)) or not 0 <= raw["wait"] <= 60:
            raise PlanError(f"step {index + 1}: a wait step is {{wait: seconds}} with 0 to 60 seconds")
        return WaitStep(wait=float(raw["wait"]))
    raise PlanError(f"step {index + 1}: needs 'call' (a tool step), 'answer', 'http' or 'wait'")


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
    try:
        raw = read_yaml(path)
    except OSError as exc:
        raise PlanError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PlanError(f"plan {path} is not valid YAML/JSON: {exc}") from None
    return plan_from_dict(_plain(raw), default_name=path.stem)


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
