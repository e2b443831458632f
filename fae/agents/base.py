"""What every agent gets and gives back, and how an agent is named on the command line."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from fae.plan import Plan, load_plan
from fae.errors import FaeError, PlanError

STOP_REASONS = ("answered", "gave_up", "hit_cap", "errored", "no_answer")


class AgentError(FaeError):
    """The agent's side failed (its LLM answered 429, garbage, or timed out): the run is errored."""


@dataclass(frozen=True)
class AgentContext:
    """Everything an agent may use for one run. It reaches FHIR only through ``mcp_url``."""

    run_id: str
    prompt: str
    now: datetime
    mcp_url: str
    llm_base_url: str | None = None
    gold_plan: Plan | None = None
    extra_mcp: dict[str, str] = field(default_factory=dict)
    # proxied FHIR bases for the other actors a scenario plays (other-user, fault, verifier),
    # and the server's own base, which the proxy does not see; scripted scenarios only
    fhir_bases: dict[str, str] = field(default_factory=dict)
    fhir_direct: str | None = None
    variation: int = 0


@dataclass(frozen=True)
class AgentResult:
    answer: str | None
    stop_reason: str = "answered"
    details: dict[str, Any] = field(default_factory=dict)


class Agent(Protocol):
    name: str

    def config(self) -> dict[str, Any]: ...

    async def run(self, ctx: AgentContext) -> AgentResult: ...


def agent_slug(spec: str) -> str:
    """A run-id-safe form of an agent spec; a long one keeps a hash so two specs never share a slug."""
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in spec).strip("-") or "agent"
    if len(slug) <= 48:
        return slug
    return f"{slug[:39]}-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


def build_agent(spec: str, **llm_options: Any) -> Agent:
    """An agent from its command-line name.

    ``gold``, ``scripted:gold`` or ``plan:PATH`` (scripted agents), or
    ``langchain:CONFIG[@MODEL]`` with CONFIG one of baseline, specs,
    memory-nospec, memory-spec, memory-spec+specs (see docs/agents.md).
    ``llm_options`` (model, api_key, timeout_s, max_retries) go to LLM agents;
    scripted agents ignore them.
    """
    from fae.agents.scripted_agent import ScriptedAgent

    if spec in ("gold", "scripted:gold"):
        return ScriptedAgent(name="scripted:gold", plan=None)
    if spec.startswith("plan:"):
        path = Path(spec[5:])
        return ScriptedAgent(name=f"plan:{path.name}", plan=load_plan(path))
    if spec.startswith("scenario:"):
        from fae.tasks.scenarios import scenario_names, scenario_plan

        name = spec.split(":", 1)[1]
        if name not in scenario_names():
            raise PlanError(f"unknown scenario {name!r}; the scenarios are: {', '.join(scenario_names())}")
        return ScriptedAgent(name=spec, plan=None, plan_for=lambda variation: scenario_plan(name, variation))
    if spec.startswith("langchain:"):
        from fae.agents.langchain_agent import build_langchain_agent

        return build_langchain_agent(spec, **llm_options)
    raise PlanError(f"unknown agent {spec!r}: use gold, scripted:gold, plan:PATH, scenario:NAME "
                    f"or langchain:CONFIG[@MODEL]")
