"""The scripted agent: plays a plan's steps as MCP tool calls, then answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from fae.agents.plan import AnswerStep, Plan, ToolStep, resolve
from fae.errors import PlanError

CallTool = Callable[[str, dict[str, Any]], Awaitable["ToolOutcome"]]


class ToolOutcome(msgspec.Struct, frozen=True):
    """What one tool call gave back: parsed JSON where possible, and whether it failed."""

    result: Any
    is_error: bool = False


class PlanRun(msgspec.Struct, frozen=True):
    """What a plan did: the calls made in order and the final answer (None if it never answered)."""

    calls: tuple[tuple[str, dict[str, Any], ToolOutcome], ...]
    answer: str | None


async def run_plan(
    plan: Plan, call_tool: CallTool, variables: Mapping[str, Any] | None = None
) -> PlanRun:
    """Play ``plan`` against ``call_tool``; a tool error does not stop the plan, a bad reference does."""
    scope: dict[str, Any] = dict(variables or {})
    calls: list[tuple[str, dict[str, Any], ToolOutcome]] = []
    for index, step in enumerate(plan.steps):
        try:
            if isinstance(step, AnswerStep):
                return PlanRun(calls=tuple(calls), answer=resolve(step.answer, scope))
            assert isinstance(step, ToolStep)
            args = resolve(step.args, scope)
        except PlanError as exc:
            raise PlanError(f"plan {plan.name!r}, step {index + 1}: {exc}") from None
        outcome = await call_tool(step.call, args)
        calls.append((step.call, args, outcome))
        if step.save:
            scope[step.save] = outcome.result
    return PlanRun(calls=tuple(calls), answer=None)
