"""Events: one frozen, tagged struct per thing that happened during a run.

Evolve them the msgspec way: a new field gets a default, no field changes
type, no tag is renamed. Bodies are never inlined: they live in the blob table
and events carry their content hash.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Event(msgspec.Struct, frozen=True, tag_field="type", kw_only=True):
    """Base of every event."""


class RunStarted(Event, tag="RunStarted", frozen=True):
    task_id: str
    variation: int
    agent: str
    repeat: int = 0
    agent_config: dict[str, Any] = {}
    task_now: str | None = None
    prompt: str | None = None
    experiment: str | None = None
    phase: str | None = None
    settle_s: float | None = None  # the read-back waited this long after the last write where a judge reads the gap


class SandboxSeeded(Event, tag="SandboxSeeded", frozen=True):
    sandbox: str
    fhir_base: str
    resource_count: int
    seed_blob: str | None = None


class TaskRendered(Event, tag="TaskRendered", frozen=True):
    """What the run's judges need of its task (``fae.tasks.judged``): a body shared by its variation's runs."""

    task_blob: str


class Header(msgspec.Struct, frozen=True, array_like=True):
    name: str
    value: str


class ChunkReceived(Event, tag="ChunkReceived", frozen=True):
    """One chunk of a streamed response, recorded as it passed through."""

    exchange_id: str
    index: int
    offset_ms: float
    blob: str
    size: int


class HttpExchanged(Event, tag="HttpExchanged", frozen=True):
    """One HTTP request and its response (or the error that replaced it)."""

    exchange_id: str
    method: str
    url: str
    path: str
    request_headers: tuple[Header, ...] = ()
    request_blob: str | None = None
    request_size: int = 0
    status: int | None = None
    response_headers: tuple[Header, ...] = ()
    response_blob: str | None = None
    response_size: int = 0
    decoded_blob: str | None = None
    decode_error: str | None = None
    streamed: bool = False
    chunk_count: int = 0
    error: str | None = None
    started_at: float | None = None
    duration_ms: float | None = None
    fault: str | None = None  # a fault the proxy applied in flight: the server or the agent saw something else


class OperationIssue(msgspec.Struct, frozen=True):
    severity: str = ""
    code: str = ""
    diagnostics: str = ""
    expression: tuple[str, ...] = ()


class FhirInteracted(Event, tag="FhirInteracted", frozen=True):
    """What a FHIR exchange meant: interaction, resource, version, outcome."""

    exchange_id: str
    interaction: str
    resource_type: str | None = None
    resource_id: str | None = None
    version: str | None = None
    status: int | None = None
    issues: tuple[OperationIssue, ...] = ()
    search_ids: tuple[str, ...] = ()
    search_total: int | None = None


class ToolCallRequest(msgspec.Struct, frozen=True):
    call_id: str
    name: str
    arguments: str


USAGE_KNOWN_APIS = ("chat", "responses", "messages", "completions", "embeddings", "count_tokens", "models")
"""The LLM APIs whose token use fae knows: read from the answer's ``usage``, or none spent (listing models,
counting tokens). A call of any other ``api`` (``other``: a provider fae does not read) has unknown tokens,
never zero; docs/log.md, "Token counts"."""


class LlmCalled(Event, tag="LlmCalled", frozen=True):
    """One call to an LLM endpoint: OpenAI Chat Completions or Responses, Anthropic Messages, or another
    ``api`` whose content fae does not read (see ``fae.recorder.llm``)."""

    exchange_id: str
    api: str
    model: str | None = None
    stream: bool = False
    messages: tuple[Any, ...] = ()
    tools: tuple[str, ...] = ()
    tool_calls: tuple[ToolCallRequest, ...] = ()
    content: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    status: int | None = None
    error: str | None = None
    # a body of BODY_FILE_BYTES or more stays in its side file: the event names it by hash and leaves out its
    # content (the request's messages; the reply's content and tool-call arguments), keeping the count and roles
    request_blob: str | None = None
    response_blob: str | None = None
    message_count: int | None = None
    roles: tuple[str, ...] = ()
    # prompt tokens read from a provider's cache and written to it (Anthropic cache_read/cache_creation_input_
    # tokens, OpenAI cached_tokens); both are part of prompt_tokens, None where the answer did not say
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


class ToolCalled(Event, tag="ToolCalled", frozen=True):
    """One MCP tools/call, with its result or error."""

    tool: str
    exchange_id: str | None = None
    arguments: Any = None
    result: Any = None
    is_error: bool = False
    error: str | None = None
    server: str | None = None
    # an exchange with a body of BODY_FILE_BYTES or more names both its bodies by hash, and this call's place
    # among the exchange's calls: a large request's arguments keep only their small members, a large reply's
    # result is left out (fae.recorder.mcp.tool_in_full reads them back)
    request_blob: str | None = None
    response_blob: str | None = None
    call_index: int = 0


class PromptParaphrased(Event, tag="PromptParaphrased", frozen=True):
    """The run's task was reworded; ``accepted`` says whether the agent got the rewording.

    ``prompt`` is the prompt the agent got when accepted (else the refused text). A recording fixes one
    paraphrase per (task, variation, model, seed) before its runs start (``ParaphraseMade``) and every run
    of the variation plays it: ``digest`` (SHA-256 of the prompt the agent got: the paraphrase, or the
    original when refused) is the same in each, ``original`` is the SHA-256 of the prompt it rewords,
    ``text`` the model's paraphrase, ``made_in`` the log's id for the event that made it. Runs recorded
    before fixed paraphrases have none of these (each asked the model anew).
    """

    model: str
    accepted: bool
    prompt: str
    problems: tuple[str, ...] = ()
    exchange_id: str | None = None
    seed: int | None = None
    original: str | None = None
    digest: str | None = None
    text: str | None = None
    made_in: str | None = None


PARAPHRASE_IDS = "paraphrase."
"""The ids a variation's fixed paraphrase is kept under (its ``ParaphraseMade`` and its request): no run's."""


class ParaphraseMade(Event, tag="ParaphraseMade", frozen=True):
    """A variation's paraphrase was fixed for every run that plays it: asked of ``model`` once (``origin``
    ``generated``, the request is the exchange ``exchange_id`` of the same id) or taken from a paraphrase
    file (``origin`` the file's name). Kept under an id of its own (``paraphrase.TASK.vN.HASH``), not a run.
    """

    task_id: str
    variation: int
    model: str
    seed: int
    original: str
    text: str
    accepted: bool
    digest: str
    problems: tuple[str, ...] = ()
    origin: str = "generated"
    exchange_id: str | None = None


class AnswerGiven(Event, tag="AnswerGiven", frozen=True):
    text: str | None
    stop_reason: str = "answered"


class ProgramEnded(Event, tag="ProgramEnded", frozen=True):
    """A program agent (``cmd:``) ended: how, where its answer came from, and its output, bounded, in blobs.

    ``exit_code`` is None when a signal ended it (``signal``), fae stopped it at its timeout (``timed_out``) or
    because the recording was interrupted (``interrupted``: the run is stored interrupted, with what the program
    had written by then).
    The blobs keep stdout's first and stderr's last bytes (``fae.agents.command``); the sizes are the whole.
    """

    exit_code: int | None
    signal: str | None = None
    timed_out: bool = False
    answer_from: str | None = None
    stdout_blob: str | None = None
    stdout_bytes: int = 0
    stderr_blob: str | None = None
    stderr_bytes: int = 0
    interrupted: bool = False


class StateCaptured(Event, tag="StateCaptured", frozen=True):
    """The sandbox's resources read back by the harness after the run."""

    resource_count: int
    state_blob: str
    exchange_id: str | None = None


class RunFinished(Event, tag="RunFinished", frozen=True):
    stop_reason: str = "answered"


class RunFailed(Event, tag="RunFailed", frozen=True):
    """The run could not complete: ``status`` is failed (fae's side) or errored (the agent's side)."""

    status: str
    reason: str
    cause: str | None = None
    """Who ended the run: ``agent`` (its own upstream fault), ``harness``, ``stack`` or ``signal``."""


AnyEvent = (
    RunStarted
    | TaskRendered
    | SandboxSeeded
    | ChunkReceived
    | HttpExchanged
    | FhirInteracted
    | LlmCalled
    | ToolCalled
    | PromptParaphrased
    | ParaphraseMade
    | AnswerGiven
    | ProgramEnded
    | StateCaptured
    | RunFinished
    | RunFailed
)

EVENT_TYPES: dict[str, type[Event]] = {cls.__struct_config__.tag: cls for cls in AnyEvent.__args__}

encoder = msgspec.json.Encoder()
decoder = msgspec.json.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    return encoder.encode(event)


def decode(payload: bytes | str) -> Event:
    return decoder.decode(payload)
