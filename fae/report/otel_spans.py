"""One recorded run as OpenTelemetry spans following the GenAI semantic conventions (docs/otel.md has the table).

A run is one trace: an ``invoke_agent`` root span, a ``chat`` span per LLM call, an ``execute_tool`` span per
MCP tool call, and an HTTP client span per other exchange (FHIR above all; an agent's FHIR exchange made while
one of its tool calls was open sits under that tool's span). Times are the events' recorded wall times and
durations. Ids are hashes: the trace's of the run id and the run's first recorded time (run ids repeat when the
same plan is recorded twice), a span's of the trace id and its event's seq, so exporting a log again gives the
same ids. Message contents go in only with ``content``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from fae.recorder.llm import llm_in_full
from fae.recorder.mcp import tool_in_full
from fae.replay.source import Recorded, RunLog
from fae.report import otel_content as content_of
from fae.report.otel_http import http_attributes, provider_of, server_of
from fae.report.otel_root import VerdictInfo, content_of_run, root_event, verdict_event
from fae.report.otlp import CLIENT, ERROR, INTERNAL, Attributes, SpanData, SpanEvent, attrs
from fae.store import events as ev
from fae.util.json_text import json_or_text

OPERATIONS = {
    "chat": "chat",
    "responses": "chat",
    "messages": "chat",
    "completions": "text_completion",
    "embeddings": "embeddings",
}
"""``gen_ai.operation.name`` by the LLM API fae recorded (any other keeps fae's name for it)."""
FAILED_STATUSES = ("failed", "errored", "interrupted")


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the ``runs`` table adds to a run's events."""

    suite: str | None = None
    experiment: str | None = None
    phase: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    cause: str | None = None
    model: str | None = None
    """The model the agent was configured with (its ``agent_config``): what its LLM calls asked for."""


def trace_id(run: RunLog) -> bytes:
    first = str(run.events[0].wall_us) if run.events else ""
    return _nonzero(hashlib.sha256(f"fae.otel.trace\0{run.run_id}\0{first}".encode()).digest()[:16])


def span_id(trace: bytes, seq: int | None) -> bytes:
    """The span of event ``seq``; None: the run's root span."""
    label = b"run" if seq is None else seq.to_bytes(8, "big", signed=True)
    return _nonzero(hashlib.sha256(trace + b"\0span\0" + label).digest()[:8])


def _nonzero(found: bytes) -> bytes:
    """An all-zero id is invalid in OTLP: the (never seen) zero digest gets its last byte set."""
    return found if any(found) else found[:-1] + b"\x01"


def _ns(wall_us: int) -> int:
    return wall_us * 1000


def _window(recorded: Recorded, exchange: ev.HttpExchanged | None) -> tuple[int, int]:
    """A call's start and end: its exchange's recorded start and duration (the event's time if there is none)."""
    start = _ns(recorded.wall_us)
    duration = exchange.duration_ms if exchange is not None and exchange.duration_ms is not None else 0.0
    return start, start + max(0, round(duration * 1_000_000))


class _Run:
    """The spans of one run, built event by event."""

    def __init__(self, run: RunLog, info: RunInfo, content: bool):
        self.run, self.info, self.content = run, info, content
        self.trace = trace_id(run)
        self.root = span_id(self.trace, None)
        self.spans: list[SpanData] = []
        self.exchanges = {r.event.exchange_id: r for r in run.events if type(r.event) is ev.HttpExchanged}
        self.fhir = {r.event.exchange_id: r.event for r in run.events if type(r.event) is ev.FhirInteracted}
        self.consumed: set[str] = set()
        self.pending_calls: list[ev.ToolCallRequest] = []
        self.tool_windows: list[tuple[int, int, bytes]] = []
        self.provider: str | None = None
        self.tokens: list[int] | None = None  # input and output, once an agent's call reported either

    def exchange(self, exchange_id: str | None) -> ev.HttpExchanged | None:
        found = self.exchanges.get(exchange_id or "")
        return found.event if found is not None else None  # type: ignore[return-value]

    def span(self, recorded: Recorded, name: str, kind: int, window: tuple[int, int], attributes: Attributes) -> None:
        self.spans.append(
            SpanData(self.trace, span_id(self.trace, recorded.seq), self.root, name, kind, *window, attributes)
        )

    def llm(self, recorded: Recorded, called: ev.LlmCalled) -> None:
        exchange = self.exchange(called.exchange_id)
        self.consumed.add(called.exchange_id)
        operation = OPERATIONS.get(called.api, called.api)
        by_agent = recorded.actor == "agent"
        requested = (self.info.model if by_agent else None) or called.model
        address, port = server_of(exchange.url if exchange is not None else "")
        provider = provider_of(address, called.api)
        failed = called.error is not None or (called.status is not None and called.status >= 400)
        if by_agent:
            self.provider = self.provider or provider
            self.pending_calls += called.tool_calls
            for index, count in enumerate((called.prompt_tokens, called.completion_tokens)):
                if count is not None:
                    self.tokens = self.tokens or [0, 0]
                    self.tokens[index] += count
        attributes = attrs(
            gen_ai__operation__name=operation,
            gen_ai__provider__name=provider,
            gen_ai__request__model=requested,
            gen_ai__response__model=None if failed else called.model,
            gen_ai__request__stream=True if called.stream else None,
            gen_ai__response__finish_reasons=[called.finish_reason] if called.finish_reason else None,
            gen_ai__usage__input_tokens=called.prompt_tokens,
            gen_ai__usage__output_tokens=called.completion_tokens,
            gen_ai__usage__cache_read__input_tokens=called.cache_read_tokens,
            gen_ai__usage__cache_creation__input_tokens=called.cache_write_tokens,
            gen_ai__conversation__id=self.run.run_id,
            server__address=address,
            server__port=port,
            error__type=_error_type(called.status, called.error),
            fae__llm__api=called.api,
            fae__llm__chunk_count=exchange.chunk_count if exchange is not None and exchange.streamed else None,
            fae__actor=recorded.actor,
            fae__exchange_id=called.exchange_id,
            fae__event__seq=recorded.seq,
        )
        if self.content:
            full = llm_in_full(called, self.run.body)
            attributes += attrs(
                gen_ai__input__messages=content_of.json_text(content_of.input_messages(full.messages)),
                gen_ai__tool__definitions=content_of.json_text(content_of.tool_definitions(full.tools))
                if full.tools
                else None,
                gen_ai__output__messages=None
                if failed
                else content_of.json_text(
                    content_of.output_messages(full.content, full.tool_calls, full.finish_reason)
                ),
            )
        self.span(
            recorded,
            f"{operation} {requested}" if requested else operation,
            CLIENT,
            _window(recorded, exchange),
            attributes,
        )
        if failed:
            _fail(self.spans[-1], called.error or f"HTTP {called.status}")

    def tool(self, recorded: Recorded, called: ev.ToolCalled) -> None:
        exchange = self.exchange(called.exchange_id)
        if called.exchange_id is not None:
            self.consumed.add(called.exchange_id)
        call_id = self._call_id(called) if recorded.actor == "agent" else None
        failed = called.is_error or called.error is not None
        attributes = attrs(
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name=called.tool,
            gen_ai__tool__call__id=call_id,
            mcp__method__name="tools/call",
            error__type=("tool_error" if called.is_error else "_OTHER") if failed else None,
            fae__tool__server=called.server,
            fae__actor=recorded.actor,
            fae__exchange_id=called.exchange_id,
            fae__event__seq=recorded.seq,
        )
        if self.content:
            full = tool_in_full(called, self.run.body)
            attributes += attrs(
                gen_ai__tool__call__arguments=content_of.json_text(full.arguments),
                gen_ai__tool__call__result=None if failed else content_of.json_text(full.result),
            )
        window = _window(recorded, exchange)
        self.span(recorded, f"execute_tool {called.tool}", INTERNAL, window, attributes)
        if failed:
            _fail(self.spans[-1], called.error or "the tool answered with isError")
        if recorded.actor == "agent":
            self.tool_windows.append((*window, self.spans[-1].span_id))

    def _call_id(self, called: ev.ToolCalled) -> str | None:
        """The id the LLM gave this call: the first one still open with this tool name, the same arguments first."""
        named = [c for c in self.pending_calls if c.name == called.tool]
        same = [c for c in named if json_or_text(c.arguments) == called.arguments]
        if not (same or named):
            return None
        chosen = (same or named)[0]
        self.pending_calls.remove(chosen)
        return chosen.call_id or None

    def http(self, recorded: Recorded, exchange: ev.HttpExchanged) -> None:
        interaction = self.fhir.get(exchange.exchange_id)
        name, attributes = http_attributes(exchange, interaction)
        attributes += attrs(
            fae__actor=recorded.actor,
            fae__upstream=recorded.upstream,
            fae__fault=exchange.fault,
            fae__exchange_id=exchange.exchange_id,
            fae__event__seq=recorded.seq,
        )
        window = _window(recorded, exchange)
        self.span(recorded, name, CLIENT, window, attributes)
        if recorded.actor == "agent":
            inside = [w for w in self.tool_windows if w[0] <= window[0] and window[1] <= w[1]]
            if inside:
                self.spans[-1].parent_id = max(inside)[2]  # the innermost: the latest to open
        if exchange.error is not None or (exchange.status is not None and exchange.status >= 400):
            _fail(self.spans[-1], exchange.error or f"HTTP {exchange.status}")


def _error_type(status: int | None, error: str | None) -> str | None:
    if status is not None and status >= 400:
        return str(status)
    return "_OTHER" if error is not None else None


def _fail(span: SpanData, message: str) -> None:
    span.status_code = ERROR
    span.status_message = message


def run_spans(run: RunLog, info: RunInfo, verdicts: Sequence[VerdictInfo], *, content: bool = False) -> list[SpanData]:
    """The run's spans, its root first."""
    built = _Run(run, info, content)
    events: list[SpanEvent] = []
    for recorded in run.events:
        event = recorded.event
        kind = type(event)
        if kind is ev.LlmCalled:
            built.llm(recorded, event)  # type: ignore[arg-type]
        elif kind is ev.ToolCalled:
            built.tool(recorded, event)  # type: ignore[arg-type]
        else:
            found = root_event(recorded, content)
            if found is not None:
                events.append(found)
    for recorded in built.exchanges.values():
        if recorded.event.exchange_id not in built.consumed:  # type: ignore[attr-defined]
            built.http(recorded, recorded.event)  # type: ignore[arg-type]
    times = [_ns(r.wall_us) for r in run.events] + [t for s in built.spans for t in (s.start_ns, s.end_ns)]
    start, end = (min(times), max(times)) if times else (0, 0)
    root = SpanData(
        built.trace, built.root, b"", f"invoke_agent {run.agent}", INTERNAL, start, end, _root_attributes(built, run)
    )
    if content:
        root.attributes += content_of_run(run)
    root.events = events + [verdict_event(v, end, content) for v in verdicts]
    if run.status in FAILED_STATUSES:
        failed = run.last(ev.RunFailed)
        _fail(root, failed.event.reason if failed is not None else (info.error or run.status))  # type: ignore[attr-defined]
    return [root, *sorted(built.spans, key=lambda s: (s.start_ns, s.span_id))]


def _root_attributes(built: _Run, run: RunLog) -> Attributes:
    info = built.info
    return attrs(
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name=run.agent,
        gen_ai__provider__name=built.provider,
        gen_ai__request__model=info.model,
        gen_ai__conversation__id=run.run_id,
        gen_ai__usage__input_tokens=built.tokens[0] if built.tokens else None,
        gen_ai__usage__output_tokens=built.tokens[1] if built.tokens else None,
        error__type=run.status if run.status in FAILED_STATUSES else None,
        fae__run__id=run.run_id,
        fae__run__status=run.status,
        fae__run__stop_reason=info.stop_reason,
        fae__run__cause=info.cause,
        fae__run__repeat=run.repeat,
        fae__run__suite=info.suite,
        fae__run__experiment=info.experiment,
        fae__run__phase=info.phase,
        fae__task__id=run.task_id,
        fae__task__variation=run.variation,
    )
