"""Playing a plan against a task variation in process: the embedded FHIR engine, its ASGI app, the real MCP tools."""

from __future__ import annotations

from typing import Any

import httpx

from fae.agents.plan_runner import PlanRun, ToolOutcome, run_plan
from fae.errors import PlanError
from fae.fhir.app import create_app
from fae.mcp import fhir_tools
from fae.plan import Plan
from fae.tasks.model import Rendered
from fae.tasks.state import MemoryState, bundle_resources, final_state

TOOLS = ("createResource", "searchResources", "getResourceById", "updateResource", "deleteResource")
WRITES = ("createResource", "updateResource")


def written_by(run: PlanRun) -> frozenset[str]:
    """``Type/id`` of what the plan's own successful create and update calls wrote."""
    return frozenset(
        f"{outcome.result['resourceType']}/{outcome.result['id']}"
        for name, _, outcome in run.calls
        if name in WRITES and not outcome.is_error and isinstance(outcome.result, dict) and "id" in outcome.result
    )


def _seeded_sandbox(engine: Any, rendered: Rendered, validate: bool) -> str:
    """A sandbox holding the variation's seed; without ``validate`` the seed is loaded as stored
    versions (the engine's seed validation is most of a play's cost; test_gold validates seeds)."""
    if validate:
        return engine.create_sandbox(rendered.seed_bundle)
    sid = engine.create_sandbox()
    engine.load_state(
        sid,
        [
            {**r, "meta": {"versionId": "1", "lastUpdated": "2025-01-01T00:00:00Z"}}
            for r in bundle_resources(rendered.seed_bundle)
        ],
    )
    return sid


async def play(
    engine: Any, rendered: Rendered, plan: Plan | None = None, *, validate_seed: bool = True
) -> tuple[PlanRun, MemoryState]:
    """Seed a sandbox with the variation, play the plan through the tools, return run and final state."""
    sid = _seeded_sandbox(engine, rendered, validate_seed)
    try:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url=f"http://fae/sandbox/{sid}/fhir/") as client:

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
