"""One A2A task, driven with the official ``a2a-sdk`` client: send the run's message, follow the task to its end.

The agent card is read from ``URL/.well-known/agent-card.json`` (the SDK's resolver) through the
proxy. The card names the server's interfaces by their own URLs; fae keeps those on the agent's
origin and reaches them through the proxy's route to that origin, so no A2A request bypasses the
log (an interface on another origin is not used). The message goes by the SDK's streaming call
when the card says the server streams (``SendStreamingMessage``), else by ``SendMessage``; a task
still submitted or working when the answer ends is polled with ``GetTask`` until its state is final
(completed, failed, canceled, rejected) or interrupted (input-required, auth-required): fae sends
one message per run and never answers a question. A task that outlives the timeout is asked to
cancel (``CancelTask``, best effort) and the run ends with the state it had reached.
"""

from __future__ import annotations

import uuid
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError

from fae.agents.base import AgentError
from fae.util.tls import client_tls

STATES = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
"""The SDK's task states by the names the A2A specification gives them."""
SETTLED = frozenset({"completed", "failed", "canceled", "rejected", "input-required", "auth-required"})
"""States after which fae stops following a task: final ones, and the interrupted ones fae cannot answer."""
BINDINGS: list[str] = [TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value]
CANCEL_S = 10.0


def _texts(parts: Any) -> list[str]:
    return [part.text for part in parts if part.HasField("text") and part.text]


@dataclass
class FollowedTask:
    """What fae has learnt of the run's task from the server's answers, folded in order."""

    task_id: str | None = None
    state: str = "unknown"
    status_text: str | None = None
    reply: str | None = None
    """The text of a message the server answered with instead of a task (a task-less reply is final)."""
    artifacts: dict[str, list[str]] = field(default_factory=dict)

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    def take(self, event: StreamResponse) -> None:
        if event.HasField("message"):
            self.reply, self.state = "\n".join(_texts(event.message.parts)), "completed"
        elif event.HasField("task"):
            self.take_task(event.task)
        elif event.HasField("status_update"):
            self.task_id = event.status_update.task_id or self.task_id
            self._status(event.status_update.status)
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            self.task_id = update.task_id or self.task_id
            self._artifact(update.artifact, append=update.append)

    def take_task(self, task: Task) -> None:
        self.task_id = task.id or self.task_id
        self._status(task.status)
        self.artifacts = {}
        for artifact in task.artifacts:
            self._artifact(artifact, append=True)

    def _status(self, status: TaskStatus) -> None:
        self.state = STATES.get(status.state, "unknown")
        # the latest status's message, or none: an earlier one ("looking…") is never the answer
        self.status_text = ("\n".join(_texts(status.message.parts)) or None) if status.HasField("message") else None

    def _artifact(self, artifact: Artifact, *, append: bool) -> None:
        texts = _texts(artifact.parts)
        if append:
            self.artifacts.setdefault(artifact.artifact_id, []).extend(texts)
        else:
            self.artifacts[artifact.artifact_id] = texts

    def answer(self) -> str | None:
        """A task-less reply's text; else the task's artifacts' text parts, in order; else its final status message."""
        if self.reply is not None:
            return self.reply or None
        text = "\n".join(t for texts in self.artifacts.values() for t in texts)
        return text or self.status_text


def proxied_card(card: AgentCard, origin: str, proxied_origin: str) -> AgentCard:
    """``card`` with only its interfaces on ``origin``, each reached through the proxy instead."""
    kept = AgentCard()
    kept.CopyFrom(card)
    del kept.supported_interfaces[:]
    home = urlsplit(origin)
    for interface in card.supported_interfaces:
        parts = urlsplit(interface.url)
        if (parts.scheme, parts.hostname, parts.port) != (home.scheme, home.hostname, home.port):
            continue
        added = kept.supported_interfaces.add()
        added.CopyFrom(interface)
        added.url = proxied_origin.rstrip("/") + "/" + parts.path.lstrip("/")
    if not kept.supported_interfaces:
        named = ", ".join(i.url for i in card.supported_interfaces) or "none"
        raise AgentError(
            f"the A2A agent card names no interface on {origin} (it names: {named}); fae reaches only the origin "
            "it is given, through its recording proxy: give a2a: the URL the card names"
        )
    return kept


def _message(prompt: str, endpoints: dict[str, Any]) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[new_text_part(prompt, media_type="text/plain"), new_data_part(endpoints, media_type="application/json")],
    )
    return SendMessageRequest(message=message)


async def follow_task(
    base_url: str,
    *,
    origin: str,
    proxied_origin: str,
    prompt: str,
    endpoints: dict[str, Any],
    timeout_s: float,
    poll_s: float,
    headers: dict[str, str] | None = None,
) -> FollowedTask:
    """Send the run's message to the A2A agent at ``base_url`` (a proxied URL) and follow its task to its end.

    A server that cannot be reached, answers with an error, or outlives ``timeout_s`` raises ``AgentError``
    with what happened; a task that ended in any state is returned, for the agent to judge. ``headers`` go with
    every request (an ``Authorization`` the server asks for).
    """
    followed = FollowedTask()

    def said(exc: BaseException) -> str:
        """The error's first line, naming the server by its own URL rather than the run's proxied one."""
        text = (str(exc) or type(exc).__name__).splitlines()[0]
        return text.replace(proxied_origin.rstrip("/"), origin)[:300]

    async with httpx.AsyncClient(timeout=timeout_s, verify=client_tls(), headers=headers) as http:
        try:
            card = await A2ACardResolver(http, base_url).get_agent_card()
        except (A2AError, httpx.HTTPError) as exc:
            status = getattr(exc, "status_code", None)
            if status in (502, 503, 504):  # the proxy's own answer when the server accepts no connection
                raise AgentError(
                    f"the A2A agent at {origin} did not answer (HTTP {status} through the recording proxy)"
                ) from None
            raise AgentError(f"the A2A agent card could not be read: {said(exc)}") from None
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=True, supported_protocol_bindings=BINDINGS))
        try:
            client = factory.create(proxied_card(card, origin, proxied_origin))
        except ValueError as exc:
            raise AgentError(
                f"the A2A agent card offers no interface fae speaks (JSON-RPC, HTTP+JSON): {exc}"
            ) from None
        try:
            with anyio.fail_after(timeout_s):
                await _follow(client, followed, _message(prompt, endpoints), poll_s)
        except TimeoutError:
            await _cancel(client, followed)
            raise AgentError(
                f"the A2A task did not finish within {timeout_s:g} s (its last state: {followed.state})"
            ) from None
        except (A2AError, httpx.HTTPError) as exc:
            raise AgentError(f"the A2A exchange failed ({followed.state}): {said(exc)}") from None
    return followed


async def _follow(client: Any, followed: FollowedTask, request: SendMessageRequest, poll_s: float) -> None:
    async with aclosing(client.send_message(request)) as events:
        async for event in events:
            followed.take(event)
            if followed.settled:
                break
    while not followed.settled:
        if followed.task_id is None:
            raise AgentError("the A2A server's answer held neither a task nor a message")
        await anyio.sleep(poll_s)
        followed.take_task(await client.get_task(GetTaskRequest(id=followed.task_id)))


async def _cancel(client: Any, followed: FollowedTask) -> None:
    """Ask the server to stop a task fae no longer follows; whatever it answers, the run has ended."""
    if followed.task_id is None:
        return
    with anyio.move_on_after(CANCEL_S):
        try:
            await client.cancel_task(CancelTaskRequest(id=followed.task_id))
        except (A2AError, httpx.HTTPError):
            pass  # recorded by the proxy all the same
