"""The plan registry: which plan (and which scripted extras) belong to a conversation.

An entry is picked by its ``match`` text appearing in the conversation's first
user message; the longest matching text wins, and an empty ``match`` is a
catch-all. Entries come from a directory of plan files at startup and from
``POST /_fae/plans`` at run time. The Plan struct itself is left untouched:
the registry keeps ``match`` and the extras beside it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from fae.errors import PlanError
from fae.plan import Plan, ToolStep, plan_from_dict, plan_to_dict, read_plan_file

PLAN_SUFFIXES = (".yaml", ".yml", ".json")


class Mistake(msgspec.Struct, frozen=True):
    """A wrong tool call made just before plan step ``at`` (0-based); its result is not saved."""

    step: ToolStep
    at: int = 0


class PlanEntry(msgspec.Struct, frozen=True):
    """A registered plan with its match text and the extras that other behaviours read.

    ``verdict``, ``reflection`` and ``judge`` are merged over what the evaluator,
    reflector and judge behaviours would otherwise derive.
    """

    match: str = ""
    plan: Plan | None = None
    variables: dict[str, Any] = {}
    mistake: Mistake | None = None
    wrong_answer: str | None = None
    verdict: dict[str, Any] | None = None
    reflection: dict[str, Any] | None = None
    judge: dict[str, Any] | None = None


def _mapping(raw: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise PlanError(f"'{key}' must be a mapping")
    return value


def _mistake(raw: Any) -> Mistake | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("call"), str):
        raise PlanError("'mistake' must be a mapping with a tool name in 'call'")
    args = raw.get("args") or {}
    at = raw.get("at", 0)
    if not isinstance(args, dict):
        raise PlanError("'mistake.args' must be a mapping")
    if not isinstance(at, int) or isinstance(at, bool) or at < 0:
        raise PlanError("'mistake.at' must be a step index (0 or more)")
    return Mistake(step=ToolStep(call=raw["call"], args=args), at=at)


def _plain(value: Any) -> str:
    """YAML dates and times as the ISO text a FHIR server expects; anything else as its text."""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def entry_from_dict(raw: Any, *, default_name: str = "plan") -> PlanEntry:
    """Build an entry from a registry body or plan file.

    The plan is either under ``plan`` or is the mapping itself (a plan file with
    ``match`` beside ``steps``); other keys are ignored, as the plan loader does.
    """
    if not isinstance(raw, dict):
        raise PlanError("a plan entry is a mapping (with 'match' and 'plan' or 'steps')")
    raw = json.loads(json.dumps(raw, default=_plain))
    match = raw.get("match", "")
    if not isinstance(match, str):
        raise PlanError("'match' must be text")
    if raw.get("plan") is not None:
        plan: Plan | None = plan_from_dict(raw["plan"], default_name=default_name)
    elif "steps" in raw:
        plan = plan_from_dict(raw, default_name=default_name)
    else:
        plan = None
    variables = _mapping(raw, "variables") or {}
    wrong_answer = raw.get("wrong_answer")
    if wrong_answer is not None and not isinstance(wrong_answer, str):
        raise PlanError("'wrong_answer' must be text")
    mistake = _mistake(raw.get("mistake"))
    if mistake is not None and plan is not None:
        tool_steps = sum(1 for step in plan.steps if isinstance(step, ToolStep))
        if mistake.at > tool_steps:
            raise PlanError(f"'mistake.at' is {mistake.at} but the plan has {tool_steps} tool steps")
    return PlanEntry(
        match=match,
        plan=plan,
        variables=variables,
        mistake=mistake,
        wrong_answer=wrong_answer,
        verdict=_mapping(raw, "verdict"),
        reflection=_mapping(raw, "reflection"),
        judge=_mapping(raw, "judge"),
    )


def entry_to_dict(entry: PlanEntry) -> dict[str, Any]:
    """The plain-data form of an entry (what ``GET /_fae/plans`` lists)."""
    out: dict[str, Any] = {"match": entry.match}
    if entry.plan is not None:
        out["plan"] = plan_to_dict(entry.plan)
    if entry.variables:
        out["variables"] = entry.variables
    if entry.mistake is not None:
        mistake = entry.mistake.step
        out["mistake"] = {"call": mistake.call, "args": mistake.args, "at": entry.mistake.at}
    for key in ("wrong_answer", "verdict", "reflection", "judge"):
        if getattr(entry, key) is not None:
            out[key] = getattr(entry, key)
    return out


class PlanRegistry:
    """Entries keyed by match text; thread-safe, as a harness may add them from another thread.

    ``fallback`` finds a plan for a prompt no entry matches (``SuitePlans.find``: the suite's gold plans).
    """

    def __init__(
        self, entries: list[PlanEntry] | None = None, *, fallback: Callable[[str], PlanEntry | None] | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, PlanEntry] = {}
        self.fallback = fallback
        for entry in entries or []:
            self.add(entry)

    def add(self, entry: PlanEntry) -> None:
        """Register ``entry``, replacing any entry with the same match text."""
        with self._lock:
            self._entries.pop(entry.match, None)
            self._entries[entry.match] = entry

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def entries(self) -> list[PlanEntry]:
        """The entries, oldest first."""
        with self._lock:
            return list(self._entries.values())

    def find(self, prompt: str, wanted: Callable[[PlanEntry], bool] = lambda _: True) -> PlanEntry | None:
        """The wanted entry whose match text is the longest one found in ``prompt``."""
        best: PlanEntry | None = None
        for entry in self.entries():
            longest = best is None or len(entry.match) >= len(best.match)
            if longest and wanted(entry) and entry.match in prompt:
                best = entry
        return best

    def find_plan(self, prompt: str) -> PlanEntry | None:
        """The registered entry with a plan for ``prompt``, else the fallback's."""
        entry = self.find(prompt, lambda e: e.plan is not None)
        if entry is None and self.fallback is not None:
            entry = self.fallback(prompt)
        return entry


def load_plans_dir(directory: str | Path, *, fallback: Callable[[str], PlanEntry | None] | None = None) -> PlanRegistry:
    """A registry of every plan file (.yaml, .yml, .json) directly inside ``directory``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise PlanError(f"plans directory {directory} does not exist or is not a directory")
    registry = PlanRegistry(fallback=fallback)
    sources: dict[str, Path] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix not in PLAN_SUFFIXES or not path.is_file():
            continue
        raw = read_plan_file(path)
        try:
            entry = entry_from_dict(raw, default_name=path.stem)
        except PlanError as exc:
            raise PlanError(f"plan {path}: {exc}") from None
        if entry.match in sources:
            raise PlanError(f"plans {sources[entry.match].name} and {path.name} both match {entry.match!r}")
        sources[entry.match] = path
        registry.add(entry)
    return registry
