"""JSON Patch (RFC 6902) on a resource: add, remove, replace, move, copy and test, by JSON Pointer."""

from __future__ import annotations

from fae.fhir.outcome import FhirProblem
from fae.fhir.types import Resource
from fae.fhir.wire import deep_copy, dumps

OPS = {"add", "remove", "replace", "move", "copy", "test"}
# `copy` can double a document per operation; past this many copied bytes the patch is refused
MAX_COPIED = 8 * 1024 * 1024


def _bad(message: str) -> FhirProblem:
    return FhirProblem(400, f"Invalid JSON Patch: {message}", code="invalid")


def _failed(message: str) -> FhirProblem:
    return FhirProblem(422, f"JSON Patch could not be applied: {message}", code="processing")


def pointer(text: object) -> list[str]:
    """The reference tokens of a JSON Pointer (RFC 6901)."""
    if not isinstance(text, str) or (text and not text.startswith("/")):
        raise _bad(f"{str(text)[:80]!r} is not a JSON Pointer")
    if not text:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in text[1:].split("/")]


def _index(token: str, size: int, allow_end: bool) -> int:
    if allow_end and token == "-":
        return size
    if not token.isascii() or not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise _failed(f"{token[:40]!r} is not an array index")
    index = int(token)
    if index > size or (index == size and not allow_end):
        raise _failed(f"index {index} is out of range (size {size})")
    return index


def _parent(doc: object, tokens: list[str]) -> object:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, len(node), allow_end=False)]
        else:
            raise _failed(f"path element {token[:40]!r} does not exist")
    return node


def _get(doc: object, tokens: list[str]) -> object:
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(last, len(parent), allow_end=False)]
    raise _failed(f"path element {last[:40]!r} does not exist")


def _add(doc: object, tokens: list[str], value: object) -> object:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise _failed(f"cannot add {last[:40]!r} under a primitive value")
    return doc


def _remove(doc: object, tokens: list[str]) -> object:
    if not tokens:
        raise _failed("cannot remove the whole resource")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(last, len(parent), allow_end=False)]
    else:
        raise _failed(f"path element {last[:40]!r} does not exist")
    return doc


def json_equal(a: object, b: object) -> bool:
    """JSON equality: unlike Python's ==, true is not 1 and key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def apply_json_patch(resource: Resource, operations: object) -> object:
    """A patched deep copy of `resource`; 400 for a malformed patch, 422 when one cannot apply."""
    if not isinstance(operations, list):
        raise _bad("the body must be a JSON array of operations")
    doc: object = deep_copy(resource)
    copied = 0
    for n, op in enumerate(operations):
        if not isinstance(op, dict) or op.get("op") not in OPS:
            raise _bad(f"operation {n} needs an 'op' of {', '.join(sorted(OPS))}")
        kind, tokens = op["op"], pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise _bad(f"operation {n} ({kind}) needs a 'value'")
        if kind == "add":
            doc = _add(doc, tokens, deep_copy({"v": op["value"]})["v"])
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)
            doc = _add(_remove(doc, tokens), tokens, deep_copy({"v": op["value"]})["v"]) if tokens else op["value"]
        elif kind == "test":
            if not json_equal(_get(doc, tokens), op["value"]):
                raise _failed(f"test at {op['path'][:80]!r} failed")
        else:
            source = pointer(op.get("from"))
            encoded = dumps({"v": _get(doc, source)})
            if kind == "copy":
                copied += len(encoded)
                if copied > MAX_COPIED:
                    raise _failed(f"the patch copies more than {MAX_COPIED} bytes")
            value = deep_copy({"v": _get(doc, source)})["v"]
            if kind == "move":
                if tokens[: len(source)] == source and len(tokens) > len(source):
                    raise _failed("cannot move a value into one of its own children")
                doc = _remove(doc, source)
            doc = _add(doc, tokens, value)
    return doc
