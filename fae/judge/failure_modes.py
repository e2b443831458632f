"""The failure-mode classifier: why a run went wrong, read from its tool calls.

A run carries every mode that applies (the reference study's modes are flags, not one pick), in this order:
no_tool_call (the agent called no tool where the task needs one: it stands alone, for the modes below that
would follow from it say nothing more), incorrect_tool_selection (no required template's tool multiset is
covered by the calls made), incorrect_order (no template is an ordered subsequence of them),
incorrect_resource_type (checked only when selection passes: a required resource type appears in no tool
input or output), prohibited_tool (a prohibited tool was called), tool_error (a call returned an error). The
verdict's outcome is the modes joined by "+" ("incorrect_order+tool_error"), "other" when the run failed its
strict check and none applies, and "none" when it passed and none applies. A run that errored (the agent's
side stopped it: its LLM timed out, answered an error or garbage, its plan broke) or that fae's side ended is
no evidence of how the agent uses tools: it is "errored", with no mode and ``passed`` null.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from fae.judge.context import RunContext
from fae.judge.registry import JudgeFn, Verdict, register_judge
from fae.judge.task_checks import task_check

_encode = msgspec.json.Encoder().encode

MODES = (
    "no_tool_call",
    "incorrect_tool_selection",
    "incorrect_order",
    "incorrect_resource_type",
    "prohibited_tool",
    "tool_error",
)
JOINER = "+"
"""Between the modes of one outcome: a verdict's outcome is one string, and a run may carry several modes."""
ERRORED = "errored"
# run statuses that end a run before the agent was done: the agent's own upstream failed (errored), or fae's
# side did (failed: the harness or the stack; interrupted: a signal or a dead recording process)
ENDED_EARLY = ("errored", "failed", "interrupted")


def covers(called: Sequence[str] | Counter, template: Sequence[str]) -> bool:
    """The template's tools, counted, are all among the calls (given as a sequence, or already counted)."""
    have = called if isinstance(called, Counter) else Counter(called)
    return all(have[tool] >= count for tool, count in Counter(template).items())


def in_order(called: Sequence[str], template: Sequence[str]) -> bool:
    """The template is an ordered (not necessarily contiguous) subsequence of the calls."""
    remaining = iter(called)
    return all(any(tool == made for made in remaining) for tool in template)


_TYPE_NAMED = re.compile(rb'"resourceType":"([^"\\]*)"')


def _named_types(text: bytes) -> set[str] | None:
    """Every string resourceType anywhere in a value, read off its JSON; None when one cannot be read so."""
    named = _TYPE_NAMED.findall(text)
    if len(named) != text.count(b'"resourceType":"'):  # a type with an escaped character in it
        return None
    return {kind.decode() for kind in named}


def _types(value: Any, found: set[str]) -> None:
    """Add every resourceType named in a tool input or output, down to six levels (a JSON text is parsed)."""
    depth = 0
    if isinstance(value, str):
        if value[:1] not in "{[":
            return
        try:
            value = json.loads(value)
        except ValueError:
            return
        depth = 1
    if not isinstance(value, (dict, list)):
        return
    try:
        text: bytes | None = _encode(value)
    except (TypeError, ValueError, OverflowError):
        text = None
    if text is not None:
        # A key is the only place the text has these bytes (a quote inside a string is escaped). None: no object
        # has the key. One, and the value itself has it: that is the only one, at the top.
        keys = text.count(b'"resourceType":')
        if keys == 0:
            return
        if keys == 1 and type(value) is dict and "resourceType" in value:
            kind = value["resourceType"]
            if isinstance(kind, str):
                found.add(kind)
            return
    # level by level, so the walk can stop once every type the value names anywhere has been found near the top
    named = None if text is None else _named_types(text)
    if named is not None and not named:
        return
    level = [value]
    mine: set[str] = set()
    while level:
        for item in level:
            if isinstance(item, dict):
                kind = item.get("resourceType")
                if isinstance(kind, str):
                    mine.add(kind)
        if depth >= 6 or (named is not None and mine >= named):
            break  # the level below is never gathered: in a large Bundle it is every element of every entry
        deeper: list[Any] = []
        for item in level:
            children: Iterable[Any] = item.values() if isinstance(item, dict) else item
            deeper.extend([child for child in children if isinstance(child, (dict, list))])
        level = deeper
        depth += 1
    found |= mine


def classify(
    called: Sequence[str],
    touched_types: set[str],
    errors: int,
    templates: Sequence[Sequence[str]],
    prohibited: Sequence[str],
    required_types: Sequence[str],
) -> list[str]:
    """Every failure mode that applies to a run's calls, in the order of ``MODES``."""
    modes: list[str] = []
    counted = Counter(called)  # counted once for every template
    selection_ok = not templates or any(covers(counted, t) for t in templates)
    if not selection_ok:
        modes.append("incorrect_tool_selection")
    if templates and not any(in_order(called, t) for t in templates):
        modes.append("incorrect_order")
    if selection_ok and any(kind not in touched_types for kind in required_types):
        modes.append("incorrect_resource_type")
    if any(tool in prohibited for tool in called):
        modes.append("prohibited_tool")
    if errors:
        modes.append("tool_error")
    if modes and not called:
        return ["no_tool_call"]  # selection and order (or resource type) fail only because nothing was called
    return modes


def outcome_of(modes: Sequence[str], passed: bool) -> str:
    """The verdict's outcome: every mode, joined; else none (passed) or other (failed)."""
    return JOINER.join(modes) if modes else ("none" if passed else "other")


def errored(ctx: RunContext) -> bool:
    """The run ended before the agent was done, so its calls say nothing of how it works: the agent's answer
    says it errored (in the log before the live verdict is taken), or the run's status says a side ended it."""
    return ctx.transcript.stop_reason == ERRORED or ctx.run.status in ENDED_EARLY


@register_judge("failure_mode")
def failure_mode_judge(rules: dict) -> JudgeFn:
    """Classify a run's failure mode from its tool calls and the task's metadata."""

    def run(ctx: RunContext) -> Verdict:
        calls = ctx.transcript.tool_calls
        called = [c.tool for c in calls]
        if errored(ctx):  # before the task: whatever the task, the run is no evidence of a mode
            return Verdict(ERRORED, None, {"modes": [], "tools": called, "stop_reason": ctx.transcript.stop_reason})
        found = ctx.task
        meta = found.variation.meta if found is not None else None
        if meta is None:
            return Verdict("not_applicable", None, {"reason": f"no task {ctx.run.task_id!r} in the suite"})
        touched: set[str] = set()
        for call in calls:
            _types(call.arguments, touched)
            _types(call.result, touched)
        modes = classify(
            called,
            touched,
            sum(1 for c in calls if c.is_error),
            meta.required_tools,
            meta.prohibited_tools,
            meta.required_resources,
        )
        check = task_check(ctx, "strict")
        passed = bool(check and check.passed)
        outcome = outcome_of(modes, passed)
        missing = sorted(set(meta.required_resources) - touched)
        return Verdict(
            outcome,
            passed,
            {
                "modes": modes,
                "tools": called,
                "resource_types": sorted(touched),
                "missing_resource_types": missing,
                "strict_passed": passed,
            },
        )

    return run
