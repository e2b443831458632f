"""The plain value the proxy hands to the recorder for each exchange."""

from __future__ import annotations

from dataclasses import dataclass, field

from fae.store.bodies import Body

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(slots=True)
class Chunk:
    offset_ms: float
    data: bytes


@dataclass(slots=True)
class Exchange:
    """One request/response pair as it crossed the proxy, bytes untouched (not yet redacted)."""

    exchange_id: str
    run_id: str
    actor: str
    upstream: str
    kind: str
    method: str
    url: str
    path: str
    request_headers: list[tuple[str, str]]
    request_body: Body | None
    started_at: float
    started_mono_ns: int
    status: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_body: Body | None = None
    decoded_body: Body | None = None
    decode_error: str | None = None
    streamed: bool = False
    chunks: list[Chunk] = field(default_factory=list)
    chunk_bytes: int = 0  # a stream's bytes recorded so far: past BODY_FILE_BYTES its chunks go to side files
    error: str | None = None
    fault: str | None = None  # what the proxy changed in flight (a scenario's fault), for the log's reader
    duration_ms: float | None = None
    ended_mono_ns: int | None = None
    body_limit: int = DEFAULT_MAX_BODY_BYTES  # the proxy's limit, which also bounds what the recorder buffers
    body_dropped: str | None = None  # set by the recorder: why a stream's whole body need not be kept
