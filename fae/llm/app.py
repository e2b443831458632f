"""The local OpenAI-compatible server: a Starlette app that plays scripted behaviours and faults.

Routes: ``POST /v1/chat/completions`` (tools, streaming), ``POST /v1/responses``
(minimal, not streamed), ``POST /v1/embeddings``, ``GET /v1/models``, and the
plan registry at ``/_fae/plans``. Plan progress is worked out from each
request's messages; the only state is the registry and the set of requests
that ``fault:429-then-ok`` has already refused once.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fae.errors import PlanError
from fae.llm import behaviours, wire
from fae.llm.behaviours import Reply
from fae.llm.conversation import count_tokens, prompt_tokens
from fae.llm.embeddings import DEFAULT_DIMENSIONS, embed, to_base64
from fae.llm.plan_registry import PlanRegistry, entry_from_dict, entry_to_dict
from fae.llm.responses import messages_from_input, response_body
from fae.llm.tool_choice import RequestRefused, choice_count, shaped, tool_policy
from fae.util.limits import MAX_FAULT_DELAY_S

FAULT_429 = "fault:429"
FAULT_500 = "fault:500"
FAULT_TIMEOUT = "fault:timeout"
FAULT_GARBAGE = "fault:garbage"
FAULT_429_THEN_OK = "fault:429-then-ok"
FAULT_MODELS = (FAULT_429, FAULT_500, FAULT_TIMEOUT, FAULT_GARBAGE, FAULT_429_THEN_OK)
EMBEDDING_MODEL = "hashed-bow"
MODELS = (*behaviours.SCRIPTED_MODELS, *FAULT_MODELS, EMBEDDING_MODEL)
GARBAGE = b'{"id": "chatcmpl-garbage", "object": "chat.completion", "choices": [{"message": {"ro'
_REMEMBERED_REFUSALS = 4096


class _Refusals:
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


def _error(status: int, message: str, type_: str, code: str | None = None) -> JSONResponse:
    return JSONResponse(wire.error_body(message, type_=type_, code=code), status_code=status)


def _bad_request(message: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(wire.error_body(message, type_="invalid_request_error", param=param), status_code=400)


async def _json_object(request: Request) -> dict[str, Any] | JSONResponse:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _bad_request("the request body is not valid JSON")
    if not isinstance(body, dict):
        return _bad_request("the request body must be a JSON object")
    return body


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


def create_app(
    registry: PlanRegistry | None = None,
    *,
    fault_delay_s: float = 30.0,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The server app; ``fault:timeout`` waits ``fault_delay_s`` (at most 300) before a 504."""
    if not 0 <= fault_delay_s <= MAX_FAULT_DELAY_S:
        raise ValueError(f"fault_delay_s must be between 0 and {MAX_FAULT_DELAY_S:g}")
    plans = registry if registry is not None else PlanRegistry()
    refusals = _Refusals()

    async def fault_or_reply(
        request: Request, body: dict[str, Any], messages: list[dict[str, Any]]
    ) -> Reply | Response:
        model = body.get("model")
        if not isinstance(model, str):
            return _bad_request("'model' must be a model name", "model")
        try:
            policy = tool_policy(body)
        except RequestRefused as exc:
            return _bad_request(str(exc), exc.param)
        if model == FAULT_429 or (model == FAULT_429_THEN_OK and refusals.first_time(_fingerprint(model, messages))):
            return _error(
                429,
                "Rate limit reached (scripted fault).",
                "rate_limit_error",
                "rate_limit_exceeded",
            )
        if model == FAULT_500:
            return _error(500, "The server had an error (scripted fault).", "server_error")
        if model == FAULT_TIMEOUT:
            await _sleep_unless_disconnected(request, fault_delay_s)
            return _error(504, "The scripted model timed out.", "timeout")
        if model == FAULT_GARBAGE:
            if body.get("stream"):
                return Response(wire.sse(GARBAGE.decode()), media_type="text/event-stream")
            return Response(GARBAGE, media_type="application/json")
        if model not in behaviours.SCRIPTED_MODELS and model != FAULT_429_THEN_OK:
            return _error(
                404,
                f"The model '{model}' does not exist; see GET /v1/models.",
                "invalid_request_error",
                "model_not_found",
            )
        scripted = behaviours.GOLD if model == FAULT_429_THEN_OK else model
        try:
            reply = behaviours.reply_for(scripted, messages, plans, forced_tool=policy.forced)
            return shaped(reply, policy, model)
        except PlanError as exc:
            return _bad_request(f"scripted model {model}: {exc}")
        except RequestRefused as exc:
            return _bad_request(str(exc), exc.param)

    async def chat_completions(request: Request) -> Response:
        body = await _json_object(request)
        if isinstance(body, Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _bad_request("'messages' must be a list of message objects")
        try:
            n = choice_count(body)
        except RequestRefused as exc:
            return _bad_request(str(exc), exc.param)
        outcome = await fault_or_reply(request, body, messages)
        if isinstance(outcome, Response):
            return outcome
        model = str(body["model"])
        token_usage = wire.usage(
            prompt_tokens(messages, body.get("tools")), n * count_tokens(wire.completion_text(outcome))
        )
        completion_id = "chatcmpl-" + _fingerprint(model, messages)[:24]
        created = int(clock())
        if not body.get("stream"):
            return JSONResponse(
                wire.completion(
                    outcome,
                    completion_id=completion_id,
                    model=model,
                    created=created,
                    token_usage=token_usage,
                    n=n,
                )
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = wire.chunks(
            outcome,
            completion_id=completion_id,
            model=model,
            created=created,
            token_usage=token_usage if include_usage else None,
            n=n,
        )

        async def stream() -> AsyncIterator[bytes]:
            for event in events:
                yield wire.sse(event)
            yield wire.sse("[DONE]")

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"cache-control": "no-cache"})

    async def responses(request: Request) -> Response:
        body = await _json_object(request)
        if isinstance(body, Response):
            return body
        if body.get("stream"):
            return _bad_request("this server answers /v1/responses without streaming only")
        messages = messages_from_input(body.get("input"), body.get("instructions"))
        if messages is None:
            return _bad_request("'input' must be text or a list of input items")
        outcome = await fault_or_reply(request, body, messages)
        if isinstance(outcome, Response):
            return outcome
        model = str(body["model"])
        return JSONResponse(
            response_body(
                outcome,
                response_id="resp_" + _fingerprint(model, messages)[:24],
                model=model,
                created=int(clock()),
                input_tokens=prompt_tokens(messages, body.get("tools")),
                output_tokens=count_tokens(wire.completion_text(outcome)),
            )
        )

    async def embeddings(request: Request) -> Response:
        body = await _json_object(request)
        if isinstance(body, Response):
            return body
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts:
            return _bad_request("'input' must be text or a non-empty list")
        texts = [t if isinstance(t, str) else " ".join(map(str, t)) if isinstance(t, list) else str(t) for t in texts]
        dimensions = body.get("dimensions") or DEFAULT_DIMENSIONS
        if not isinstance(dimensions, int) or not 1 <= dimensions <= 4096:
            return _bad_request("'dimensions' must be a whole number from 1 to 4096")
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embed(text, dimensions)
            data.append(
                {
                    "object": "embedding",
                    "index": index,
                    "embedding": to_base64(vector) if as_base64 else vector,
                }
            )
        tokens = sum(count_tokens(text) for text in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model") or EMBEDDING_MODEL),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def models(request: Request) -> Response:
        created = int(clock())
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": name, "object": "model", "created": created, "owned_by": "fae"} for name in MODELS],
            }
        )

    async def plan_registry(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse({"plans": [entry_to_dict(entry) for entry in plans.entries()]})
        if request.method == "DELETE":
            plans.clear()
            return JSONResponse({"plans": []})
        body = await _json_object(request)
        if isinstance(body, Response):
            return body
        try:
            entry = entry_from_dict(body)
        except PlanError as exc:
            return _bad_request(str(exc))
        plans.add(entry)
        return JSONResponse(entry_to_dict(entry), status_code=201)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/_fae/plans", plan_registry, methods=["GET", "POST", "DELETE"]),
        ]
    )


def _fingerprint(model: str, messages: list[dict[str, Any]]) -> str:
    text = json.dumps([model, messages], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
