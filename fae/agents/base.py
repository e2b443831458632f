"""What every agent gets and gives back."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from fae.errors import FaeError
from fae.plan import Plan
from fae.store.events import Event

Record = Callable[[Event, dict[str, bytes]], Awaitable[None]]
"""Appends an event of the agent's own (with the blobs it names) to its run's log, as the ``agent`` actor."""


class AgentError(FaeError):
    """The agent's side failed (its LLM answered 429, garbage, or timed out): the run is errored."""


@dataclass(frozen=True)
class AgentContext:
    """Everything an agent may use for one run. It reaches FHIR only through ``mcp_url``.

    Each URL is its own run's, through the recording proxy, with the capability of its ``agent`` actor
    in the path: it reaches nothing of another run, no admin route, and stops working when the run ends.
    """

    run_id: str
    prompt: str
    now: datetime
    mcp_url: str
    llm_base_url: str | None = None
    gold_plan: Plan | None = None
    extra_mcp: dict[str, str] = field(default_factory=dict)
    # proxied FHIR bases for the other actors a scenario plays (other-user, fault, verifier),
    # and the server's own base, which the proxy does not see, with the headers it takes there;
    # given only to an agent with ``plays_other_actors`` (fae's scripted agents)
    fhir_bases: dict[str, str] = field(default_factory=dict)
    fhir_direct: str | None = None
    variation: int = 0
    # the run's proxied FHIR base as the agent, only where the task allows access past MCP (``fhir_access``)
    fhir_base: str | None = None
    fhir_direct_headers: dict[str, str] = field(default_factory=dict, repr=False)
    upstreams: dict[str, str] = field(default_factory=dict)
    """The agent's own servers (an A2A agent's), by the names it declared in ``upstreams``, through the proxy."""
    # what the agent saw that the proxy did not (a program's exit and stderr), written to the run's log
    record: Record | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class AgentResult:
    answer: str | None
    stop_reason: str = "answered"
    details: dict[str, Any] = field(default_factory=dict)


class Agent(Protocol):
    name: str

    def config(self) -> dict[str, Any]: ...

    async def run(self, ctx: AgentContext) -> AgentResult: ...


def declared_upstreams(agents: Iterable[Agent]) -> dict[str, str]:
    """The servers the agents talk to themselves (``agent.upstreams``: name → base URL), for the stack to proxy."""
    found: dict[str, str] = {}
    for agent in agents:
        for name, url in getattr(agent, "upstreams", {}).items():
            if found.setdefault(name, url) != url:
                raise ValueError(f"upstream {name!r} is declared for two servers: {found[name]} and {url}")
    return found


def agent_slug(spec: str) -> str:
    """A run-id-safe form of an agent spec; a long one keeps a hash so two specs never share a slug."""
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in spec).strip("-") or "agent"
    if len(slug) <= 48:
        return slug
    return f"{slug[:39]}-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"
