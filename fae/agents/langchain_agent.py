"""The LangChain tool-calling agent: ChatOpenAI with MCP tools bound, in a loop of at most 15 steps.

Each step is one LLM call; the tool calls it asks for run through the MCP
toolboxes and their results go back as tool messages. The loop stops when the
model answers without tool calls (``answered``, or ``no_answer`` if the answer
is empty), after too many failed tool calls in a row (``gave_up``), or when
the step budget is spent (``hit_cap``). An LLM call that fails (HTTP error,
timeout, a body that is not a chat completion) raises ``AgentError``, so the
run ends ``errored``. Token use is not counted here: it comes from the
recorded LLM calls.

Every request names ``tool_choice`` (``auto`` by default): some OpenAI-compatible
servers (llama.cpp's) show the model no tools unless it is named. A
configuration can ask for another (``langchain:CONFIG?tool_choice=VALUE``):
``none``, ``required``, a tool's name, or ``omit`` (not sent, for a server
that refuses the field).
"""

from __future__ import annotations

import importlib
import json
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from fae.agents.base import AgentContext, AgentError, AgentResult
from fae.agents.langchain_configs import Configuration, configuration, spec_options
from fae.agents.mcp_client import McpToolbox
from fae.agents.mcp_langchain import langchain_tools
from fae.agents.plan_runner import ToolOutcome
from fae.errors import FaeError
from fae.util.tls import client_tls

PREFIX = "langchain:"
MAX_ITERATIONS = 15
MAX_CONSECUTIVE_TOOL_ERRORS = 5
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 2
MEMORY_SERVER_MODULE = "fae.memory.server"
DEFAULT_TOOL_CHOICE = "auto"
OMIT = "omit"
"""``tool_choice=omit``: the request carries no ``tool_choice`` (what runs recorded before it was sent did)."""


@dataclass(frozen=True)
class LlmSettings:
    """How the agent talks to its model; the base URL comes per run from the harness (the proxy)."""

    model: str
    api_key: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES


def _env_number(name: str, default: float, kind: type) -> Any:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise FaeError(f"{name}={raw!r} is not a number") from None
    if value < 0:
        raise FaeError(f"{name} must not be negative, got {raw}")
    return value


def llm_settings(
    model: str | None = None, api_key: str | None = None, timeout_s: float | None = None, max_retries: int | None = None
) -> LlmSettings:
    """Settings from arguments, else from FAE_MODEL, OPENAI_API_KEY, FAE_LLM_TIMEOUT_S, FAE_LLM_MAX_RETRIES."""
    model = model or os.environ.get("FAE_MODEL")
    if not model:
        raise FaeError(
            "the LangChain agent needs a model: pass --model, set FAE_MODEL, "
            "or name it in the agent as langchain:CONFIG@MODEL"
        )
    # A local OpenAI-compatible server ignores the key, but the SDK insists on one.
    key = api_key or os.environ.get("OPENAI_API_KEY") or "unused"
    return LlmSettings(
        model=model,
        api_key=key,
        timeout_s=timeout_s if timeout_s is not None else _env_number("FAE_LLM_TIMEOUT_S", DEFAULT_TIMEOUT_S, float),
        max_retries=max_retries
        if max_retries is not None
        else _env_number("FAE_LLM_MAX_RETRIES", DEFAULT_MAX_RETRIES, int),
    )


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:400]


@dataclass
class LoopOutcome:
    answer: str | None
    stop_reason: str
    iterations: int
    tool_calls: int
    tool_errors: int


