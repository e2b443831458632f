"""One local worker of ``fae record --workers N``: a ``ShardRecorder`` in its own process, driven over a pipe.

The driver (fae/harness/local_workers.py) starts it in its own session, so a terminal's Ctrl-C reaches
the driver only and the worker stops when the driver tells it to. It dies with the driver
(PR_SET_PDEATHSIG), leaving its shard for the next ``--resume`` to settle. The pipe is the standard
library's ``multiprocessing`` connection; its messages are tuples:

    driver → worker: (shard, job) once, then ("run", spec) | ("stop", signum) | ("close",)
    worker → driver: ("ready",) | ("failed", why) once, then ("ended", run_id, status) | ("error", run_id, why),
                     and ("closed", healthy) last

    python -m fae.harness.record_worker FD PARENT_PID   (started by ``fae.harness.local_workers``)
"""

from __future__ import annotations

import signal
import sys
import threading
from concurrent.futures import Future, wait
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

from fae.harness.run import RunSpec
from fae.harness.shards import ShardJob, ShardRecorder
from fae.harness.upstream_process import die_with_parent


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Worker:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()  # runs end on the stack's thread, the rest is said from the main one
        self._pending: set[Future] = set()

    def send(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            try:
                self._conn.send(message)
            except OSError:
                pass  # the driver is gone: PR_SET_PDEATHSIG ends this process

    def _report(self, spec: RunSpec, future: Future) -> None:
        self._pending.discard(future)
        try:
            self.send(("ended", spec.run_id, future.result()))
        except BaseException as exc:  # a harness bug: the driver stops the suite with it
            self.send(("error", spec.run_id, _short(exc)))

    def serve(self, shard: str, job: ShardJob) -> None:
        try:
            recorder = ShardRecorder(shard, job)
        except Exception as exc:
            self.send(("failed", _short(exc)))
            return
        self.send(("ready",))
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break  # the driver is gone: keep what was recorded
            if message[0] == "run":
                spec = message[1]
                future = recorder.submit(spec)
                self._pending.add(future)
                future.add_done_callback(partial(self._report, spec))
            elif message[0] == "stop":
                recorder.stop(message[1])
            elif message[0] == "close":
                break
        if self._pending:  # runs still in flight are stored interrupted, not cut off by the stack closing
            recorder.stop(int(signal.SIGTERM))
            wait(list(self._pending))
        self.send(("closed", recorder.close()))


def main() -> None:
    fd, parent = int(sys.argv[1]), int(sys.argv[2])
    die_with_parent(parent)
    conn = Connection(fd)
    shard, job = conn.recv()
    _Worker(conn).serve(shard, job)
    conn.close()


if __name__ == "__main__":
    main()
