"""Running a plan end to end in process: embedded FHIR engine, ASGI app, real MCP tool functions."""

from __future__ import annotations

from typing import Any

import httpx

from fae.plan import Plan
from fae.agents.plan_runner import PlanRun, ToolOutcome, run_plan
from fae.errors import PlanError
from fae.tasks.model import Rendered
from fae.tasks.state import MemoryState, final_state

try:
    from fae.fhir.app import create_app
    from fae.mcp import fhir_tools

    UNAVAILABLE = ""
except ImportError as exc:  # the server or the tools are not there yet
    UNAVAILABLE = f"embedded FHIR server or MCP tools not importable: {exc}"

VARIATIONS = (0, 1, 2)
"""The variations every per-task test covers."""

TOOLS = ("createResource", "searchResources", "getResourceById", "updateResource", "deleteResource")


async def play(
    engine: Any, rendered: Rendered, plan: Plan | None = None
) -> tuple[PlanRun, MemoryState]:
    """Seed a sandbox with the variation, play the plan through the tools, return run and final state."""
    sid = engine.create_sandbox(rendered.seed_bundle)
    try:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(
            transport=transport, base_url=f"http://fae/sandbox/{sid}/fhir/"
        ) as client:

            async def call_tool(name: str, args: dict[str, Any]) -> ToolOutcome:
                if name not in TOOLS:
                    raise ValueError(f"unknown tool {name}")
                result = await getattr(fhir_tools, name)(client, **args)
                return ToolOutcome(result=result, is_error=fhir_tools.is_error_result(result))

            try:
                run = await run_plan(plan or rendered.gold_plan, call_tool)
            except PlanError:
                # A scripted agent whose reference found nothing stops without an answer.
                run = PlanRun(calls=(), answer=None)
        state = final_state(engine.resources(sid), rendered.seed_bundle)
    finally:
        engine.delete_sandbox(sid)
    return run, state