async def tool_loop(
    llm: Runnable,
    tools: dict[str, BaseTool],
    messages: list[BaseMessage],
    *,
    max_iterations: int = MAX_ITERATIONS,
    max_consecutive_errors: int = MAX_CONSECUTIVE_TOOL_ERRORS,
) -> LoopOutcome:
    """Call the model and its tools until it answers, gives up after errors, or spends its steps."""
    calls = errors = in_a_row = 0
    for step in range(1, max_iterations + 1):
        try:
            reply = await llm.ainvoke(messages)
        # Everything raised inside the model call is about the model's endpoint or its reply:
        # the openai SDK's HTTP errors and timeouts, a body that is not JSON (JSONDecodeError
        # is a ValueError), or JSON that is not a chat completion (pydantic, Key/TypeError).
        except (openai.OpenAIError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise AgentError(f"LLM call {step} failed: {_describe(exc)}") from exc
        if not isinstance(reply, AIMessage):
            raise AgentError(f"LLM call {step} returned {type(reply).__name__}, not a chat message")
        messages.append(reply)
        if not reply.tool_calls and not reply.invalid_tool_calls:
            text = reply.text.strip()
            return LoopOutcome(text or None, "answered" if text else "no_answer", step, calls, errors)
        for result in [*(await _run_tool_calls(tools, reply)), *_refuse_invalid(reply)]:
            messages.append(result)
            calls += 1
            failed = result.status == "error"
            errors += failed
            in_a_row = in_a_row + 1 if failed else 0
        if in_a_row >= max_consecutive_errors:
            return LoopOutcome(None, "gave_up", step, calls, errors)
    return LoopOutcome(None, "hit_cap", max_iterations, calls, errors)


async def _run_tool_calls(tools: dict[str, BaseTool], reply: AIMessage) -> list[ToolMessage]:
    """Run the reply's tool calls in order; an unknown tool or a failed call is an error message."""
    out = []
    for call in reply.tool_calls:
        tool = tools.get(call["name"])
        if tool is None:
            diagnostics = f"there is no tool named {call['name']}; the tools are {', '.join(sorted(tools))}"
            out.append(
                ToolMessage(
                    content=_error_text("UNKNOWN_TOOL", diagnostics),
                    tool_call_id=call["id"] or "",
                    name=call["name"],
                    status="error",
                )
            )
            continue
        message = await tool.ainvoke({**call, "type": "tool_call"})
        if isinstance(message.artifact, ToolOutcome) and message.artifact.is_error:
            message.status = "error"
        out.append(message)
    return out


def _refuse_invalid(reply: AIMessage) -> list[ToolMessage]:
    """A tool call whose arguments are not JSON is answered with an error, so the model can retry."""
    return [
        ToolMessage(
            content=_error_text(
                "INVALID_ARGUMENTS",
                f"the arguments of {bad.get('name')} are not a JSON object: {bad.get('error') or bad.get('args')}",
            ),
            tool_call_id=bad.get("id") or "",
            name=bad.get("name") or "",
            status="error",
        )
        for bad in reply.invalid_tool_calls
    ]


def _error_text(code: str, diagnostics: str) -> str:
    """An error result in the shape fae's MCP servers use, as the model reads it."""
    return json.dumps({"error": code, "diagnostics": diagnostics}, ensure_ascii=False)


class LangChainAgent:
    """One configuration of the LangChain tool-calling agent (see ``langchain_configs``)."""

    def __init__(
        self,
        name: str,
        config: Configuration,
        settings: LlmSettings,
        *,
        max_iterations: int = MAX_ITERATIONS,
        tool_choice: str = DEFAULT_TOOL_CHOICE,
    ) -> None:
        self.name = name
        self.configuration = config
        self.settings = settings
        self.max_iterations = max_iterations
        self.tool_choice = tool_choice

    @property
    def required_mcp(self) -> tuple[str, ...]:
        """The ``AgentContext.extra_mcp`` names this configuration needs."""
        return self.configuration.servers

    def config(self) -> dict[str, Any]:
        return {
            "kind": "langchain",
            "configuration": self.configuration.name,
            "model": self.settings.model,
            "mcp_servers": ["fhir", *self.configuration.servers],
            "prompt_parts": list(self.configuration.prompt_parts),
            "prompt_sha256_16": self.configuration.prompt_digest(),
            "system_prompt": self.configuration.system_prompt(),
            "max_iterations": self.max_iterations,
            "max_consecutive_tool_errors": MAX_CONSECUTIVE_TOOL_ERRORS,
            "timeout_s": self.settings.timeout_s,
            "max_retries": self.settings.max_retries,
            "tool_choice": self.tool_choice,
        }

    def _server_urls(self, ctx: AgentContext) -> dict[str, str]:
        missing = [name for name in self.configuration.servers if name not in ctx.extra_mcp]
        if missing:
            raise FaeError(
                f"agent {self.name} needs the MCP server(s) {', '.join(missing)}, which this "
                f"recording does not serve (it has: {', '.join(ctx.extra_mcp) or 'none'})",
                run_id=ctx.run_id,
            )
        return {"fhir": ctx.mcp_url, **{name: ctx.extra_mcp[name] for name in self.configuration.servers}}

    async def run(self, ctx: AgentContext) -> AgentResult:
        if not ctx.llm_base_url:
            raise AgentError(
                "the LangChain agent needs an LLM endpoint: record with --llm-url (or OPENAI_BASE_URL)",
                run_id=ctx.run_id,
            )
        urls = self._server_urls(ctx)
        async with AsyncExitStack() as stack:
            boxes = {name: await stack.enter_async_context(McpToolbox(url)) for name, url in urls.items()}
            tools = await langchain_tools(boxes)
            http_client = await stack.enter_async_context(httpx.AsyncClient(verify=client_tls()))
            model = ChatOpenAI(
                model=self.settings.model,
                base_url=ctx.llm_base_url,
                api_key=SecretStr(self.settings.api_key),
                timeout=self.settings.timeout_s,
                max_retries=self.settings.max_retries,
                http_async_client=http_client,
            )
            bound = list(tools.values())
            choice = None if self.tool_choice == OMIT or not bound else self.tool_choice
            llm = model.bind_tools(bound, tool_choice=choice)
            messages: list[BaseMessage] = [SystemMessage(self.configuration.system_prompt()), HumanMessage(ctx.prompt)]
            try:
                outcome = await tool_loop(llm, tools, messages, max_iterations=self.max_iterations)
            except AgentError as exc:
                raise AgentError(str(exc), run_id=ctx.run_id) from exc.__cause__
        return AgentResult(
            answer=outcome.answer,
            stop_reason=outcome.stop_reason,
            details={
                "iterations": outcome.iterations,
                "tool_calls": outcome.tool_calls,
                "tool_errors": outcome.tool_errors,
                "model": self.settings.model,
            },
        )


def memory_server_available() -> bool:
    """Whether the Reflexion memory MCP server (``memory_mcp_http_app``) can be imported."""
    try:
        module = importlib.import_module(MEMORY_SERVER_MODULE)
    except ImportError:
        return False
    return hasattr(module, "memory_mcp_http_app")


def build_langchain_agent(
    spec: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout_s: float | None = None,
    max_retries: int | None = None,
    tool_choice: str = DEFAULT_TOOL_CHOICE,
) -> LangChainAgent:
    """An agent from ``langchain:CONFIG[?tool_choice=VALUE][@MODEL]`` (the spec's model and tool choice override
    ``model`` and ``tool_choice``)."""
    body = spec.removeprefix(PREFIX)
    head, _, spec_model = body.partition("@")
    config_name, _, query = head.partition("?")
    options = spec_options(spec, query)
    config = configuration(config_name)
    if config.uses_memory and not memory_server_available():
        raise FaeError(
            f"agent {spec} needs the Reflexion memory MCP server "
            f"({MEMORY_SERVER_MODULE}.memory_mcp_http_app), which is not installed"
        )
    settings = llm_settings(spec_model or model, api_key, timeout_s, max_retries)
    return LangChainAgent(spec, config, settings, tool_choice=options.get("tool_choice", tool_choice))
