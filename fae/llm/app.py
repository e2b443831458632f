"""The local scripted LLM server: a Starlette app that plays scripted behaviours and faults over three APIs.

Routes: ``POST /v1/chat/completions`` (OpenAI Chat Completions: tools,
streaming), ``POST /v1/responses`` (OpenAI Responses: tools, streaming),
``POST /v1/messages`` (Anthropic Messages: tools, streaming, prompt caching),
``POST /v1/embeddings``, ``GET /v1/models``, and the plan registry at
``/_fae/plans``. Every API plays the same behaviours and faults
(``fae.llm.faults``). Plan progress is worked out from each request's messages;
the only state is the registry, the requests ``fault:429-then-ok`` refused
once, and the prompt prefixes cached (``fae.llm.anthropic``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fae.errors import PlanError
from fae.llm import anthropic, behaviours, wire
from fae.llm.conversation import count_tokens, prompt_tokens
from fae.llm.embeddings import DEFAULT_DIMENSIONS, embed, to_base64
from fae.llm.faults import FAULT_MODELS, Dialect, Player, Refusals, fingerprint
from fae.llm.plan_registry import PlanRegistry, entry_from_dict, entry_to_dict
from fae.llm.responses import messages_from_input, response_body, response_events
from fae.llm.tool_choice import RequestRefused, choice_count
from fae.util.limits import MAX_FAULT_DELAY_S

EMBEDDING_MODEL = "hashed-bow"
MODELS = (*behaviours.SCRIPTED_MODELS, *FAULT_MODELS, EMBEDDING_MODEL)
GARBAGE = b'{"id": "chatcmpl-garbage", "object": "chat.completion", "choices": [{"message": {"ro'
GARBAGE_RESPONSE = b'{"id": "resp_garbage", "object": "response", "output": [{"type": "mess'
GARBAGE_MESSAGE = b'{"id": "msg_garbage", "type": "message", "content": [{"type": "te'
_STREAM_HEADERS = {"cache-control": "no-cache"}


def _openai_error(status: int, message: str, type_: str, code: str | None, param: str | None) -> Response:
    return JSONResponse(wire.error_body(message, type_=type_, code=code, param=param), status_code=status)


def _anthropic_error(status: int, message: str, type_: str, code: str | None, param: str | None) -> Response:
    return JSONResponse(anthropic.error_body(status, message), status_code=status)


OPENAI = Dialect(_openai_error, GARBAGE, wire.sse(GARBAGE.decode()))
RESPONSES = Dialect(_openai_error, GARBAGE_RESPONSE, wire.sse(GARBAGE_RESPONSE.decode()))
ANTHROPIC = Dialect(_anthropic_error, GARBAGE_MESSAGE, b"event: message_start\ndata: " + GARBAGE_MESSAGE + b"\n\n")


def _bad_request(message: str, param: str | None = None) -> Response:
    return _openai_error(400, message, "invalid_request_error", None, param)


def _stream(events: Iterable[bytes]) -> StreamingResponse:
    async def stream() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    return StreamingResponse(stream(), media_type="text/event-stream", headers=_STREAM_HEADERS)


async def _json_object(request: Request, dialect: Dialect = OPENAI) -> dict[str, Any] | Response:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return dialect.fail(400, "the request body is not valid JSON", "invalid_request_error", None, None)
    if not isinstance(body, dict):
        return dialect.fail(400, "the request body must be a JSON object", "invalid_request_error", None, None)
    return body


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
    player = Player(plans, fault_delay_s, Refusals())
    prompt_cache = anthropic.PromptCache()

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
        outcome = await player.move(request, OPENAI, body.get("model"), messages, body, bool(body.get("stream")))
        if isinstance(outcome, Response):
            return outcome
        model = str(body["model"])
        token_usage = wire.usage(
            prompt_tokens(messages, body.get("tools")), n * count_tokens(wire.completion_text(outcome))
        )
        completion_id = "chatcmpl-" + fingerprint(model, messages)[:24]
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
        return _stream([*map(wire.sse, events), wire.sse("[DONE]")])

    async def responses(request: Request) -> Response:
        body = await _json_object(request)
        if isinstance(body, Response):
            return body
        if body.get("previous_response_id") is not None:
            return _bad_request("this server keeps no responses: send the whole input", "previous_response_id")
        messages = messages_from_input(body.get("input"), body.get("instructions"))
        if messages is None:
            return _bad_request("'input' must be text or a list of input items", "input")
        streamed = bool(body.get("stream"))
        outcome = await player.move(request, RESPONSES, body.get("model"), messages, body, streamed)
        if isinstance(outcome, Response):
            return outcome
        model = str(body["model"])
        completed = response_body(
            outcome,
            response_id="resp_" + fingerprint(model, messages)[:24],
            model=model,
            created=int(clock()),
            input_tokens=prompt_tokens(messages, body.get("tools")),
            output_tokens=count_tokens(wire.completion_text(outcome)),
            tools=body.get("tools"),
            tool_choice=body.get("tool_choice"),
        )
        if not streamed:
            return JSONResponse(completed)
        return _stream(wire.sse_named(event) for event in response_events(completed))

    async def messages_api(request: Request) -> Response:
        body = await _json_object(request, ANTHROPIC)
        if isinstance(body, Response):
            return body
        try:
            anthropic.check_max_tokens(body)
            messages = anthropic.chat_messages(body)
            tools = anthropic.openai_tools(body)
        except RequestRefused as exc:
            return _anthropic_error(400, str(exc), "invalid_request_error", None, exc.param)
        streamed = bool(body.get("stream"))
        outcome = await player.move(request, ANTHROPIC, body.get("model"), messages, tools, streamed)
        if isinstance(outcome, Response):
            return outcome
        model = str(body["model"])
        usage = prompt_cache.usage(body, messages, count_tokens(wire.completion_text(outcome)))
        message_id = "msg_" + fingerprint(model, messages)[:24]
        if not streamed:
            return JSONResponse(anthropic.message_body(outcome, message_id=message_id, model=model, usage=usage))
        events = anthropic.message_events(outcome, message_id=message_id, model=model, usage=usage)
        return _stream(map(wire.sse_named, events))

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
        if "anthropic-version" in request.headers:  # the Anthropic SDK's models.list(): its own page shape
            return JSONResponse(anthropic.models_page(MODELS, created))
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
            Route("/v1/messages", messages_api, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/_fae/plans", plan_registry, methods=["GET", "POST", "DELETE"]),
        ]
    )
