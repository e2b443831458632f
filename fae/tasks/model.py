"""A task and one rendered variation of it: prompt, fixed clock, seed, gold plan, validators."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from random import Random
from typing import Any, NamedTuple

import msgspec

from fae.errors import PlanError, TaskError
from fae.plan import Plan, plan_from_dict
from fae.store.bodies import digest_of
from fae.tasks import checks
from fae.tasks.answer_contract import mark_echoes
from fae.tasks.check_spec import CheckSpec, read_check
from fae.tasks.checks import Check
from fae.tasks.state import StateView
from fae.tasks.world import World, clock_block

# Every variation's "now" is this Monday morning plus a per-variation offset; never the wall clock.
EPOCH = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)

Scenario = Callable[[World, dict[str, Any]], dict[str, Any]]
ExtraCheck = Callable[["Rendered", str | None, StateView], list[str]]

# One rule for answers in every prompt: each tag once, only its value, a number once in the unit asked for
# (docs/tasks.md, "Answer tags"), and NONE (never an empty tag) for nothing found. Part of every rendered
# prompt: changing it makes every run recorded before task_changed, and moves the suite's pinned digest.
ANSWER_RULES = (
    "Give each answer tag once, holding only the value asked for: one value unless a list is asked for, "
    "and a number once, in the unit asked for, not also converted to another unit. If nothing fits, "
    "write NONE inside the tag; never leave a tag empty."
)

_PARAM = re.compile(r"(?<!\$)\{([a-z_][a-z0-9_]*)\}")


class Meta(msgspec.Struct, frozen=True):
    """What a judge needs to know about a task besides its validators."""

    family: str
    difficulty: int
    writes: bool
    required_resources: tuple[str, ...]
    required_tools: tuple[tuple[str, ...], ...]  # alternatives, each an ordered tool sequence
    prohibited_tools: tuple[str, ...]
    min_tool_calls: int


def seed_body(bundle: Mapping[str, Any]) -> bytes:
    """The bytes a sandbox is seeded with, and that the log keeps under their SHA-256: the bundle's sorted JSON."""
    return json.dumps(bundle, sort_keys=True).encode()


class Played(NamedTuple):
    """What a run's log keeps of the variation it played: the seed's hash, the prompt and the clock."""

    seed: str
    prompt: str
    now: str


class _Playable:
    """A rendered variation that can say what a run of it records (to tell later whether it still renders so)."""

    seed_bundle: dict[str, Any]
    prompt: str
    now: datetime

    @cached_property
    def played(self) -> Played:
        """The seed's hash, prompt and clock as the harness logs them when it records a run of this variation."""
        return Played(digest_of(seed_body(self.seed_bundle)), self.prompt, self.now.isoformat())


@dataclass(frozen=True)
class FixtureVariation(_Playable):
    """A rendered variation of a task kept outside the suite (the built-in fixture, the write-verification
    scenarios): what the harness needs to record it, without the suite's validators."""

    task_id: str
    variation: int
    prompt: str
    now: datetime
    seed_bundle: dict[str, Any]
    gold_plan: Plan
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rendered(_Playable):
    """One variation of a task, fully determined by (task, variation)."""

    task_id: str
    variation: int
    prompt: str
    now: datetime
    seed_bundle: dict[str, Any]
    gold_plan: Plan
    params: dict[str, Any]
    answer_tags: tuple[str, ...]
    meta: Meta
    check_spec: CheckSpec = field(repr=False)
    fhir_access: str = "mcp"


def fill(value: Any, params: Mapping[str, Any], *, where: str) -> Any:
    """Put parameters into ``{name}`` placeholders; a string that is one placeholder takes the value whole."""
    if isinstance(value, str):
        whole = _PARAM.fullmatch(value)
        if whole:
            return copy.deepcopy(_param(params, whole.group(1), where))
        return _PARAM.sub(lambda m: str(_param(params, m.group(1), where)), value)
    if isinstance(value, list):
        return [fill(v, params, where=where) for v in value]
    if isinstance(value, dict):
        return {fill(k, params, where=where): fill(v, params, where=where) for k, v in value.items()}
    return value


def _param(params: Mapping[str, Any], name: str, where: str) -> Any:
    if name not in params:
        raise TaskError(f"{where}: placeholder {{{name}}} names no parameter (have {sorted(params)})")
    return params[name]


