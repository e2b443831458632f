"""The live-query budget: how fast an over-budget query is cancelled, and what it costs the recording meanwhile.

    uv run python bench/bench_live_query.py [--requests 300] [--budget-s 0.5] [--queries 5]

Records exchanges through the proxy into a log served by the live endpoint,
first with the endpoint idle, then while a reader keeps sending a query that
runs past its time budget (a cross join that never ends). Prints the time from
the budget's end to the reader's error, and the exchange latency (p50/p95)
idle and under the runaway queries.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fae.errors import StoreError
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.live import LiveQueryServer, LogReader
from fae.store.log import EventLog
from fae.store.sandbox import Budget
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.upstream import create_upstream

RUNAWAY = "SELECT count(*) FROM range(100000) a, range(100000000) b WHERE a.range + b.range = -1"


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _runaway(path: Path, budget_s: float, queries: int, overshoot: list[float], stop: threading.Event) -> None:
    with LogReader(path) as reader:
        for _ in range(queries):
            if stop.is_set():
                return
            start = time.perf_counter()
            try:
                reader.query(RUNAWAY)
            except StoreError:
                overshoot.append(time.perf_counter() - start - budget_s)


async def _exchanges(client: httpx.AsyncClient, url: str, count: int) -> list[float]:
    body = b'{"resourceType": "Patient", "name": [{"family": "Bench"}]}'
    took = []
    for _ in range(count):
        start = time.perf_counter()
        reply = await client.post(url, content=body)
        reply.raise_for_status()
        took.append((time.perf_counter() - start) * 1000)
    return took


async def bench(requests: int, budget_s: float, queries: int, directory: Path) -> None:
    path = directory / "live.duckdb"
    log = EventLog(path)
    overshoot: list[float] = []
    stop = threading.Event()
    async with serve_asgi(create_upstream()) as port:
        upstreams = {"fhir": Upstream("fhir", f"http://127.0.0.1:{port}", "fhir")}
        with LiveQueryServer(log, Budget(time_s=budget_s)):
            async with open_writer(log) as writer, run_proxy(upstreams, Recorder(writer)) as proxy:
                url = proxy.url("bench", "agent", "fhir", "Patient")
                async with httpx.AsyncClient() as client:
                    await _exchanges(client, url, 20)  # warm up
                    idle = await _exchanges(client, url, requests)
                    runaway = threading.Thread(target=_runaway, args=(path, budget_s, queries, overshoot, stop))
                    runaway.start()
                    busy: list[float] = []
                    while runaway.is_alive():
                        busy += await _exchanges(client, url, 10)
                    stop.set()
                    runaway.join()
    log.close()
    print(
        f"live query budget {budget_s:g} s: {len(overshoot)} runaway queries cancelled "
        f"{statistics.median(overshoot) * 1000:.0f} ms (median; max {max(overshoot) * 1000:.0f} ms) "
        f"after their budget ran out"
    )
    print(f"exchange latency idle     p50 {_p(idle, 0.5):.2f} ms  p95 {_p(idle, 0.95):.2f} ms  (n={len(idle)})")
    print(f"exchange latency runaway  p50 {_p(busy, 0.5):.2f} ms  p95 {_p(busy, 0.95):.2f} ms  (n={len(busy)})")
    print(
        f"added latency meanwhile   p50 {_p(busy, 0.5) - _p(idle, 0.5):+.2f} ms  "
        f"p95 {_p(busy, 0.95) - _p(idle, 0.95):+.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--budget-s", type=float, default=0.5)
    parser.add_argument("--queries", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        anyio.run(bench, args.requests, args.budget_s, args.queries, Path(directory), backend="asyncio")


if __name__ == "__main__":
    main()
