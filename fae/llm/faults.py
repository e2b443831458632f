"""The scripted faults (``fault:*`` models) and the next move of a scripted model, for any of the three APIs.

Each API answers a fault in its own error shape and breaks its own way for
``fault:garbage``; ``Dialect`` says how. The only state is the set of requests
that ``fault:429-then-ok`` has already refused once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from fae.errors import PlanError
from fae.llm import behaviours
from fae.llm.behaviours import Reply
from fae.llm.plan_registry import PlanRegistry
from fae.llm.tool_choice import RequestRefused, shaped, tool_policy

FAULT_429 = "fault:429"
FAULT_500 = "fault:500"
FAULT_TIMEOUT = "fault:timeout"
FAULT_GARBAGE = "fault:garbage"
FAULT_429_THEN_OK = "fault:429-then-ok"
FAULT_MODELS = (FAULT_429, FAULT_500, FAULT_TIMEOUT, FAULT_GARBAGE, FAULT_429_THEN_OK)
_REMEMBERED_REFUSALS = 4096


@dataclass(frozen=True)
class Dialect:
    """How one API answers what goes wrong: ``fail(status, message, type, code, param)`` makes its error
    response; ``garbage`` and ``garbage_stream`` are its broken 200 bodies."""

    fail: Callable[[int, str, str, str | None, str | None], Response]
    garbage: bytes
    garbage_stream: bytes
    stream_type: str = "text/event-stream"


class Refusals:
    """The requests that ``fault:429-then-ok`` refused once (bounded, oldest forgotten first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, None] = OrderedDict()

    def first_time(self, fingerprint: str) -> bool:
        with self._lock:
            if fingerprint in self._seen:
                del self._seen[fingerprint]
                return False
            self._seen[fingerprint] = None
            while len(self._seen) > _REMEMBERED_REFUSALS:
                self._seen.popitem(last=False)
            return True


def fingerprint(model: str, messages: list[dict[str, Any]]) -> str:
    text = json.dumps([model, messages], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


async def _sleep_unless_disconnected(request: Request, seconds: float) -> None:
    """Sleep ``seconds``, stopping early when the client goes away."""
    async with anyio.create_task_group() as group:

        async def watch_disconnect() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(watch_disconnect)
        await anyio.sleep(seconds)
        group.cancel_scope.cancel()


@dataclass
class Player:
    """Plays the model a request names: a fault, or a scripted behaviour's next move shaped by the tool policy."""

    plans: PlanRegistry
    fault_delay_s: float
    refusals: Refusals

    async def move(
        self,
        request: Request,
        dialect: Dialect,
        model: Any,
        messages: list[dict[str, Any]],
        tools: dict[str, Any],
        streamed: bool,
    ) -> Reply | Response:
        """The reply, or the response that answers instead; ``tools`` holds ``tools``/``tool_choice`` in
        OpenAI's shape."""
        if not isinstance(model, str):
            return dialect.fail(400, "'model' must be a model name", "invalid_request_error", None, "model")
        try:
            policy = tool_policy(tools)
        except RequestRefused as exc:
            return dialect.fail(400, str(exc), "invalid_request_error", None, exc.param)
        if model == FAULT_429 or (
            model == FAULT_429_THEN_OK and self.refusals.first_time(fingerprint(model, messages))
        ):
            return dialect.fail(
                429, "Rate limit reached (scripted fault).", "rate_limit_error", "rate_limit_exceeded", None
            )
        if model == FAULT_500:
            return dialect.fail(500, "The server had an error (scripted fault).", "server_error", None, None)
        if model == FAULT_TIMEOUT:
            await _sleep_unless_disconnected(request, self.fault_delay_s)
            return dialect.fail(504, "The scripted model timed out.", "timeout", None, None)
        if model == FAULT_GARBAGE:
            if streamed:
                return Response(dialect.garbage_stream, media_type=dialect.stream_type)
            return Response(dialect.garbage, media_type="application/json")
        if model not in behaviours.SCRIPTED_MODELS and model != FAULT_429_THEN_OK:
            return dialect.fail(
                404,
                f"The model '{model}' does not exist; see GET /v1/models.",
                "invalid_request_error",
                "model_not_found",
                None,
            )
        scripted = behaviours.GOLD if model == FAULT_429_THEN_OK else model
        try:
            reply = behaviours.reply_for(scripted, messages, self.plans, forced_tool=policy.forced)
            return shaped(reply, policy, model)
        except PlanError as exc:
            return dialect.fail(400, f"scripted model {model}: {exc}", "invalid_request_error", None, None)
        except RequestRefused as exc:
            return dialect.fail(400, str(exc), "invalid_request_error", None, exc.param)
