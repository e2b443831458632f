"""An agent served over A2A (``a2a:URL``): each run's task goes to the A2A server as one message, through the proxy.

The server is the agent's own upstream: the stack registers its origin behind the recording proxy
(``Agent.upstreams``) and the run reaches it with its agent capability, so every A2A request and
response is an ``HttpExchanged`` of actor ``agent`` in the run's log. The message carries the prompt
as a text part and the run's proxied endpoints as a data part (``run_endpoints``); the server's
agent reaches FHIR and its model through those alone. The protocol itself is driven by the official
``a2a-sdk`` client (``fae.agents.a2a_client``, the ``a2a`` extra).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from typing import Any
from urllib.parse import urlsplit

from fae.agents.base import AgentContext, AgentError, AgentResult
from fae.errors import PlanError

TIMEOUT_ENV = "FAE_A2A_TIMEOUT_S"
TOKEN_ENV = "FAE_A2A_TOKEN"
"""A bearer token fae sends the A2A server in ``Authorization`` (the scheme an agent card's ``HTTPAuthSecurityScheme``
names most often); like every credential it is redacted from the log."""
DEFAULT_TIMEOUT_S = 600.0
"""How long a run's A2A task may take, from its first request to its final state."""
CLIENT_MODULE = "fae.agents.a2a_client"
ENDPOINTS_KIND = "fae.run-endpoints"
"""The ``kind`` of the data part, so an A2A agent tells fae's endpoints from any other data it is sent."""


def origin_of(url: str) -> str:
    """``scheme://host:port`` of an A2A agent's URL: the upstream the proxy forwards the whole server to."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def upstream_name(origin: str) -> str:
    """The proxy's name for an A2A server: one per origin, stable across runs and recordings."""
    return "a2a-" + hashlib.sha256(origin.encode()).hexdigest()[:12]


def check_url(url: str) -> str:
    """The A2A agent's URL, or a PlanError naming what is wrong with it (before anything records)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PlanError(f"a2a:{url}: the A2A agent's URL must be http(s)://HOST[:PORT][/PATH]")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise PlanError(f"a2a:{url}: the A2A agent's URL may not carry a query, a fragment or credentials")
    try:
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise PlanError(f"a2a:{url}: the port is not a number") from None
    return url.rstrip("/")


def timeout_from_env() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise PlanError(f"{TIMEOUT_ENV} must be a positive number of seconds (got {raw!r})")
    return value


def check_a2a_spec(spec: str) -> None:
    """``a2a:URL`` and the timeout setting, checked before anything records (the SDK when the agent is built)."""
    check_url(spec.removeprefix("a2a:"))
    timeout_from_env()


def run_endpoints(ctx: AgentContext) -> dict[str, Any]:
    """What the data part tells the A2A agent: the run's own proxied MCP and LLM endpoints, nothing else.

    The Anthropic-compatible base is the proxied LLM root (the SDKs add ``/v1/messages``); the
    OpenAI-compatible one ends in ``/v1``. Both are None when the recording has no LLM.
    """
    llm = ctx.llm_base_url
    return {
        "kind": ENDPOINTS_KIND,
        "run_id": ctx.run_id,
        "now": ctx.now.isoformat(),
        "fhir_mcp_url": ctx.mcp_url,
        "fhir_mcp_sse_url": ctx.mcp_url.removesuffix("/mcp") + "/sse",
        "mcp_servers": {"fhir": ctx.mcp_url, **ctx.extra_mcp},
        "openai_base_url": llm,
        "anthropic_base_url": llm.removesuffix("/v1") if llm else None,
    }


class A2aAgent:
    """The agent under test is an A2A server at ``url``; fae is the client that sends it each run's task."""

    plays_other_actors = False

    def __init__(self, url: str, *, timeout_s: float | None = None, poll_s: float = 1.0) -> None:
        self.url = check_url(url)
        self.name = f"a2a:{self.url}"
        self.timeout_s = timeout_from_env() if timeout_s is None else timeout_s
        if not self.timeout_s > 0 or not poll_s > 0:
            raise PlanError(f"{self.name}: the timeout and the polling interval must be positive")
        self.poll_s = poll_s
        self.origin = origin_of(self.url)
        self.upstream = upstream_name(self.origin)
        self._client = _client_module(self.name)
        token = os.environ.get(TOKEN_ENV, "").strip()
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    @property
    def upstreams(self) -> dict[str, str]:
        """The servers this agent talks to itself, which the stack puts behind the proxy: name → base URL."""
        return {self.upstream: self.origin}

    def config(self) -> dict[str, Any]:
        return {"kind": "a2a", "url": self.url, "timeout_s": self.timeout_s}

    async def run(self, ctx: AgentContext) -> AgentResult:
        proxied = ctx.upstreams.get(self.upstream)
        if proxied is None:
            raise AgentError(f"{self.name}: the A2A server is not behind the recording proxy (no upstream for it)")
        # the agent's URL below its origin, reached through the proxy's route to that origin
        base = proxied.rstrip("/") + self.url.removeprefix(self.origin)
        try:
            final = await self._client.follow_task(
                base,
                origin=self.origin,
                proxied_origin=proxied,
                prompt=ctx.prompt,
                endpoints=run_endpoints(ctx),
                timeout_s=self.timeout_s,
                poll_s=self.poll_s,
                headers=self._headers,
            )
        except AgentError as exc:
            raise AgentError(f"{self.name}: {exc}") from None
        details = {"a2a_state": final.state, "a2a_task_id": final.task_id}
        if final.state != "completed":
            said = f": {final.status_text}" if final.status_text else ""
            raise AgentError(f"{self.name}: the A2A task ended {final.state}{said}")
        answer = final.answer()
        return AgentResult(answer=answer, stop_reason="answered" if answer else "no_answer", details=details)


def _client_module(name: str) -> Any:
    """The A2A protocol driver, which needs the ``a2a`` extra: a clear error, when the agent is built, without it."""
    try:
        return importlib.import_module(CLIENT_MODULE)
    except ImportError as exc:
        raise PlanError(f"{name} needs the official A2A SDK: install fae[a2a] ({exc})") from None


def build_a2a_agent(spec: str, **_: Any) -> A2aAgent:
    """``a2a:URL`` → the agent; LLM options are the A2A agent's own business and are ignored."""
    return A2aAgent(spec.removeprefix("a2a:"))


def a2a_agent_from_config(name: str, config: dict[str, Any]) -> A2aAgent:
    """The agent a stored ``agent_config`` of kind ``a2a`` describes (``fae replay``: the same server, which must be
    running, is sent the task again; its model is answered from the recording)."""
    url, timeout_s = config.get("url"), config.get("timeout_s")
    if not isinstance(url, str) or not url:
        raise PlanError(f"agent {name!r}: its stored configuration has no A2A URL")
    return A2aAgent(url, timeout_s=float(timeout_s) if isinstance(timeout_s, int | float) else None)
