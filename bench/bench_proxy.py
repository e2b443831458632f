"""Proxy overhead and ingest rate, measured side by side in one run.

    uv run python bench/bench_proxy.py [--requests 400] [--events 100000] [--rss-limits 8,32,64]

Prints, per exchange, the latency direct to a local upstream and through the
recording proxy (which answers only once the exchange is durable in the
log's journal; DuckDB gets it in the next batch),
interleaved request by request so machine noise hits both alike; then the rate
at which the single writer ingests events; then, at each body size limit, the
peak RSS growth of a recording proxy (a process of its own) keeping a request
body and a response body one byte under the limit, over its warmed-up size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
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
                    for url, sink in (order if i % 2 == 0 else order[::-1]):
                        start = time.perf_counter()
                        reply = await client.post(url, content=body)
                        sink.append((time.perf_counter() - start) * 1000)
                        assert reply.status_code == 200
    log.close()
    d50, p50 = statistics.median(direct), statistics.median(proxied)
    print(f"exchanges: {requests} each way, interleaved")
    print(f"  direct   median {d50:.2f} ms   p95 {_p(direct, 0.95):.2f} ms")
    print(f"  proxied  median {p50:.2f} ms   p95 {_p(proxied, 0.95):.2f} ms   (journaled before delivery)")
    print(f"  added    median {p50 - d50:.2f} ms   p95 {_p(proxied, 0.95) - _p(direct, 0.95):.2f} ms"
          f"   ratio {p50 / d50:.2f}x")


async def ingest(count: int, batch: int, directory: Path) -> None:
    log = EventLog(directory / "ingest.duckdb")
    async with open_writer(log) as writer:
        await writer.write(runs=[RunRow("ingest", "t", 0, "a", 0, started_at=datetime.now(UTC))])
        events = [Stamped("ingest", ev.ToolCalled(tool="searchResources", arguments={"resourceType": "Slot"},
                                                  result={"n": i}), actor="agent") for i in range(count)]
        start = time.perf_counter()
        pending = []
        for offset in range(0, count, batch):
            pending.append(writer.write(events=events[offset:offset + batch]))
        async with anyio.create_task_group() as group:
            for job in pending:
                group.start_soon(lambda j=job: j)
        await writer.flush()  # counted until DuckDB has every event
        elapsed = time.perf_counter() - start
    rows = log.query("SELECT count(*) FROM events")[1][0][0]
    log.close()
    print(f"ingest: {rows} events in {elapsed:.2f} s = {rows / elapsed:,.0f} events/s "
          f"(submitted in batches of {batch}; {writer.batches_written} transactions)")


def body_memory(limit: int, directory: Path) -> tuple[float, float]:
    """(request, response): peak RSS growth / limit while keeping a body of ``limit - 1`` bytes each way."""
    child = subprocess.Popen([sys.executable, "-m", "tests.proxy.body_limit_child", str(directory / f"rss{limit}"),
                              str(limit)], cwd=Path(__file__).resolve().parents[1], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)

    def ask(command: str) -> list[str]:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(command + "\n")
        child.stdin.flush()
        return child.stdout.readline().split()

    assert child.stdout is not None
    port = int(child.stdout.readline().split()[1])
    url = f"http://127.0.0.1:{port}/run/r1/agent/api/"
    body = os.urandom(limit - 1)
    try:
        for _ in range(3):
            httpx.post(url + "warm", content=b"w" * 65536).raise_for_status()
            httpx.get(url + "bytes/65536").raise_for_status()
        ask("flush")
        baseline = int(ask("rss")[2])
        growth = []
        for send in (lambda: httpx.post(url + "kept", content=body, timeout=300),
                     lambda: httpx.get(url + f"bytes/{limit - 1}", timeout=300)):
            ask("mark")
            send().raise_for_status()
            ask("flush")
            growth.append((int(ask("rss")[1]) - baseline) * 1024 / limit)
    finally:
        ask("quit")
        child.wait(60)
    return growth[0], growth[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rss-limits", default="32", help="body size limits in MiB, comma separated ('' skips)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(latency, args.requests, Path(tmp))
        anyio.run(ingest, args.events, args.batch, Path(tmp))
        for mib in filter(None, args.rss_limits.split(",")):
            request, response = body_memory(int(mib) << 20, Path(tmp))
            print(f"body memory: limit {mib} MiB: peak RSS growth keeping a request body of limit - 1 bytes "
                  f"{request:.2f}x the limit, a response body {response:.2f}x")


if __name__ == "__main__":
    main()