@dataclass(frozen=True)
class Task:
    """A task definition: data from its YAML file plus its family's scenario code."""

    id: str
    family: str
    title: str
    difficulty: int
    writes: bool
    prompt: str
    answer_tags: tuple[str, ...]
    gold_plan: list[Any]
    check: CheckSpec
    options: tuple[dict[str, Any], ...]
    scenario: Scenario
    required_resources: tuple[str, ...]
    required_tools: tuple[tuple[str, ...], ...]
    prohibited_tools: tuple[str, ...]
    min_tool_calls: int
    extra_check: ExtraCheck | None = None
    extra_check_name: str | None = None  # the family's name for it (the log keeps the name; the code stays here)
    source: str = ""
    derived: tuple[str, ...] = ()  # dates the agent works out from the prompt's clock; the gold may use them
    fhir_access: str = "mcp"  # "direct": an agent may also reach its run's FHIR base itself (FAE_FHIR_BASE)

    @property
    def meta(self) -> Meta:
        return Meta(
            self.family,
            self.difficulty,
            self.writes,
            self.required_resources,
            self.required_tools,
            self.prohibited_tools,
            self.min_tool_calls,
        )

    def now_for(self, variation: int, rng: Random) -> datetime:
        """The fixed "now" of a variation: a weekday morning that moves with the variation."""
        return EPOCH + timedelta(
            days=9 * variation + rng.randrange(5),
            hours=rng.randrange(3),
            minutes=15 * rng.randrange(4),
        )

    def render(self, variation: int = 0) -> Rendered:
        """The variation's prompt, seed and gold plan; pure in (task, variation)."""
        if not isinstance(variation, int) or variation < 0:
            raise TaskError(f"{self.id}: a variation is a whole number >= 0, got {variation!r}")
        rng = Random(f"{self.id}#{variation}")
        now = self.now_for(variation, rng)
        world = World(rng, now)
        option = (
            dict(self.options[(variation + rng.randrange(len(self.options))) % len(self.options)])
            if self.options
            else {}
        )
        params = {**option, **self.scenario(world, option)}
        params["now"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        params["today"] = now.date().isoformat()
        where = f"task {self.id}"
        try:
            prompt = self.prompt.format_map(_Strict(params, where)).strip()
        except (ValueError, IndexError) as exc:
            raise TaskError(f"{where}: prompt template is malformed: {exc}") from None
        prompt = f"{clock_block(now)}\n\n{prompt}\n\n{ANSWER_RULES}\n"
        hidden = self.hidden_gold_parameters(params, prompt)
        if hidden:
            raise TaskError(
                f"{where}: the gold plan uses {hidden}, which the prompt does not show "
                "(a gold plan may use only the prompt and its own tool results)"
            )
        try:
            plan = plan_from_dict(
                {
                    "name": f"gold:{self.id}",
                    "description": f"gold plan of {self.id}",
                    "steps": fill(self.gold_plan, params, where=where),
                }
            )
        except PlanError as exc:
            raise TaskError(f"{where}: gold plan: {exc}") from None
        spec = read_check(fill(msgspec.to_builtins(self.check), params, where=where), where)
        return Rendered(
            task_id=self.id,
            variation=variation,
            prompt=prompt,
            now=now,
            seed_bundle=world.bundle(),
            gold_plan=plan,
            params=json.loads(json.dumps(params)),
            answer_tags=self.answer_tags,
            meta=self.meta,
            check_spec=spec,
            fhir_access=self.fhir_access,
        )

    def hidden_gold_parameters(self, params: Mapping[str, Any], prompt: str) -> list[str]:
        """Gold-plan parameters whose values the rendered prompt does not show (must be none).

        The gold plan may use what the prompt shows, the clock's now and today, and the
        dates the task declares as ``derived`` (worked out from the prompt's clock and words).
        """
        used = set(_PARAM.findall(json.dumps(self.gold_plan)))
        return sorted(
            name
            for name in used - {"now", "today"} - set(self.derived)
            if isinstance(params.get(name), bool)
            or not isinstance(params.get(name), str | int)
            or str(params[name]) not in prompt
        )

    def validate_strict(
        self,
        rendered: Rendered,
        answer: str | None,
        state: StateView,
        *,
        written: Collection[str] | None = None,
    ) -> Check:
        """Ids answered and state written exactly right by the agent, and nothing else changed."""
        answer = mark_echoes(rendered.prompt, answer, rendered.answer_tags)
        verdict = checks.judge_strict(rendered.check_spec, answer, state, written=written)
        if self.extra_check is None:
            return verdict
        extra = self.extra_check(rendered, answer, state)
        return Check(
            passed=verdict.passed and not extra,
            reasons=verdict.reasons + extra,
            evidence=verdict.evidence,
        )

    def validate_light(
        self,
        rendered: Rendered,
        answer: str | None,
        state: StateView,
        *,
        written: Collection[str] | None = None,
    ) -> Check:
        """Write tasks: the agent wrote each target with the required fields and gave every tag; values not enforced.

        A task that writes nothing has no fields to be lenient about, so its light
        verdict is its strict one. In both modes a tag that only echoes the prompt's answer
        format (``fae.tasks.answer_contract``) gives no answer.
        """
        if not self.writes:
            return self.validate_strict(rendered, answer, state, written=written)
        answer = mark_echoes(rendered.prompt, answer, rendered.answer_tags)
        return checks.judge_light(rendered.check_spec, answer, state, written=written)

    def describe(self) -> dict[str, Any]:
        """A plain summary for listings."""
        return {
            "id": self.id,
            "family": self.family,
            "title": self.title,
            "difficulty": self.difficulty,
            "writes": self.writes,
            "answer_tags": list(self.answer_tags),
            **msgspec.to_builtins(self.meta),
        }


class _Strict(dict):
    """format_map mapping that names the task when a placeholder is unknown."""

    def __init__(self, params: Mapping[str, Any], where: str):
        super().__init__(params)
        self.where = where

    def __missing__(self, key: str) -> Any:
        raise TaskError(f"{self.where}: prompt placeholder {{{key}}} names no parameter")
