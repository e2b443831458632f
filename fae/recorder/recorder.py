"""The recorder: the proxy's sink. Converts exchanges and waits until they are in the log."""

from __future__ import annotations

from datetime import UTC, datetime

from fae.proxy.exchange import Chunk, Exchange
from fae.recorder.convert import exchange_events
from fae.recorder.mcp_sse import SsePairing
from fae.recorder.redact import Redactor
from fae.store.events import ChunkReceived, HttpExchanged
from fae.store.log import blob_hash
from fae.store.secrets import scrub_credentials
from fae.store.writer import LogWriter, Stamped


class Recorder:
    """Turns each exchange into events and appends them through the log's one writer."""

    def __init__(self, writer: LogWriter, redactor: Redactor | None = None):
        self.writer = writer
        self.redactor = redactor or Redactor()
        self.sse = SsePairing()
        writer.secrets = self.redactor.secrets  # everything the writer stores is scrubbed of what was redacted

    @property
    def healthy(self) -> bool:
        return self.writer.healthy

    def exchange(self, exchange: Exchange) -> None:
        """Journal the exchange's events and bodies (large ones to side files); returns once they are durable."""
        events, blobs = exchange_events(exchange, self.redactor)
        wall = datetime.fromtimestamp(exchange.started_at, UTC)
        mono = exchange.ended_mono_ns or exchange.started_mono_ns
        stamped = [
            Stamped(
                exchange.run_id, event, actor=exchange.actor, upstream=exchange.upstream, wall_time=wall, mono_ns=mono
            )
            for event in events
        ]
        http = events[0]
        paired = self.sse.finished(exchange, http.request_blob if isinstance(http, HttpExchanged) else None)
        stamped += [
            Stamped(owner.run_id, event, actor=owner.actor, upstream=owner.upstream, wall_time=wall, mono_ns=mono)
            for owner, event in paired.paired
        ]
        self.writer.submit(events=stamped, blobs={**blobs, **paired.blobs})

    def chunk(self, exchange: Exchange, index: int, chunk: Chunk) -> None:
        if index == 0:
            self.redactor.learn_request(exchange.request_headers, exchange.url)
        data = scrub_credentials(chunk.data)  # an SSE endpoint event holds the run's capability
        digest = blob_hash(data)
        event = ChunkReceived(
            exchange_id=exchange.exchange_id, index=index, offset_ms=chunk.offset_ms, blob=digest, size=len(chunk.data)
        )
        # past its first MiB a stream's chunks go to side files: DuckDB's ingest of hundreds of chunk blobs
        # left several times the stream's size resident
        self.writer.submit(
            events=[Stamped(exchange.run_id, event, actor=exchange.actor, upstream=exchange.upstream)],
            blobs={digest: data},
            side_files=exchange.chunk_bytes >= self.writer.body_file_bytes,
        )
        found = self.sse.chunk(exchange, chunk.data)
        if found.paired or found.blobs:  # a large reply's body is stored at once, paired or not
            self.writer.submit(
                events=[
                    Stamped(owner.run_id, called, actor=owner.actor, upstream=owner.upstream)
                    for owner, called in found.paired
                ],
                blobs=found.blobs,
            )
