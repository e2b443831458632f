"""The scripted agent over MCP: a plan file played through a real MCP client."""

from __future__ import annotations

from typing import Any

from fae.agents.base import AgentContext, AgentResult
from fae.agents.mcp_client import McpToolbox, toolbox_call
from fae.agents.plan import Plan, plan_to_dict
from fae.agents.scripted import run_plan
from fae.errors import PlanError


class ScriptedAgent:
    """Plays ``plan`` (or, when None, the task variation's gold plan)."""

    def __init__(self, name: str, plan: Plan | None):
        self.name = name
        self.plan = plan

    def config(self) -> dict[str, Any]:
        return {"kind": "scripted", "plan": plan_to_dict(self.plan) if self.plan else "gold"}

    async def run(self, ctx: AgentContext) -> AgentResult:
        plan = self.plan or ctx.gold_plan
        if plan is None:
            raise PlanError(f"task of run {ctx.run_id} has no gold plan to play")
        async with McpToolbox(ctx.mcp_url) as box:
            played = await run_plan(plan, toolbox_call(box))
        if played.answer is None:
            return AgentResult(answer=None, stop_reason="no_answer", details={"calls": len(played.calls)})
        return AgentResult(answer=played.answer, stop_reason="answered", details={"calls": len(played.calls)})
