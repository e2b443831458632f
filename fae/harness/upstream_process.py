"""The stack's upstreams in a child process, so a recording uses a second core.

The parent keeps the recording proxy, the log writer, the agents and live
judging; the child serves the embedded FHIR server and the MCP servers, each
a plain HTTP server on 127.0.0.1 that the proxy forwards to like any upstream.
The child reads the stack key as the first line of its stdin (never its
command line nor its environment, which other processes of the same user can
read), prints its ports as one JSON line on stdout, then serves until its
stdin closes. It runs in its own session and installs no signal handlers, so
SIGINT and SIGTERM (a terminal's Ctrl-C included) are the parent's alone to
handle; it dies with the parent (PR_SET_PDEATHSIG on Linux, stdin's end
elsewhere), and a child that dies first leaves its ports closed, which the
harness reports as the stack's fault.

    python -m fae.harness.upstream_process CONFIG_JSON   (started by ``upstream_process``)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from fae.errors import RecordError
from fae.harness.upstream_apps import fhir_app, mcp_apps
from fae.util.serve import serve_asgi

START_TIMEOUT_S = 120
"""The child imports the FHIR engine and the MCP servers and loads the definitions: slow on a loaded machine."""
STOP_TIMEOUT_S = 15
"""The child leaves as soon as its stdin closes; one that has not by then is killed."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class UpstreamProcess:
    """A running child: its pid and its servers by proxy upstream name, as (kind, port)."""

    pid: int
    servers: dict[str, tuple[str, int]]
    ended: Callable[[], bool]
    """Whether the child has exited (its servers are down, whatever now listens on their ports)."""


def _config(*, serve_fhir: bool, embedded: bool, audit_events: bool, memory_stores: dict[str, Path]) -> str:
    return json.dumps(
        {
            "parent": os.getpid(),
            "serve_fhir": serve_fhir,
            "embedded": embedded,
            "audit_events": audit_events,
            "memory_stores": {name: str(path) for name, path in memory_stores.items()},
        }
    )


async def _read_ports(process: anyio.abc.Process) -> dict[str, tuple[str, int]]:
    """The child's one line of ports, or a RecordError if it exits or stalls before serving."""
    assert process.stdout is not None
    line = b""
    with anyio.move_on_after(START_TIMEOUT_S) as waited:
        async for data in process.stdout:
            line += data
            if b"\n" in line:
                break
    if waited.cancelled_caught:
        raise RecordError(f"the upstream process did not start serving within {START_TIMEOUT_S} s")
    if b"\n" not in line:
        await process.wait()
        raise RecordError(f"the upstream process exited (code {process.returncode}) before serving; its error is above")
    return {name: (kind, int(port)) for name, (kind, port) in json.loads(line).items()}


@asynccontextmanager
async def upstream_process(
    *,
    serve_fhir: bool,
    embedded: bool,
    key: str,
    audit_events: bool = False,
    memory_stores: dict[str, Path] | None = None,
) -> AsyncIterator[UpstreamProcess]:
    """Start the child, yield its servers once all listen, and stop it when the block exits.

    ``serve_fhir``: the child serves the embedded FHIR server too (else only the MCP servers);
    ``embedded``: the FHIR server is the embedded one, so the MCP server reaches a run's sandbox;
    ``key``: the stack key its servers require of every request.
    """
    config = _config(
        serve_fhir=serve_fhir, embedded=embedded, audit_events=audit_events, memory_stores=dict(memory_stores or {})
    )
    root = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    process = await anyio.open_process(
        [sys.executable, "-m", "fae.harness.upstream_process", config],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        env=env,
        start_new_session=True,
    )
    try:
        assert process.stdin is not None
        try:
            await process.stdin.send(key.encode() + b"\n")
        except (anyio.BrokenResourceError, OSError):
            pass  # the child died already: _read_ports says so
        servers = await _read_ports(process)
        yield UpstreamProcess(pid=process.pid, servers=servers, ended=lambda: process.returncode is not None)
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _stop(process: anyio.abc.Process) -> None:
    """Close the child's stdin (its cue to stop serving), wait for it, and kill it if it lingers."""
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except OSError:
            pass  # the child is gone already
    with anyio.move_on_after(STOP_TIMEOUT_S):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
    if process.stdout is not None:
        await process.stdout.aclose()


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies; leave at once if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


async def _serve(config: dict[str, Any], on_stop: Callable[[], None]) -> None:
    key = sys.stdin.buffer.readline().decode().strip()
    if not key:
        raise SystemExit("fae.harness.upstream_process: no stack key on stdin")
    apps: dict[str, tuple[str, Any]] = {}
    if config["serve_fhir"]:
        apps["fhir"] = ("fhir", fhir_app(audit_events=config["audit_events"], key=key))
    stores = {name: Path(path) for name, path in config["memory_stores"].items()}
    apps.update(mcp_apps(embedded=config["embedded"], memory_stores=stores, key=key))
    async with AsyncExitStack() as stack:
        servers = {name: (kind, await stack.enter_async_context(serve_asgi(app))) for name, (kind, app) in apps.items()}
        sys.stdout.write(json.dumps(servers) + "\n")
        sys.stdout.flush()
        # serve until the parent closes our stdin (or dies: then the kernel ends us)
        await anyio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
        # nothing here outlives the process (sandboxes live in memory, the proxy has closed its
        # connections): leave at once rather than stop each server gracefully on a loaded machine
        on_stop()
        os._exit(0)


def main() -> None:
    config = json.loads(sys.argv[1])
    die_with_parent(config["parent"])
    profile_to = os.environ.get("FAE_UPSTREAM_PROFILE")
    if not profile_to:
        anyio.run(_serve, config, lambda: None)
        return
    import cProfile
    import time

    # bench/bench_record.py: the child's CPU profile, written when it stops
    profiler = cProfile.Profile(time.process_time)

    def dump() -> None:
        profiler.disable()
        profiler.dump_stats(profile_to)

    profiler.runcall(anyio.run, _serve, config, dump)


if __name__ == "__main__":
    main()
