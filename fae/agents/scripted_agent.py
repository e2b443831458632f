"""The scripted agent over MCP: a plan file played through a real MCP client."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from fae.agents.base import AgentContext, AgentResult
from fae.agents.mcp_client import McpToolbox, toolbox_call
from fae.agents.plan_runner import CallHttp, run_plan
from fae.errors import PlanError
from fae.plan import Plan, plan_to_dict
from fae.util.tls import client_tls


class ScriptedAgent:
    """Plays ``plan``, or the plan ``plan_for`` gives for the run's variation, or else the gold plan."""

    plays_other_actors = True
    """A scenario plan's http steps act as other actors, and may write past the proxy: fae's own code, trusted
    with those actors' bases and the stack key (``fae.harness.run.agent_context``)."""

    def __init__(self, name: str, plan: Plan | None, plan_for: Callable[[int], Plan] | None = None):
        self.name = name
        self.plan = plan
        self.plan_for = plan_for

    def config(self) -> dict[str, Any]:
        if self.plan is not None:
            return {"kind": "scripted", "plan": plan_to_dict(self.plan)}
        return {"kind": "scripted", "plan": self.name if self.plan_for else "gold"}

    async def run(self, ctx: AgentContext) -> AgentResult:
        plan = self.plan or (self.plan_for(ctx.variation) if self.plan_for else None) or ctx.gold_plan
        if plan is None:
            raise PlanError(f"task of run {ctx.run_id} has no gold plan to play")
        async with McpToolbox(ctx.mcp_url) as box, httpx.AsyncClient(timeout=60, verify=client_tls()) as client:
            played = await run_plan(plan, toolbox_call(box), call_http=_http_caller(ctx, client))
        if played.answer is None:
            return AgentResult(answer=None, stop_reason="no_answer", details={"calls": len(played.calls)})
        return AgentResult(answer=played.answer, stop_reason="answered", details={"calls": len(played.calls)})


FhirBaseFor = Callable[[str, str], tuple[str, Mapping[str, str]] | None]
"""(actor, via) -> the FHIR base an http step of that actor goes to and the headers it needs there, or None."""


def _http_caller(ctx: AgentContext, client: httpx.AsyncClient) -> CallHttp:
    """How a scenario plan's http steps reach FHIR: through the proxy as their actor, or straight to the server."""

    def base_for(actor: str, via: str) -> tuple[str, Mapping[str, str]] | None:
        base = ctx.fhir_direct if via == "direct" else ctx.fhir_bases.get(actor)
        return (base, ctx.fhir_direct_headers if via == "direct" else {}) if base else None

    return http_caller(client, base_for, f"run {ctx.run_id}")


def http_caller(client: httpx.AsyncClient, base_for: FhirBaseFor, who: str) -> CallHttp:
    """A plan's ``call_http``: each step's request to the base ``base_for`` gives its actor, its reply as JSON
    (or its status and text when it is not JSON); ``who`` names the run in the error when there is no base."""

    async def call(actor: str, via: str, method: str, path: str, body: Any) -> Any:
        found = base_for(actor, via)
        if found is None:
            raise PlanError(f"{who} offers no FHIR base for {actor} ({via})")
        base, headers = found
        reply = await client.request(
            method.upper(),
            base.rstrip("/") + "/" + path.lstrip("/"),
            content=json.dumps(body).encode() if body is not None else None,
            headers={"content-type": "application/fhir+json", "accept": "application/fhir+json", **headers},
        )
        try:
            return reply.json()
        except ValueError:
            return {"status": reply.status_code, "text": reply.text[:500]}

    return call
