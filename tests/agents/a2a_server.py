"""An A2A agent built with the official a2a-sdk, served on 127.0.0.1, for the tests of ``a2a:URL``.

Its ``behaviour`` says how its tasks end. ``fhir`` is an agent that does the task: it reads the run's
endpoints from the message's data part, calls fae's FHIR MCP server there with the official MCP SDK
client (the write it was given, as the task's gold plan has it) and answers with an artifact.
``claude`` is driven by its model: the official Anthropic SDK at the data part's Anthropic-compatible
base (fae's scripted model plays the task's gold plan), its tool calls made over MCP the same way.
The others end failed, rejected or input-required, never end (until fae cancels the task), or are
still working when ``SendMessage`` is answered and found completed by the first ``GetTask`` (``later``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anthropic
import anyio
import httpx2
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_task_from_user_message, new_text_part
from a2a.helpers.proto_helpers import new_text_message as _text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task, TaskState
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from fae.util.serve import serve_asgi


@dataclass
class Heard:
    """What the agent was sent, for the test to compare with what fae meant to send."""

    prompts: list[str] = field(default_factory=list)
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[Any] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)


class FhirAgent(AgentExecutor):
    def __init__(self, behaviour: str, write: dict[str, Any] | None, heard: Heard) -> None:
        self.behaviour, self.write, self.heard = behaviour, write, heard

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task or new_task_from_user_message(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        self.heard.prompts.extend(get_text_parts(message.parts))
        self.heard.endpoints.extend(get_data_parts(message.parts))
        await updater.start_work()
        say = _say(task.id, task.context_id)
        if self.behaviour == "fail":
            await updater.failed(say("the FHIR server is out of my reach"))
        elif self.behaviour == "reject":
            await updater.reject(say("I do not register patients"))
        elif self.behaviour == "input":
            await updater.requires_input(say("Which clinic should the patient be registered at?"))
        elif self.behaviour == "hang":
            await anyio.sleep_forever()  # until fae gives up and cancels the task
        elif self.behaviour == "later":
            pass  # the answer to SendMessage says working; the task ends when it is polled (LaterStore)
        elif self.behaviour == "claude":
            endpoints = self.heard.endpoints[-1]
            answer = await _tool_loop(endpoints, get_text_parts(message.parts)[0])
            await updater.add_artifact([new_text_part(answer)], name="answer")
            await updater.complete()
        else:
            endpoints = self.heard.endpoints[-1]
            created = await _create(endpoints["fhir_mcp_url"], self.write or {})
            self.heard.tool_results.append(created)
            await updater.add_artifact([new_text_part(f"<PATIENT>{created['id']}</PATIENT>")], name="answer")
            await updater.complete(say("registered"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.heard.cancelled.append(context.task_id or "")
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


class LaterStore(InMemoryTaskStore):
    """A store whose working tasks are found completed, with an artifact, by the first ``GetTask`` that asks."""

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        task = await super().get(task_id, context)
        if task is not None and context.state.get("method") == "GetTask" and task.status.state == WORKING:
            task.status.state = TaskState.TASK_STATE_COMPLETED
            task.artifacts.add(artifact_id="late", parts=[new_text_part("done after the answer")])
            await self.save(task, context)
        return task


WORKING = TaskState.TASK_STATE_WORKING


def _say(task_id: str, context_id: str) -> Any:
    return lambda text: _text_message(text, task_id=task_id, context_id=context_id)


async def _create(mcp_url: str, write: dict[str, Any]) -> dict[str, Any]:
    """One createResource call with the official MCP SDK client, at the URL the data part gave."""
    async with httpx2.AsyncClient(timeout=30) as http, Client(streamable_http_client(mcp_url, http_client=http)) as mcp:
        result = await mcp.call_tool("createResource", write)
    assert not result.is_error, result
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def _tool_loop(endpoints: dict[str, Any], prompt: str, model: str = "scripted:gold") -> str:
    """A model-driven agent: the official Anthropic SDK at the data part's Anthropic base, its tool calls made
    with the official MCP SDK client at the data part's FHIR MCP URL, until the model answers in words."""
    # every client is closed in this loop: one left to the garbage collector closes itself in a later test's loop
    async with (
        anthropic.AsyncAnthropic(base_url=endpoints["anthropic_base_url"], api_key="k", max_retries=0) as claude,
        httpx2.AsyncClient(timeout=30) as http,
        Client(streamable_http_client(endpoints["fhir_mcp_url"], http_client=http)) as mcp,
    ):
        listed = await mcp.list_tools()
        tools: Any = [
            {"name": t.name, "description": t.description or "", "input_schema": t.input_schema} for t in listed.tools
        ]
        messages: list[Any] = [{"role": "user", "content": prompt}]
        for _ in range(8):
            reply = await claude.messages.create(model=model, max_tokens=1024, messages=messages, tools=tools)
            calls = [block for block in reply.content if block.type == "tool_use"]
            if not calls:
                return "".join(block.text for block in reply.content if block.type == "text")
            results = []
            for call in calls:
                result = await mcp.call_tool(call.name, dict(call.input))  # type: ignore[arg-type]
                text = "".join(c.text for c in result.content if c.type == "text")  # type: ignore[union-attr]
                results.append({"type": "tool_result", "tool_use_id": call.id, "content": text})
            messages += [
                {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in reply.content]},
                {"role": "user", "content": results},
            ]
    raise AssertionError("the scripted model never answered")


def _card(url: str) -> AgentCard:
    return AgentCard(
        name="patient registrar",
        description="Registers patients through fae's FHIR MCP server",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="register", name="register a patient", description="FHIR writes", tags=["fhir"])],
    )


class BearerOnly:
    """ASGI middleware: a POST without the bearer token gets 401, as an A2A server that requires auth answers."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            sent = dict(scope["headers"]).get(b"authorization")
            if sent != self.expected:
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": b"a bearer token is required"})
                return
        await self.app(scope, receive, send)


@asynccontextmanager
async def a2a_server(
    behaviour: str = "fhir", write: dict[str, Any] | None = None, *, streaming: bool = True, token: str | None = None
) -> AsyncIterator[tuple[str, Heard]]:
    """Serve the agent until the block exits; yields its URL and what it heard. With ``token``, its JSON-RPC
    endpoint answers 401 to a request without ``Authorization: Bearer TOKEN`` (its card stays public)."""
    heard = Heard()
    where: dict[str, str] = {}

    async def with_url(card: AgentCard) -> AgentCard:
        served = _card(where["url"])
        served.capabilities.streaming = streaming
        return served

    card = _card("http://127.0.0.1/")
    store = LaterStore() if behaviour == "later" else InMemoryTaskStore()
    handler = DefaultRequestHandler(FhirAgent(behaviour, write, heard), store, card)
    app = Starlette(
        routes=[*create_agent_card_routes(card, card_modifier=with_url), *create_jsonrpc_routes(handler, "/")]
    )
    if token is not None:
        app.add_middleware(BearerOnly, token=token)
    async with serve_asgi(app) as port:
        where["url"] = f"http://127.0.0.1:{port}/"
        yield where["url"], heard
