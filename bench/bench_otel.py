"""How fast `fae export --otel` turns a log into OTLP traces: runs and spans per second, to a file and to a local
OTLP/HTTP receiver, on the demo suite grown to N runs (bench/grow_log.py: every copy with bodies of its own).

    uv run python -m bench.bench_otel --runs 10000 --keep /tmp/otel-bench

Prints one line per target: runs, spans, requests, wall and CPU seconds, runs/s, spans/s, bytes written or
posted, peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.grow_log import grow
from fae.harness.demo import record_demo
from fae.report.otel import export_otel


def build(folder: Path, runs: int) -> Path:
    """The demo recording grown to ``runs`` runs, made once in ``folder``."""
    log = folder / f"otel-{runs}.duckdb"
    if log.exists():
        return log
    seed = folder / "demo.duckdb"
    if not seed.exists():
        record_demo(seed)
    shutil.copy(seed, log)
    grow(str(log), runs)
    return log


class _Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1 that counts the bytes it is sent and answers 200."""

    def __init__(self) -> None:
        self.received = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                receiver.received += len(self.rfile.read(int(self.headers.get("content-length") or 0)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def timed(log: Path, target: str, content: bool) -> tuple[float, float, object]:
    """Wall and CPU seconds of one export (CPU: this process's, the in-process receiver's included)."""
    started, cpu = time.perf_counter(), time.process_time()
    done = export_otel(log, target, content=content)
    return time.perf_counter() - started, time.process_time() - cpu, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="Build (or reuse) the log here.")
    parser.add_argument("--content", action="store_true", help="Export with --otel-content too.")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fae-otel-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    log = build(folder, args.runs)
    receiver = _Receiver()
    targets = [("file", str(folder / "traces.jsonl"), False), ("endpoint", receiver.url, False)]
    if args.content:
        targets.append(("file+content", str(folder / "traces-content.jsonl"), True))
    for label, target, content in targets:
        seconds, cpu, done = timed(log, target, content)
        size = receiver.received if label == "endpoint" else Path(target).stat().st_size
        print(
            f"{label}: {done.runs} runs, {done.spans} spans, {done.requests} requests in {seconds:.1f} s"  # type: ignore[attr-defined]
            f" ({cpu:.1f} s CPU)"
            f" = {done.runs / seconds:.0f} runs/s, {done.spans / seconds:.0f} spans/s;"  # type: ignore[attr-defined]
            f" {size / 1e6:.1f} MB; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
        )
    receiver.server.shutdown()


if __name__ == "__main__":
    main()
