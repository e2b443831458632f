"""The environment a program agent runs in: the user's own, with its run's endpoints put in and no other way out.

The names follow the official SDKs: ``OPENAI_BASE_URL`` (the openai packages for Python and Node read it, with
``/v1``) and ``ANTHROPIC_BASE_URL`` (the anthropic SDKs, without ``/v1``), both the run's proxied LLM base, so
an unmodified SDK agent is recorded. The program's API key stays the user's (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``); the proxy redacts the headers the SDKs carry it in. Every variable fae sets is removed
from the inherited environment first, so a user's own base URL never leads a program past the proxy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from fae.agents.base import AgentContext

OPENAI_BASE = "OPENAI_BASE_URL"
ANTHROPIC_BASE = "ANTHROPIC_BASE_URL"
SET_BY_FAE = (
    "FAE_RUN_ID",
    "FAE_TASK_NOW",
    "FAE_PROMPT_FILE",
    "FAE_ANSWER_FILE",
    "FAE_MCP_URL",
    "FAE_MCP_SSE_URL",
    "FAE_MCP_SERVERS",
    "FAE_SPECS_MCP_URL",
    "FAE_SPECS_MCP_SSE_URL",
    "FAE_FHIR_BASE",  # only where the task allows it (``fhir_access: direct``)
    OPENAI_BASE,
    ANTHROPIC_BASE,
)
"""Names fae sets (or leaves unset) for every run; ``FAE_MEMORY_<NAME>_MCP_URL`` besides."""
_MEMORY_VARIABLE = re.compile(r"FAE_MEMORY_\w+_MCP_URL")
_LOOPBACK = "127.0.0.1,localhost"
NO_LLM = "http://no-llm-given-to-fae.invalid"
"""The LLM base a program gets when the recording has no LLM: a name that never resolves (RFC 6761), so a
model call fails, naming why, rather than reach a model unrecorded."""


def sse_url(streamable_url: str) -> str:
    """The legacy SSE endpoint beside a streamable-HTTP one (fae's MCP servers serve ``/sse`` beside ``/mcp``)."""
    return streamable_url.rstrip("/").removesuffix("/mcp") + "/sse"


def memory_variable(server: str) -> str:
    """``memory:spec`` → ``FAE_MEMORY_SPEC_MCP_URL``."""
    store = re.sub(r"\W", "_", server.removeprefix("memory:")).upper()
    return f"FAE_MEMORY_{store}_MCP_URL"


def program_env(
    inherited: Mapping[str, str],
    ctx: AgentContext,
    *,
    prompt_file: Path,
    answer_file: Path,
    model: str | None = None,
) -> dict[str, str]:
    """``inherited`` less fae's names, plus the run's endpoints and files (docs/agents.md, "Any program")."""
    env = {k: v for k, v in inherited.items() if k not in SET_BY_FAE and not _MEMORY_VARIABLE.fullmatch(k)}
    servers = {"fhir": ctx.mcp_url, **ctx.extra_mcp}
    env.update(
        FAE_RUN_ID=ctx.run_id,
        FAE_TASK_NOW=ctx.now.isoformat(),
        FAE_PROMPT_FILE=str(prompt_file),
        FAE_ANSWER_FILE=str(answer_file),
        FAE_MCP_URL=ctx.mcp_url,
        FAE_MCP_SSE_URL=sse_url(ctx.mcp_url),
        FAE_MCP_SERVERS=json.dumps(servers, sort_keys=True),
    )
    for server, url in ctx.extra_mcp.items():
        if server == "specs":
            env["FAE_SPECS_MCP_URL"], env["FAE_SPECS_MCP_SSE_URL"] = url, sse_url(url)
        elif server.startswith("memory:"):
            env[memory_variable(server)] = url
    llm_base = ctx.llm_base_url or f"{NO_LLM}/v1"
    env[OPENAI_BASE] = llm_base
    env[ANTHROPIC_BASE] = llm_base.removesuffix("/v1")
    if ctx.fhir_base:
        env["FAE_FHIR_BASE"] = ctx.fhir_base
    if model:
        env["FAE_MODEL"] = model
    # a user's HTTP proxy must not carry the program's calls to the recording proxy on 127.0.0.1
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = ",".join(filter(None, (env.get(name), _LOOPBACK)))
    return env
