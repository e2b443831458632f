"""FHIRPath Patch: a `Parameters` body of add / insert / delete / replace / move operations.

Paths are the FHIRPath subset patches use in practice: `Type.a.b`, `[n]`,
`first()`, `last()`, `where(criteria)` (criteria evaluated by fhirpathpy) and
`extension('url')`. Each step keeps where its values live, so an operation can
change the resource in place; the caller validates the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from fae.fhir.fhirpath import evaluate, split_top_level
from fae.fhir.outcome import FhirProblem
from fae.fhir.spec import Spec
from fae.fhir.types import Resource
from fae.fhir.validate import element_at
from fae.fhir.wire import deep_copy

OPERATIONS = {"add", "insert", "delete", "replace", "move"}


@dataclass
class Node:
    """A value in the resource and where it lives: holder[key], or holder[key][index]."""

    value: object
    holder: dict | None
    key: str | None
    index: int | None
    keys: tuple[str, ...]


def _failed(message: str) -> FhirProblem:
    return FhirProblem(422, f"FHIRPath Patch could not be applied: {message}", code="processing")


def _bad(message: str) -> FhirProblem:
    return FhirProblem(400, f"Invalid FHIRPath Patch: {message}", code="invalid")


def split_steps(path: str) -> list[str]:
    """Top-level `.`-separated steps of a path (dots inside quotes or parentheses stay)."""
    steps, balanced = split_top_level(path, ".")
    if not balanced or any(not s.strip() for s in steps):
        raise _bad(f"malformed path {path[:120]!r}")
    return [s.strip() for s in steps]


def _step_parts(step: str) -> tuple[str, str | None, int | None]:
    """(name, argument text or None, [n] index or None) of one step."""
    index = None
    if step.endswith("]") and "[" in step:
        step, _, tail = step.rpartition("[")
        digits = tail[:-1]
        if not digits.isascii() or not digits.isdigit():
            raise _bad(f"malformed index [{tail[:20]}")
        index = int(digits)
    if step.endswith(")") and "(" in step:
        name, _, args = step.partition("(")
        return name, args[:-1], index
    return step, None, index


def _children(node: Node, name: str) -> list[Node]:
    value = node.value
    if not isinstance(value, dict):
        return []
    key = (
        name
        if name in value
        else next((k for k in value if k.startswith(name) and k[len(name) : len(name) + 1].isupper()), None)
    )
    if key is None:
        return []
    child = value[key]
    if isinstance(child, list):
        return [Node(item, value, key, i, node.keys + (key,)) for i, item in enumerate(child)]
    return [Node(child, value, key, None, node.keys + (key,))]


def navigate(resource: Resource, path: str) -> list[Node]:
    """The nodes a patch path selects."""
    steps = split_steps(path)
    nodes = [Node(resource, None, None, None, ())]
    if steps[0] == resource.get("resourceType"):
        steps = steps[1:]
    for step in steps:
        name, args, index = _step_parts(step)
        if args is None:
            nodes = [child for node in nodes for child in _children(node, name)]
        elif name == "where":
            nodes = [n for n in nodes if isinstance(n.value, dict) and evaluate(args, n.value) == [True]]
        elif name == "first" and not args:
            nodes = nodes[:1]
        elif name == "last" and not args:
            nodes = nodes[-1:]
        elif name == "extension" and len(args) >= 2 and args[0] == args[-1] == "'":
            url = args[1:-1]
            nodes = [
                c
                for node in nodes
                for c in _children(node, "extension")
                if isinstance(c.value, dict) and c.value.get("url") == url
            ]
        else:
            raise _bad(f"unsupported step {step[:60]!r} (use names, [n], first(), last(), where(), extension('url'))")
        if index is not None:
            nodes = nodes[index : index + 1]
    return nodes


def _value(part: dict) -> object:
    """The value of a `value` parameter part: its value[x], or an object built from its parts."""
    for key, item in part.items():
        if key.startswith("value") and key[5:6].isupper():
            return deep_copy({"v": item})["v"]
    parts = part.get("part")
    if isinstance(parts, list) and parts:
        out: dict = {}
        for sub in parts:
            if not isinstance(sub, dict) or not isinstance(sub.get("name"), str):
                raise _bad("a value part needs a name")
            item = _value(sub)
            if sub["name"] in out:
                previous = out[sub["name"]]
                out[sub["name"]] = (previous if isinstance(previous, list) else [previous]) + [item]
            else:
                out[sub["name"]] = item
        return out
    raise _bad("an operation's value needs a value[x] or parts")


def _operation(param: object, n: int) -> dict[str, object]:
    if not isinstance(param, dict) or param.get("name") != "operation" or not isinstance(param.get("part"), list):
        raise _bad(f"parameter {n} must be an 'operation' with parts")
    op: dict[str, object] = {}
    for part in param["part"]:
        if not isinstance(part, dict) or not isinstance(part.get("name"), str):
            raise _bad(f"operation {n} has a part without a name")
        name = part["name"]
        if name == "value":
            op["value"] = _value(part)
        else:
            op[name] = next((v for k, v in part.items() if k.startswith("value")), None)
    if op.get("type") not in OPERATIONS:
        raise _bad(f"operation {n} needs a type of {', '.join(sorted(OPERATIONS))}")
    if not isinstance(op.get("path"), str):
        raise _bad(f"operation {n} needs a path")
    return op


def _one(nodes: list[Node], path: str) -> Node:
    if len(nodes) != 1:
        raise _failed(f"path {path[:120]!r} selects {len(nodes)} elements; it must select exactly one")
    return nodes[0]


def _int(op: dict, name: str) -> int:
    value = op.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _bad(f"{op['type']} needs a non-negative integer {name}")
    return value


def _collection(resource: Resource, path: str) -> list:
    """The list a path names (its last step a plain element name), created empty if absent."""
    steps = split_steps(path)
    name, args, index = _step_parts(steps[-1])
    if args is not None or index is not None or len(steps) < 2:
        raise _bad(f"path {path[:120]!r} must end with an element name")
    parent = _one(navigate(resource, ".".join(steps[:-1])), path)
    if not isinstance(parent.value, dict):
        raise _failed(f"path {path[:120]!r} is not inside an element")
    current = parent.value.setdefault(name, [])
    if not isinstance(current, list):
        raise _failed(f"{name!r} does not repeat")
    return current


def _apply(spec: Spec, resource: Resource, op: dict) -> None:
    kind, path = op["type"], str(op["path"])
    if kind == "add":
        name = op.get("name")
        if not isinstance(name, str) or "value" not in op:
            raise _bad("add needs a name and a value")
        target = _one(navigate(resource, path), path)
        if not isinstance(target.value, dict):
            raise _failed(f"cannot add {name!r} to a primitive value")
        element = element_at(spec, resource["resourceType"], [*target.keys, name])
        if element is None:
            raise _failed(f"{name!r} is not an element of {path[:120]!r}")
        if element.repeats:
            target.value.setdefault(name, []).append(op["value"])
        elif name in target.value:
            raise _failed(f"{path[:120]}.{name} already has a value; use replace")
        else:
            target.value[name] = op["value"]
    elif kind == "insert":
        items = _collection(resource, path)
        index = _int(op, "index")
        if index > len(items) or "value" not in op:
            raise _failed(f"insert index {index} is out of range (size {len(items)})")
        items.insert(index, op["value"])
    elif kind == "delete":
        nodes = navigate(resource, path)
        if not nodes:
            return
        node = _one(nodes, path)
        if node.holder is None:
            raise _failed("cannot delete the resource itself")
        if node.index is None:
            del node.holder[node.key]
        else:
            del node.holder[node.key][node.index]
            if not node.holder[node.key]:
                del node.holder[node.key]
    elif kind == "replace":
        if "value" not in op:
            raise _bad("replace needs a value")
        node = _one(navigate(resource, path), path)
        if node.holder is None:
            raise _failed("cannot replace the resource itself")
        if node.index is None:
            node.holder[node.key] = op["value"]
        else:
            node.holder[node.key][node.index] = op["value"]
    else:
        items = _collection(resource, path)
        source, destination = _int(op, "source"), _int(op, "destination")
        if source >= len(items) or destination >= len(items):
            raise _failed(f"move {source} -> {destination} is out of range (size {len(items)})")
        items.insert(destination, items.pop(source))


def apply_fhirpath_patch(spec: Spec, resource: Resource, parameters: Resource) -> Resource:
    """A patched deep copy of `resource`; 400 for a malformed patch, 422 when one cannot apply."""
    params = parameters.get("parameter")
    if not isinstance(params, list) or not params:
        raise _bad("Parameters.parameter must list the operations")
    out = deep_copy(resource)
    for n, param in enumerate(params):
        _apply(spec, out, _operation(param, n))
    return out
