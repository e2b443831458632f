"""Judges by name: each is a factory that takes a rule set and returns ``(run context) -> Verdict``.

A rule set is a flat mapping of rule names to JSON values. It is filled with
the judge's defaults and checked before use, and hashed over its canonical
JSON (sorted keys, no spaces), so the same rules always give the same hash.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fae.errors import JudgeError
from fae.util.json_text import json_or_text

if TYPE_CHECKING:  # the context reads tasks and folds; the registry is imported by everything that judges
    from fae.judge.context import RunContext


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a judge decided about one run, and the evidence it decided on."""

    outcome: str
    passed: bool | None
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule a judge takes: its default and what it means."""

    default: Any
    help: str
    minimum: float | None = None
    """The smallest value a number rule takes."""


JudgeFn = Callable[["RunContext"], Verdict]
"""A judge: a run's context (its log, task, folds and captures, ``fae.judge.context``) to its verdict."""


@dataclass(frozen=True, slots=True)
class JudgeDef:
    name: str
    rules: dict[str, Rule]
    factory: Callable[[dict[str, Any]], JudgeFn]
    doc: str


_JUDGES: dict[str, JudgeDef] = {}


def register_judge(
    name: str, **rules: Rule
) -> Callable[[Callable[[dict[str, Any]], JudgeFn]], Callable[[dict[str, Any]], JudgeFn]]:
    """Register a judge factory under ``name`` with the rules it takes."""

    def register(factory: Callable[[dict[str, Any]], JudgeFn]) -> Callable[[dict[str, Any]], JudgeFn]:
        if name in _JUDGES:
            raise ValueError(f"judge {name!r} registered twice")
        doc = next(iter((factory.__doc__ or "").strip().splitlines()), "")  # a factory may have no docstring
        _JUDGES[name] = JudgeDef(name, dict(rules), factory, doc)
        return factory

    return register


@dataclass(frozen=True, slots=True)
class FactsDef:
    """A judge in two halves (``register_facts``): what it finds of a run before it reads any rule value, as JSON
    text the log keeps (table ``judge_facts``), and the verdict a rule set makes of that text.

    ``inputs(rules)`` names the rules that change what is found (``evidence=proxy``): findings stored for one
    ``inputs`` serve every rule set with the same. ``find(rules)(ctx)`` gives the text from the run and the task
    its log keeps, reading the fold, never ``ctx.state`` (live judging keeps what it finds against the live
    capture, and a rejudge must find the same); ``decide(rules)(text)`` gives the verdict, raising on text it
    cannot read. The judge's own function must give ``decide(find(ctx))``, so a verdict from stored findings is
    the one from the events.
    """

    inputs: Callable[[dict[str, Any]], str]
    find: Callable[[dict[str, Any]], Callable[[RunContext], str]]
    decide: Callable[[dict[str, Any]], Callable[[str], Verdict]]


_FACTS: dict[str, FactsDef] = {}


def register_facts(name: str, definition: FactsDef) -> None:
    """Say that judge ``name`` can be judged from findings stored in the log (``fae.judge.facts``)."""
    if name in _FACTS:
        raise ValueError(f"findings of judge {name!r} registered twice")
    _FACTS[name] = definition


def facts_of(name: str) -> FactsDef | None:
    """How judge ``name`` finds and decides, when it is split in two (None: it judges a loaded run only)."""
    return _FACTS.get(name)


ENTRY_POINT_GROUP = "fae.judges"


@lru_cache(maxsize=1)
def _plugin_points() -> tuple[EntryPoint, ...]:
    """The installed judge plugins, found once per process: a scan reads every installed package's metadata,
    and live judging asks for the judges on every run."""
    return tuple(entry_points(group=ENTRY_POINT_GROUP))


