"""Proxy overhead and ingest rate, measured side by side in one run.

    uv run python bench/bench_proxy.py [--requests 400] [--events 100000] [--rss-limits 8,32,64]
                                       [--embedded-fhir] [--skip-latency]

Prints, per exchange, the latency direct to a local upstream and through the
recording proxy (which answers only once the exchange is durable in the
log's journal; DuckDB gets it in the next batch),
interleaved request by request so machine noise hits both alike; then the rate
at which the single writer ingests events; then, at each body size limit, the
peak RSS growth of a recording proxy (a process of its own) keeping each kind
of body one byte under the limit (opaque, FHIR JSON each way, an LLM's long
history, long answer and long streamed answer, chunked, gzip), over its warmed-up size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store import events as ev
from fae.store.log import EventLog, RunRow
from fae.store.writer import Stamped, open_writer
from fae.util.serve import serve_asgi
from tests.proxy.body_memory import ProxyChild
from tests.upstream import create_upstream


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(requests: int, directory: Path) -> None:
    log = EventLog(directory / "latency.duckdb")
    direct: list[float] = []
    proxied: list[float] = []
    async with serve_asgi(create_upstream()) as port:
        upstreams = {"fhir": Upstream("fhir", f"http://127.0.0.1:{port}", "fhir")}
        async with open_writer(log) as writer, run_proxy(upstreams, Recorder(writer)) as proxy:
            async with httpx.AsyncClient() as client:
                body = b'{"resourceType": "Patient", "name": [{"family": "Bench"}]}'
                direct_url = f"http://127.0.0.1:{port}/Patient"
                proxy_url = proxy.url("bench", "agent", "fhir", "Patient")
                for _ in range(20):  # warm both paths
                    await client.post(direct_url, content=body)
                    await client.post(proxy_url, content=body)
                for i in range(requests):
                    order = ((direct_url, direct), (proxy_url, proxied))
                    for url, sink in order if i % 2 == 0 else order[::-1]:
                        start = time.perf_counter()
                        reply = await client.post(url, content=body)
                        sink.append((time.perf_counter() - start) * 1000)
                        assert reply.status_code == 200
    log.close()
    d50, p50 = statistics.median(direct), statistics.median(proxied)
    print(f"exchanges: {requests} each way, interleaved")
    print(f"  direct   median {d50:.2f} ms   p95 {_p(direct, 0.95):.2f} ms")
    print(f"  proxied  median {p50:.2f} ms   p95 {_p(proxied, 0.95):.2f} ms   (journaled before delivery)")
    print(
        f"  added    median {p50 - d50:.2f} ms   p95 {_p(proxied, 0.95) - _p(direct, 0.95):.2f} ms"
        f"   ratio {p50 / d50:.2f}x"
    )


async def ingest(count: int, batch: int, directory: Path) -> None:
    log = EventLog(directory / "ingest.duckdb")
    async with open_writer(log) as writer:
        await writer.write(runs=[RunRow("ingest", "t", 0, "a", 0, started_at=datetime.now(UTC))])
        events = [
            Stamped(
                "ingest",
                ev.ToolCalled(tool="searchResources", arguments={"resourceType": "Slot"}, result={"n": i}),
                actor="agent",
            )
            for i in range(count)
        ]
        start = time.perf_counter()
        pending = []
        for offset in range(0, count, batch):
            pending.append(writer.write(events=events[offset : offset + batch]))
        async with anyio.create_task_group() as group:
            for job in pending:
                group.start_soon(lambda j=job: j)
        await writer.flush()  # counted until DuckDB has every event
        elapsed = time.perf_counter() - start
    rows = log.query("SELECT count(*) FROM events")[1][0][0]
    log.close()
    print(
        f"ingest: {rows} events in {elapsed:.2f} s = {rows / elapsed:,.0f} events/s "
        f"(submitted in batches of {batch}; {writer.batches_written} transactions)"
    )


def body_memory(limit: int, directory: Path, embedded_fhir: bool) -> None:
    """Per kind of body: peak RSS growth / limit of a recording proxy (a process of its own) keeping one of
    ``limit - 1`` bytes, each in a fresh proxy; then all in one proxy, as a long-lived one meets them in turn."""
    mib = limit >> 20
    with ProxyChild(directory / f"rss{mib}.duckdb", limit) as child:
        names = list(child.cases())
    fresh = {}
    for index, name in enumerate(names):
        with ProxyChild(directory / f"rss{mib}-{index}.duckdb", limit) as child:
            fresh[name] = child.measure(child.cases()[name]).over_baseline / limit
    with ProxyChild(directory / f"rss{mib}-all.duckdb", limit) as child:
        together = {name: child.measure(action).over_baseline / limit for name, action in child.cases().items()}
    print(
        f"body memory at a {mib} MiB limit (load {os.getloadavg()[0]:.1f}): peak RSS growth / limit,"
        " each in a fresh proxy | all in one proxy, in this order"
    )
    for name in names:
        print(f"  {name:28} {fresh[name]:5.2f}x | {together[name]:5.2f}x")
    if embedded_fhir:
        with ProxyChild(directory / f"rss{mib}-real.duckdb", limit, embedded_fhir=True) as child:
            for name, action in child.real_fhir_cases().items():
                grown = child.measure(action)
                print(
                    f"  {name:28} {grown.over_baseline / limit:5.2f}x the proxy's; the embedded FHIR server's"
                    f" own process {(grown.upstream or 0) / limit:5.2f}x"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rss-limits", default="32", help="body size limits in MiB, comma separated ('' skips)")
    parser.add_argument(
        "--embedded-fhir",
        action="store_true",
        help="also measure a large body stored in and read from the embedded FHIR server",
    )
    parser.add_argument("--skip-latency", action="store_true", help="measure body memory only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_latency:
            anyio.run(latency, args.requests, Path(tmp))
            anyio.run(ingest, args.events, args.batch, Path(tmp))
        for mib in filter(None, args.rss_limits.split(",")):
            body_memory(int(mib) << 20, Path(tmp), args.embedded_fhir)


if __name__ == "__main__":
    main()
