"""A fae server command run as a real subprocess on a free port, for transport tests."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_ANNOUNCED = re.compile(r"(http://127\.0\.0\.1:\d+)/")


@contextmanager
def served(*args: str) -> Iterator[str]:
    """Run ``python -m fae.cli ARGS --port 0``; yields the origin it announces on stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fae.cli", *args, "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen = []
        found = None
        while found is None:  # the start-up line is written once the port is bound; warnings may come first
            line = process.stderr.readline()
            if not line:  # the process ended without announcing itself
                process.wait()
                raise AssertionError(f"server {args} exited {process.returncode} without an address: {''.join(seen)}")
            seen.append(line)
            found = _ANNOUNCED.search(line)
        yield found.group(1)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
