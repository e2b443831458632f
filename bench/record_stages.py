"""CPU seconds of a recording by stage, from py-spy's raw samples of every process and thread.

A sample is charged to the innermost frame that names a stage: fae's own
modules first (so the HTTP client an agent drives counts as the agent, the
DuckDB calls the writer makes as the writer), then the libraries that do
work of their own (mitmproxy, the HTTP servers), then the event loop; a
stack inside an import is start-up. The seconds are the samples' shares of
the CPU time the operating system measured for the process tree (py-spy
counts a runnable thread as active, so on a loaded machine its own count is
high).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

PROXY = "proxy: hooks and recording"
LOG = "log writer (DuckDB, journal)"
# fae's own modules, by prefix: the first match names the stage
FAE_STAGES = (
    ("fae/harness/settle.py", "settle waits"),
    ("fae/proxy/", PROXY),
    ("fae/recorder/", PROXY),
    ("fae/fhir/", "FHIR server"),
    ("fae/mcp/", "MCP servers"),
    ("fae/agents/", "gold agent"),
    ("fae/plan", "gold agent"),
    ("fae/store/", LOG),
    ("fae/judge/", "live judging"),
    ("fae/replay/", "live judging"),
    ("fae/tasks/", "tasks: render, seed"),
    ("fae/", "harness"),
)
# libraries whose frames have no fae frame inside them
LIBRARY_STAGES = (
    ("mitmproxy", PROXY),
    ("uvicorn/", "HTTP servers (uvicorn, starlette)"),
    ("starlette/", "HTTP servers (uvicorn, starlette)"),
    ("h11/", "HTTP servers (uvicorn, starlette)"),
    ("mcp/", "MCP servers"),
    ("fhirpathpy/", "FHIR server"),
    ("httpx/", "HTTP clients"),
    ("httpcore/", "HTTP clients"),
    ("duckdb", LOG),
    ("msgspec", LOG),
    ("asyncio/", "event loop"),
    ("anyio/", "event loop"),
    ("selectors", "event loop"),
)
WAITING = "waiting (not CPU)"
# innermost frames that block: py-spy may count a thread in them as active (waking, or waiting for the GIL)
WAITS = (
    "Condition.wait (threading.py",
    "Event.wait (threading.py",
    "select (selectors.py",
    "Thread.join (threading.py",
    "_wait_for_tstate_lock (threading.py",
    "sleep (",
)
FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
PROCESS = re.compile(r'^process \d+:"(?P<cmd>.*)"$')


def _fae_stage(file: str) -> str | None:
    for fragment, stage in FAE_STAGES:
        if file.startswith(fragment) or f"/{fragment}" in file:
            return stage
    return None


def stage_of(files: list[str]) -> str:
    """The stage of one sample, given its frames' files from the outermost to the innermost."""
    if any("importlib._bootstrap" in f for f in files):
        return "imports (start-up)"
    found = [_fae_stage(file) for file in reversed(files)]
    fae = [stage for stage in found if stage is not None]
    if fae:
        # the log's reads count for whoever reads (live judging, the settle wait); its writes for the writer
        return next((stage for stage in fae if stage != LOG), fae[0])
    for file in reversed(files):
        for fragment, stage in LIBRARY_STAGES:
            if fragment in file:
                return stage
    return "other (stdlib, unmatched)"


def role_of(command: str) -> str:
    """A process's part in the recording, from its command line."""
    if "record_worker" in command or "multiprocessing" in command or "forkserver" in command:
        return "workers"
    if "upstream_process" in command:
        return "upstream child"
    return "driver / main"


def read_samples(path: Path) -> dict[str, Counter]:
    """py-spy ``--format raw --subprocesses`` output → {process role: Counter(stage → samples)}."""
    by_role: dict[str, Counter] = defaultdict(Counter)
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        role = "driver / main"
        files = []
        for frame in frames:
            if (process := PROCESS.match(frame)) is not None:
                role = role_of(process["cmd"])
            elif (match := FRAME.match(frame)) is not None:
                files.append(match["file"])
        waiting = frames[-1].startswith(WAITS) or ".select (selectors.py" in frames[-1]
        stage = stage_of(files) if files else "no Python frame (native code)"
        by_role[role][WAITING if waiting else stage] += int(count)
    return dict(by_role)


def table(by_role: dict[str, Counter], cpu_s: float) -> list[str]:
    """Rows of stage × process role, in CPU seconds (the samples' share of ``cpu_s``) and percent."""
    stages: Counter = Counter()
    for counter in by_role.values():
        stages.update(counter)
    waiting = stages.pop(WAITING, 0)
    total = sum(stages.values()) or 1
    roles = sorted(by_role)
    head = f"  {'stage':36}" + "".join(f"{r:>16}" for r in roles) + f"{'all':>10}{'share':>8}"
    lines = [head]
    for stage, samples in stages.most_common():
        cells = "".join(f"{cpu_s * by_role[r][stage] / total:14.2f} s" for r in roles)
        lines.append(f"  {stage:36}{cells}{cpu_s * samples / total:8.2f} s{100 * samples / total:7.1f}%")
    lines.append(
        f"  the proxy's share of all CPU: {100 * stages[PROXY] / total:.1f} % "
        f"({total} samples on CPU, {waiting} more in blocking waits left out)"
    )
    return lines
