"""Finding fae's upstream process from /proc, and waiting for a process to end (Linux only)."""

from __future__ import annotations

import time
from pathlib import Path

GONE_WAIT_S = 30


def upstream_children(parent: int) -> list[int]:
    """Pids of the upstream processes whose parent is ``parent`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # ended while we looked
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == parent and b"fae.harness.upstream_process" in cmdline:
            found.append(int(entry.name))
    return found


def _ended(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet whose every thread has exited (so its sockets are closed:
    a leader thread turns zombie before the others are done)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = [(task / "stat").read_text().rpartition(")")[2].split()[0] for task in tasks]
    except OSError:
        return True
    return all(state in ("Z", "X") for state in states) and len(states) <= 1


def wait_gone(pid: int) -> bool:
    """Whether ``pid`` ended within GONE_WAIT_S."""
    deadline = time.monotonic() + GONE_WAIT_S
    while time.monotonic() < deadline:
        if _ended(pid):
            return True
        time.sleep(0.02)
    return False
