"""Run one external program to its end: prompt on stdin, bounded stdout and stderr, a timeout, its group killed.

The program starts in a session (and so a process group) of its own, so everything it starts can be ended
with it: on its timeout, when the caller is cancelled (an interrupted recording), and after it exits, so a
child left behind holds no pipe open and outlives no run.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream, Process

STOP_GRACE_S = 5.0
"""How long a program has between SIGTERM and SIGKILL when it is stopped."""


@dataclass(frozen=True)
class ProgramOutcome:
    """How a program ended and what it wrote: ``stdout`` its first bytes, ``stderr`` its last, up to the bounds."""

    exit_code: int | None
    """None when a signal ended it (``signal`` names it) or it was stopped at its timeout."""
    signal: str | None
    timed_out: bool
    stdout: bytes
    stdout_size: int
    stderr: bytes
    stderr_size: int
    interrupted: bool = False
    """Stopped by fae because the run was cancelled (an interrupted recording)."""


class _Kept:
    """Bytes read from a stream: the first ``limit`` (``tail=False``) or the last ``limit``, and the total size."""

    def __init__(self, limit: int, *, tail: bool) -> None:
        self.limit, self.tail = limit, tail
        self.data = bytearray()
        self.size = 0

    async def drain(self, stream: ByteReceiveStream | None) -> None:
        if stream is None:
            return
        async for chunk in stream:
            self.size += len(chunk)
            if self.tail:
                self.data += chunk
                del self.data[: max(0, len(self.data) - self.limit)]
            elif len(self.data) < self.limit:
                self.data += chunk[: self.limit - len(self.data)]


async def _feed(process: Process, data: bytes) -> None:
    """Write the prompt and close stdin; a program that never reads it (or exits first) is no error."""
    if process.stdin is None:
        return
    try:
        await process.stdin.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        try:
            await process.stdin.aclose()
        except (anyio.BrokenResourceError, OSError):
            pass


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group has ended already


def _group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie does not: a container's init may never reap the
    children it inherits). Read from /proc; where there is none, the group is taken as ended."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we looked
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def _stop(process: Process) -> None:
    """SIGTERM to the program's whole group, SIGKILL to what still runs of it after the grace period (the program
    and what it started: each gets the grace to clean up, not only the program); returns when the program is gone."""
    _signal_group(process.pid, signal.SIGTERM)
    with anyio.move_on_after(STOP_GRACE_S):
        await process.wait()
        while _group_running(process.pid):
            await anyio.sleep(0.05)
    _signal_group(process.pid, signal.SIGKILL)
    await process.wait()


async def run_program(
    argv: Sequence[str],
    *,
    stdin: bytes,
    env: Mapping[str, str],
    timeout_s: float,
    stdout_limit: int,
    stderr_limit: int,
    cwd: str | None = None,
    on_interrupt: Callable[[ProgramOutcome], Awaitable[None]] | None = None,
) -> ProgramOutcome:
    """Run ``argv`` (no shell) until it exits or ``timeout_s`` passes; raises OSError when it cannot start.

    Cancelled (an interrupted recording), it stops the program's whole group, tells ``on_interrupt`` what the
    program had written by then (``interrupted=True``), and lets the cancellation go on."""
    process = await anyio.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    out, err = _Kept(stdout_limit, tail=False), _Kept(stderr_limit, tail=True)
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_feed, process, stdin)
            group.start_soon(out.drain, process.stdout)
            group.start_soon(err.drain, process.stderr)
            with anyio.move_on_after(timeout_s) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                await _stop(process)
            # whatever the program left running in its group ends with it, so the pipes close
            _signal_group(process.pid, signal.SIGKILL)
    except BaseException:
        with anyio.CancelScope(shield=True):  # cancelled (an interrupt): the program must not outlive its run
            if process.returncode is None:
                await _stop(process)
            _signal_group(process.pid, signal.SIGKILL)
            await process.aclose()
            if on_interrupt is not None:
                await on_interrupt(_outcome(process.returncode, False, out, err, interrupted=True))
        raise
    await process.aclose()
    return _outcome(process.returncode, timed_out, out, err)


def _outcome(code: int | None, timed_out: bool, out: _Kept, err: _Kept, *, interrupted: bool = False) -> ProgramOutcome:
    stopped = timed_out or interrupted
    ended_by = signal.Signals(-code).name if code is not None and code < 0 and not stopped else None
    return ProgramOutcome(
        exit_code=None if stopped or (code is not None and code < 0) else code,
        signal=ended_by,
        timed_out=timed_out,
        stdout=bytes(out.data),
        stdout_size=out.size,
        stderr=bytes(err.data),
        stderr_size=err.size,
        interrupted=interrupted,
    )
