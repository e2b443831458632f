"""A run's task as its judges read it, kept in the run's log: the log alone rescores the run.

At the start of every run the harness writes what the judges will need of its task — the
filled check spec, the task's metadata (family, difficulty, write or read, tool templates),
the records it asks to be written (write targets with their identities) and what the run
played (seed hash, prompt, clock) — as one body in the log (event ``TaskRendered``). Runs of
one variation share the body. Judging reads it from there by default, so a colleague without
the recorder's task files, or with edited ones, judges the task the run played; judging
against today's task files instead is an explicit choice (``fae rejudge --tasks current``).

A task's ``extra_check`` is Python code, not data: the log names it, and judging such a run
still needs the task's family module (it is looked up in today's suite, whose rendering must
match what the run played).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

import msgspec

from fae.errors import TaskError
from fae.tasks import checks
from fae.tasks.answer_contract import mark_echoes
from fae.tasks.check_spec import CheckSpec
from fae.tasks.checks import Check
from fae.tasks.model import FixtureVariation, Meta, Played, Rendered, Task
from fae.tasks.scenarios import scenario_rules
from fae.tasks.state import StateView, bundle_resources
from fae.tasks.suite import rendered_task
from fae.tasks.write_targets import WriteTarget, not_covered, spec_targets

FORMAT = 1


class JudgeableTask(Protocol):
    """What judges ask of a run's task: a suite ``Task``, or the log's ``JudgedTask``."""

    @property
    def writes(self) -> bool: ...

    def validate_strict(
        self, rendered: Any, answer: str | None, state: StateView, *, written: Collection[str] | None = None
    ) -> Check: ...

    def validate_light(
        self, rendered: Any, answer: str | None, state: StateView, *, written: Collection[str] | None = None
    ) -> Check: ...


class JudgeableVariation(Protocol):
    """What judges read of the variation a run played: a suite task's ``Rendered``, or the log's ``JudgedTask``."""

    @property
    def check_spec(self) -> CheckSpec: ...

    @property
    def meta(self) -> Meta | None: ...


class PlayedTask(NamedTuple):
    """The task a run is judged against and the variation it played."""

    task: JudgeableTask
    variation: JudgeableVariation


class JudgedTask(msgspec.Struct, frozen=True, kw_only=True):
    """What judges read of a task's variation; the same object serves as the task and as its rendering."""

    format: int = FORMAT
    task_id: str
    variation: int
    played: Played
    meta: Meta | None = None
    """A suite task's metadata; None for the built-in fixture and write-verification scenario tasks."""
    check_spec: CheckSpec = msgspec.field(default_factory=CheckSpec)
    targets: tuple[WriteTarget, ...] = ()
    extra_check: str | None = None
    title: str = ""
    answer_tags: tuple[str, ...] = ()
    scenario_rules: dict[str, Any] = {}
    """A scenario agent's own ensure_record rules (``rules:`` in its file)."""

    @property
    def writes(self) -> bool:
        return self.meta is not None and self.meta.writes

    def describe(self) -> dict[str, Any]:
        """The summary ``Task.describe`` gives of a suite task (the soft validator shows it to its judge)."""
        meta = msgspec.to_builtins(self.meta) if self.meta is not None else {}
        return {
            "id": self.task_id,
            "family": meta.get("family"),
            "title": self.title,
            "difficulty": meta.get("difficulty"),
            "writes": self.writes,
            "answer_tags": list(self.answer_tags),
            **meta,
        }

    def validate_strict(
        self, rendered: Any, answer: str | None, state: StateView, *, written: Collection[str] | None = None
    ) -> Check:
        """As ``Task.validate_strict``, over the kept check spec (an echoed answer format is no answer)."""
        if self.extra_check is not None:
            raise TaskError(
                f"task {self.task_id!r} has the extra check {self.extra_check!r} (Python code, not kept in the "
                "log): judge it with --tasks current and its task files"
            )
        answer = mark_echoes(self.played.prompt, answer, self.answer_tags)
        return checks.judge_strict(self.check_spec, answer, state, written=written)

    def validate_light(
        self, rendered: Any, answer: str | None, state: StateView, *, written: Collection[str] | None = None
    ) -> Check:
        """As ``Task.validate_light``: a read-only task's light verdict is its strict one."""
        if not self.writes:
            return self.validate_strict(rendered, answer, state, written=written)
        answer = mark_echoes(self.played.prompt, answer, self.answer_tags)
        return checks.judge_light(self.check_spec, answer, state, written=written)


_encode = msgspec.json.Encoder().encode  # keys in the task's own order: judges read the answer tags in that order
_decode = msgspec.json.Decoder(JudgedTask).decode


def targets_of(rendered: Rendered) -> tuple[WriteTarget, ...]:
    """The records a suite task's variation asks for (none where its spec names none)."""
    if not_covered(rendered.check_spec, rendered.meta.writes) is not None:
        return ()
    return tuple(spec_targets(rendered.check_spec, bundle_resources(rendered.seed_bundle)))


def judged_task(
    rendered: Rendered | FixtureVariation,
    *,
    task: Task | None = None,
    scenario_rules: Mapping[str, Any] = {},
) -> JudgedTask:
    """What a run of this variation (of ``task``, for a suite task) keeps of its task for its judges."""
    if isinstance(rendered, Rendered):
        return JudgedTask(
            task_id=rendered.task_id,
            variation=rendered.variation,
            played=rendered.played,
            meta=rendered.meta,
            check_spec=rendered.check_spec,
            targets=targets_of(rendered),
            extra_check=task.extra_check_name if task is not None else None,
            title=task.title if task is not None else "",
            answer_tags=rendered.answer_tags,
        )
    target = getattr(rendered, "target", None)  # a write-verification scenario task names its record
    return JudgedTask(
        task_id=rendered.task_id,
        variation=rendered.variation,
        played=rendered.played,
        targets=(target,) if target is not None else (),
        scenario_rules=dict(scenario_rules),
    )


def for_run(rendered: Rendered | FixtureVariation, agent: str) -> JudgedTask:
    """What a run of ``agent`` on this variation keeps of its task (a scenario agent's own rules included)."""
    if isinstance(rendered, Rendered):
        found = rendered_task(rendered.task_id, rendered.variation)
        return judged_task(rendered, task=found[0] if found is not None else None)
    return judged_task(rendered, scenario_rules=scenario_rules(agent, rendered.task_id))


def kept_body(rendered: Any, agent: str) -> bytes | None:
    """The body a run keeps of its task: a replay's is its original's; None for a rendering fae cannot describe."""
    kept = getattr(rendered, "kept_task", None)
    if isinstance(kept, bytes):
        return kept
    if isinstance(rendered, Rendered | FixtureVariation):
        return encode(for_run(rendered, agent))
    return None


def encode(task: JudgedTask) -> bytes:
    """The body kept in the log: JSON in the rendering's own order (deterministic, so a variation's runs share it)."""
    return _encode(task)


@lru_cache(maxsize=1024)
def decode(body: bytes) -> JudgedTask:
    """A kept task back; runs of one variation share the body, so it is decoded once per process."""
    try:
        task = _decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TaskError(f"the log's record of the run's task cannot be read: {exc}") from None
    if task.format > FORMAT:
        raise TaskError(f"the log's record of the run's task is format {task.format}; this fae reads up to {FORMAT}")
    return task
