"""Every YAML and JSON file fae reads, parsed within limits: a file someone else wrote cannot blow it up.

Task and scenario directories, plan files, experiment files, retrieval sets, memory manifests and seed
bundles are shared like any other file. Read with a plain ``yaml.safe_load``, a YAML file under 1 KB whose
aliases nest nine deep ("billion laughs") stands for 387 million values: parsing it is quick (the values
are shared), but every walk over it (a plan's placeholders, a task's rendering) never ends. So each file is
refused, with one line naming it (``FileRefused``), when it is:

- larger than ``max_bytes`` (read no further than that: a device or a growing file cannot hold it up);
- nested deeper than ``MAX_DEPTH`` levels;
- holding more than ``MAX_ALIASES`` aliases, an alias to a node that contains it, or aliases that expand
  to more than ``MAX_VALUES`` values in all.

YAML is checked from the parser's event stream before a node is built (libyaml's parser keeps its own
stack, so depth cannot overflow the C stack there); JSON is decoded, then its depth walked without
recursion. A syntax error stays the caller's to word: ``yaml.YAMLError`` (bytes that are not UTF-8
included), ``ValueError`` for JSON, ``OSError`` for a file that cannot be read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import yaml

from fae.errors import FileRefused

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML was built with it (several times faster), else the pure Python one."""

MAX_BYTES = 8 * 1024 * 1024
"""A task, scenario, plan, experiment or retrieval-set file: the largest fae ships is 26 KB."""

MAX_DEPTH = 100
"""Levels of nesting; the deepest FHIR resource in a seed nests about a dozen."""

MAX_ALIASES = 1_000
"""Aliases in one file; fae's own scenario files use a few dozen."""

MAX_VALUES = 1_000_000
"""Values (scalars and collections) a file stands for with every alias expanded."""

LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"
"""libyaml's own refusal, met first where its scanner looks ahead past a thousand brackets for a key."""

_OPENING = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSING = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _read(path: Path, max_bytes: int) -> bytes:
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileRefused(f"{path} is refused: it is larger than {max_bytes:,} bytes")
    return data


def _check_events(loader: Any, path: Path) -> None:
    """Walk the parser's events: depth, aliases and expanded size within the limits, or FileRefused."""
    open_nodes: list[list[Any]] = []  # [values so far, anchor] of each collection not yet closed
    sizes: dict[str, int] = {}  # an anchor's node: how many values it stands for
    aliases = total = 0
    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, _OPENING):
            open_nodes.append([1, event.anchor])
            if len(open_nodes) > MAX_DEPTH:
                raise FileRefused(f"{path} is refused: it nests more than {MAX_DEPTH} levels deep")
            total += 1
            continue
        if isinstance(event, _CLOSING):
            count, anchor = open_nodes.pop()
        elif isinstance(event, yaml.ScalarEvent):
            count, anchor = 1, event.anchor
            total += 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise FileRefused(f"{path} is refused: it has more than {MAX_ALIASES:,} aliases")
            if event.anchor not in sizes:  # an anchor still open: the node would contain itself
                raise FileRefused(f"{path} is refused: alias *{event.anchor} refers to a node that contains it")
            count, anchor = sizes[event.anchor], None
            total += count
        else:
            continue  # stream and document boundaries
        if anchor is not None:
            sizes[anchor] = count
        if open_nodes:
            open_nodes[-1][0] += count
        if total > MAX_VALUES:
            raise FileRefused(
                f"{path} is refused: its aliases expand to more than {MAX_VALUES:,} values (a YAML bomb?)"
            )


def read_yaml(path: str | Path, *, max_bytes: int = MAX_BYTES) -> Any:
    """The YAML (or JSON) file at ``path`` as plain data, parsed within the limits; None for an empty file."""
    path = Path(path)
    data = _read(path, max_bytes)
    checking = SAFE_LOADER(data)
    try:
        _check_events(checking, path)
    except yaml.MarkedYAMLError as exc:
        if exc.problem != LIBYAML_TOO_DEEP:
            raise
        raise FileRefused(f"{path} is refused: it nests more than {MAX_DEPTH} levels deep") from None
    finally:
        checking.dispose()
    loader = SAFE_LOADER(data)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def field_error(exc: msgspec.ValidationError, prefix: str = "", *, kind: Any = None, raw: Any = None) -> str:
    """msgspec's "... - at `$.x.steps`" as "PREFIX.x.steps: ...": the field first, then what is wrong with it.

    Given the type decoded (``kind``) and the data (``raw``), a mapping's key msgspec leaves out (``[...]``) is
    named, and a value outside a Literal is told the values it may take.
    """
    text, _, at = str(exc).partition(" - at `$")
    at = at.rstrip("`")
    if kind is not None:
        at, allowed = _follow(msgspec.inspect.type_info(kind), raw, at)
        if allowed and text.startswith("Invalid enum value"):
            text += f"; one of {', '.join(map(str, allowed))}"
    where = prefix + at
    return f"{where.lstrip('.') or 'top level'}: {text}"


_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def _member(info: Any, wanted: type) -> Any:
    """The member of a union of the kind a path step goes into (the type itself when it is no union)."""
    members = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    return next((m for m in members if isinstance(m, wanted)), None)


def _follow(info: Any, raw: Any, at: str) -> tuple[str, tuple[Any, ...]]:
    """The error path with each ``[...]`` named by the first key whose value does not decode, and the values of
    a Literal at its end (none when it ends elsewhere)."""
    path = ""
    for name, index in _STEP.findall(at):
        if name:
            struct = _member(info, msgspec.inspect.StructType)
            info = next((f.type for f in struct.fields if f.encode_name == name), None) if struct else None
            raw, path = raw.get(name) if isinstance(raw, dict) else None, f"{path}.{name}"
        elif index != "...":
            listed = _member(info, msgspec.inspect.ListType)
            info, path = listed.item_type if listed else None, f"{path}[{index}]"
            raw = raw[int(index)] if isinstance(raw, list) and int(index) < len(raw) else None
        else:
            mapping = _member(info, msgspec.inspect.DictType)
            info = mapping.value_type if mapping else None
            key = _undecodable(raw, info)
            raw, path = (raw[key], f"{path}.{key}") if key is not None else (None, f"{path}[...]")
    literal = _member(info, msgspec.inspect.LiteralType)
    return path, literal.values if literal else ()


def _undecodable(raw: Any, info: Any) -> Any:
    """The first key of a mapping whose value does not decode as the struct ``info`` names (None if unknown)."""
    if not isinstance(raw, dict) or not isinstance(info, msgspec.inspect.StructType):
        return None
    for key, value in raw.items():
        try:
            msgspec.convert(value, info.cls)
        except msgspec.ValidationError:
            return key
    return None


def _check_depth(value: Any, path: Path) -> None:
    pending = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise FileRefused(f"{path} is refused: it nests more than {MAX_DEPTH} levels deep")
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def read_json(path: str | Path, *, max_bytes: int = MAX_BYTES) -> Any:
    """The JSON file at ``path`` as plain data, parsed within the limits (JSON has no aliases)."""
    path = Path(path)
    data = _read(path, max_bytes)
    try:
        value = json.loads(data)
    except RecursionError:
        raise FileRefused(f"{path} is refused: it nests more than {MAX_DEPTH} levels deep") from None
    _check_depth(value, path)
    return value