def _load_plugins() -> None:
    """Import each installed plugin's judges (entry-point group ``fae.judges``); loading registers them."""
    for point in _plugin_points():
        if point.name in _JUDGES:
            continue
        try:
            point.load()
        except Exception as exc:  # a broken plugin is named, never a traceback
            raise JudgeError(f"judge plugin {point.name!r} ({point.value}) failed to load: {exc}") from None


def judges() -> dict[str, JudgeDef]:
    """Every registered judge by name: fae's own, registered in process, and installed plugins'."""
    import fae.judge.builtin_judges  # noqa: F401  (the built-ins import this module to register)

    _load_plugins()
    return dict(_JUDGES)


def get_judge(name: str) -> JudgeDef:
    known = judges()
    if name not in known:
        raise JudgeError(f"unknown judge {name!r}; judges: {', '.join(sorted(known))}")
    return known[name]


def parse_value(text: str) -> Any:
    """A rule value from the command line: JSON where it parses (true, 1, "x", [..]), else the text."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    return json_or_text(text)


def parse_rules(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["k=v", ...]`` (or one ``k=v,k=v`` item) as a mapping."""
    found: dict[str, Any] = {}
    for item in items:
        pieces = [p for p in item.split(",") if p.strip()]
        for part in pieces if len(pieces) > 1 and all("=" in p for p in pieces) else [item]:
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise JudgeError(f"rule {part!r} is not key=value")
            found[key.strip()] = parse_value(value)
    return found


def unknown_rule(key: str, names: list[str]) -> str:
    """What follows "no rule KEY" for judges ``names``: the closest rule's name, and the rules each takes."""
    taken = {name: sorted(get_judge(name).rules) for name in dict.fromkeys(names)}
    close = difflib.get_close_matches(key, sorted({rule for rules in taken.values() for rule in rules}), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if len(taken) == 1:
        return hint + f"; its rules: {', '.join(next(iter(taken.values()))) or 'none'}"
    return (
        hint + "; the rules by judge: " + "; ".join(f"{n}: {', '.join(found)}" for n, found in taken.items() if found)
    )


def rule_set(name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A judge's full rule set: its defaults with ``overrides`` checked and applied."""
    definition = get_judge(name)
    rules = {key: rule.default for key, rule in definition.rules.items()}
    for key, value in (overrides or {}).items():
        if key not in definition.rules:
            raise JudgeError(f"judge {name!r} has no rule {key!r}{unknown_rule(key, [name])}")
        default = definition.rules[key].default
        if isinstance(default, bool) and not isinstance(value, bool):
            raise JudgeError(f"rule {key} of judge {name!r} is true or false, got {value!r}")
        if (
            isinstance(default, (int, float))
            and not isinstance(default, bool)
            and (isinstance(value, bool) or not isinstance(value, (int, float)))
        ):
            raise JudgeError(f"rule {key} of judge {name!r} is a number, got {value!r}")
        if isinstance(default, str) and not isinstance(value, str):
            raise JudgeError(f"rule {key} of judge {name!r} is text, got {value!r}")
        if isinstance(default, float) and isinstance(value, int):
            value = float(value)  # settle_s=1 and settle_s=1.0 are one rule set, with one hash
        minimum = definition.rules[key].minimum
        if minimum is not None and isinstance(value, (int, float)) and value < minimum:
            raise JudgeError(f"rule {key} of judge {name!r} is at least {minimum:g}, got {value!r}")
        rules[key] = value
    return rules


def canonical(rules: Mapping[str, Any]) -> str:
    return json.dumps(rules, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def rule_set_hash(rules: Mapping[str, Any]) -> str:
    """The hash of a rule set's canonical JSON."""
    return hashlib.sha256(canonical(rules).encode()).hexdigest()[:16]


def _code_version() -> str:
    """A digest of the code verdicts depend on: the judges, the fold and the task validators."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder in ("judge", "replay", "tasks"):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".yaml", ".yml", ".json") and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return "src-" + digest.hexdigest()[:12]


CODE_VERSION = _code_version()
