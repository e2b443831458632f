"""The scripted agent: plays a plan's steps as MCP tool calls, then answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import msgspec

from fae.errors import PlanError
from fae.plan import AnswerStep, HttpStep, Plan, ToolStep, WaitStep, resolve

CallTool = Callable[[str, dict[str, Any]], Awaitable["ToolOutcome"]]
# (actor, via, method, path, body) -> parsed reply; how http steps reach the FHIR server
CallHttp = Callable[[str, str, str, str, Any], Awaitable[Any]]


class ToolOutcome(msgspec.Struct, frozen=True):
    """What one tool call gave back: parsed JSON where possible, and whether it failed."""

    result: Any
    is_error: bool = False


class PlanRun(msgspec.Struct, frozen=True):
    """What a plan did: the calls made in order and the final answer (None if it never answered)."""

    calls: tuple[tuple[str, dict[str, Any], ToolOutcome], ...]
    answer: str | None


async def run_plan(
    plan: Plan,
    call_tool: CallTool,
    variables: Mapping[str, Any] | None = None,
    call_http: CallHttp | None = None,
) -> PlanRun:
    """Play ``plan`` against ``call_tool``; a tool error does not stop the plan, a bad reference does.

    ``http`` steps (other actors' requests) go through ``call_http``; they are not the agent's
    tool calls and do not appear in ``calls``.
    """
    scope: dict[str, Any] = dict(variables or {})
    calls: list[tuple[str, dict[str, Any], ToolOutcome]] = []
    for index, step in enumerate(plan.steps):
        try:
            if isinstance(step, AnswerStep):
                return PlanRun(calls=tuple(calls), answer=resolve(step.answer, scope))
            if isinstance(step, WaitStep):
                await anyio.sleep(step.wait)
                continue
            if isinstance(step, HttpStep):
                if call_http is None:
                    raise PlanError("this agent cannot send other actors' http steps")
                request = resolve(step.http, scope)
                reply = await call_http(step.actor, step.via, request["method"], request["path"], request.get("body"))
                if step.save:
                    scope[step.save] = reply
                continue
            assert isinstance(step, ToolStep)
            args = resolve(step.args, scope)
        except PlanError as exc:
            raise PlanError(f"plan {plan.name!r}, step {index + 1}: {exc}") from None
        outcome = await call_tool(step.call, args)
        calls.append((step.call, args, outcome))
        if step.save:
            scope[step.save] = outcome.result
    return PlanRun(calls=tuple(calls), answer=None)
