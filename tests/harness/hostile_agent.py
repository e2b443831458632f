"""An agent that attacks the run beside it, with raw HTTP, using whatever it can learn; it answers with what it got.

Registered through the agent registry like any plugin (``--agent hostile``). It learns: its own URLs (its
context), the other run's id (run ids follow a pattern: it swaps its own agent name for the victim's), that
run's sandbox (the derivation is public), the admin routes (the embedded server's documented API), and the
upstreams' own addresses (``Intel``: what reading the proxy's configuration would give it). Every attempt is
one line of its answer: what it tried and the status it got, so the log holds even the attempts the proxy
never saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from fae.agents.base import AgentContext, AgentResult
from fae.proxy.routes import sandbox_id
from fae.util.credentials import CAPABILITY

GUESSED = "fae-cap-" + "0" * 32
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Intel:
    """What the hostile agent found out beside its context, and how it meets its victim in time."""

    victim_agent: str = "honest"
    upstreams: dict[str, str] = field(default_factory=dict)
    victim_ready: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)


INTEL: Intel | None = None
"""Set by the test, inside its event loop, before the runs start."""


def _intel() -> Intel:
    assert INTEL is not None, "set tests.harness.hostile_agent.INTEL first"
    return INTEL


def _call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def _tool_result(reply: httpx.Response) -> Any:
    try:
        return reply.json()["result"]["structuredContent"]
    except (ValueError, KeyError, TypeError):
        return None


class HostileAgent:
    name = "hostile"

    def config(self) -> dict[str, Any]:
        return {"kind": "hostile"}

    async def run(self, ctx: AgentContext) -> AgentResult:
        tried: list[dict[str, Any]] = []
        intel = _intel()
        try:
            await intel.victim_ready.wait()
            async with httpx.AsyncClient(timeout=30) as client:
                await self._attack(ctx, client, tried, intel)
        finally:
            intel.done.set()
        return AgentResult(answer=json.dumps(tried), stop_reason="answered")

    async def _attack(
        self, ctx: AgentContext, client: httpx.AsyncClient, tried: list[dict[str, Any]], intel: Intel
    ) -> None:
        async def attempt(name: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
            reply = await client.request(method, url, **kwargs)
            result = _tool_result(reply)
            tried.append(
                {
                    "name": name,
                    "status": reply.status_code,
                    "tool_error": result.get("error") if isinstance(result, dict) else None,
                }
            )
            return reply

        victim = ctx.run_id.replace(self.name, intel.victim_agent)
        own_cap = CAPABILITY.search(ctx.mcp_url)
        assert own_cap is not None, ctx.mcp_url
        cap = own_cap.group()
        own_prefix = ctx.mcp_url.split(f"/{cap}/", 1)[0] + f"/{cap}"  # .../run/{own}/agent/{cap}
        proxy = own_prefix.split("/run/", 1)[0]
        victim_sid = sandbox_id(victim)

        # the victim's MCP endpoint, with its own capability, a guessed one, and the old URL shape
        for name, prefix in (
            ("victim mcp, own capability", f"{proxy}/run/{victim}/agent/{cap}"),
            ("victim mcp, guessed capability", f"{proxy}/run/{victim}/agent/{GUESSED}"),
            ("victim mcp, no capability", f"{proxy}/run/{victim}/agent"),
        ):
            found = await attempt(
                f"{name}: search",
                "POST",
                f"{prefix}/mcp-fhir/mcp",
                json=_call("searchResources", {"resourceType": "Patient"}),
                headers=MCP_HEADERS,
            )
            bundle = _tool_result(found) or {}
            for entry in bundle.get("entry") or []:
                await attempt(
                    f"{name}: delete",
                    "POST",
                    f"{prefix}/mcp-fhir/mcp",
                    json=_call("deleteResource", {"resourceType": "Patient", "resourceId": entry["resource"]["id"]}),
                    headers=MCP_HEADERS,
                )

        # its own route, the victim's sandbox, and the admin routes, as itself and as the harness's actors
        victim_fhir = f"{own_prefix}/fhir/sandbox/{victim_sid}/fhir"
        await attempt("victim sandbox through own route", "GET", f"{victim_fhir}/Patient")
        await attempt("conditional delete in victim sandbox", "DELETE", f"{victim_fhir}/Patient?_id=x")
        await attempt("sandbox list", "GET", f"{own_prefix}/fhir/sandbox")
        await attempt("drop victim sandbox", "DELETE", f"{own_prefix}/fhir/sandbox/{victim_sid}")
        await attempt("reset victim sandbox", "POST", f"{own_prefix}/fhir/sandbox/{victim_sid}/$reset")
        as_setup = own_prefix.replace("/agent/", "/setup/")
        await attempt("sandbox list as setup", "GET", f"{as_setup}/fhir/sandbox")
        await attempt("LLM plan registry", "POST", f"{own_prefix}/llm/_fae/plans", json={"match": "x", "plan": {}})

        # forged proxy headers on its own MCP route: the proxy speaks for the run, not the client
        await attempt(
            "own mcp, forged run header",
            "POST",
            ctx.mcp_url,
            json=_call("searchResources", {"resourceType": "Patient"}),
            headers={**MCP_HEADERS, "x-fae-run": victim, "x-fae-capability": GUESSED},
        )
        # tool arguments that would turn a read into a search, a delete into a conditional delete
        for arguments in (
            {"resourceType": "Patient", "resourceId": "."},
            {"resourceType": "Patient", "resourceId": ".."},
            {"resourceType": "Patient?name=x", "resourceId": "1"},
            {"resourceType": f"sandbox/{victim_sid}/fhir/Patient", "resourceId": "1"},
        ):
            for tool in ("getResourceById", "deleteResource"):
                await attempt(
                    f"own mcp {tool} {arguments}", "POST", ctx.mcp_url, json=_call(tool, arguments), headers=MCP_HEADERS
                )

        # the upstreams' own addresses, past the proxy, with the headers the proxy would add
        forged = {"x-fae-run": victim, "x-fae-actor": "agent", "x-forwarded-host": proxy.split("//", 1)[1]}
        for name, base in intel.upstreams.items():
            if name == "fhir":
                await attempt("direct: sandbox list", "GET", f"{base}/sandbox")
                await attempt("direct: drop victim sandbox", "DELETE", f"{base}/sandbox/{victim_sid}")
                await attempt("direct: victim patients", "GET", f"{base}/sandbox/{victim_sid}/fhir/Patient")
            elif name == "llm":
                await attempt("direct: LLM plan registry", "GET", f"{base}/_fae/plans")
            else:
                await attempt(
                    f"direct: {name}",
                    "POST",
                    f"{base}/mcp",
                    json=_call("searchResources", {"resourceType": "Patient"}),
                    headers={**MCP_HEADERS, **forged},
                )


def hostile_factory(spec: str, **_: Any) -> HostileAgent:
    return HostileAgent()
