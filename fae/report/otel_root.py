"""What the root span of a run carries besides its attributes: its events (seeding, the answer, the state capture,
a paraphrase, and one ``gen_ai.evaluation.result`` per verdict) and, with contents, the task prompt and the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fae.replay.source import Recorded, RunLog
from fae.report import otel_content as content_of
from fae.report.otlp import Attributes, SpanEvent, attrs
from fae.store import events as ev


@dataclass(frozen=True, slots=True)
class VerdictInfo:
    judge: str
    rules: str
    """The rule set as ``key=value,...`` (sorted keys), empty for none."""
    rule_set: str
    rule_set_hash: str
    code_version: str
    outcome: str
    passed: bool | None
    judged_at: str
    batch: str | None
    explanation: str | None = None


def content_of_run(run: RunLog) -> Attributes:
    """The task prompt as the agent's input, its answer as its output."""
    started = run.first(ev.RunStarted)
    answered = run.last(ev.AnswerGiven)
    prompt: Any = started.event.prompt if started is not None else None  # type: ignore[attr-defined]
    return attrs(
        gen_ai__input__messages=content_of.json_text(content_of.prompt_messages(prompt)) if prompt else None,
        gen_ai__output__messages=content_of.json_text(
            content_of.answer_messages(answered.event.text, answered.event.stop_reason)  # type: ignore[attr-defined]
        )
        if answered is not None
        else None,
    )


def root_event(recorded: Recorded, content: bool) -> SpanEvent | None:
    """What the root span notes as an event: seeding, the answer, the state capture, a paraphrase."""
    event, at = recorded.event, recorded.wall_us * 1000
    if isinstance(event, ev.SandboxSeeded):
        return SpanEvent(at, "fae.sandbox_seeded", attrs(fae__sandbox__resource_count=event.resource_count))
    if isinstance(event, ev.StateCaptured):
        return SpanEvent(at, "fae.state_captured", attrs(fae__state__resource_count=event.resource_count))
    if isinstance(event, ev.AnswerGiven):
        return SpanEvent(
            at,
            "fae.answer_given",
            attrs(fae__answer__stop_reason=event.stop_reason, fae__answer__text=event.text if content else None),
        )
    if isinstance(event, ev.PromptParaphrased):
        return SpanEvent(
            at,
            "fae.prompt_paraphrased",
            attrs(
                fae__paraphrase__accepted=event.accepted,
                fae__paraphrase__model=event.model,
                fae__paraphrase__problems=len(event.problems),
            ),
        )
    return None


def verdict_event(verdict: VerdictInfo, at: int, content: bool) -> SpanEvent:
    """A verdict as the conventions' evaluation result, at the end of the run it judged."""
    return SpanEvent(
        at,
        "gen_ai.evaluation.result",
        attrs(
            gen_ai__evaluation__name=f"{verdict.judge} {verdict.rules}" if verdict.rules else verdict.judge,
            gen_ai__evaluation__score__label=verdict.outcome,
            gen_ai__evaluation__score__value=None if verdict.passed is None else float(verdict.passed),
            gen_ai__evaluation__explanation=verdict.explanation if content else None,
            fae__verdict__judge=verdict.judge,
            fae__verdict__rule_set=verdict.rule_set,
            fae__verdict__rule_set_hash=verdict.rule_set_hash,
            fae__verdict__code_version=verdict.code_version,
            fae__verdict__outcome=verdict.outcome,
            fae__verdict__passed=verdict.passed,
            fae__verdict__judged_at=verdict.judged_at,
            fae__verdict__batch=verdict.batch,
        ),
    )
