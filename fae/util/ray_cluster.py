"""Reaching a Ray cluster: the optional ``ray`` extra, imported only when a command asks for Ray.

``ADDRESS`` is what ``ray.init`` takes (``auto``, ``ray://HOST:PORT``, ``HOST:PORT``), or ``local`` for a
Ray instance started on this machine for the one command. A process already connected (a script that called
``ray.init`` itself, a test's cluster) is used as it is and left running.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fae.errors import FaeError

LOCAL = "local"
"""The address that starts a Ray instance on this machine for one command."""


def import_ray(command: str) -> Any:
    """The ``ray`` module, or one clear line saying how to install it."""
    # fae is installed on every node; Ray's `uv run` hook would rebuild an environment from the working
    # directory on each worker instead (and ship the directory, logs included). A user may turn it back on.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
    except ImportError:
        raise FaeError(f"{command} needs the ray extra: pip install 'fae[ray]'") from None
    return ray


@contextmanager
def ray_connection(address: str, command: str) -> Iterator[Any]:
    """Connect to the cluster at ``address`` for the block (or use this process's connection); yields ``ray``."""
    ray = import_ray(command)
    if ray.is_initialized():
        yield ray
        return
    options: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": False}
    if address == LOCAL:
        options["include_dashboard"] = False
    handlers = _python_handlers()
    try:
        ray.init(address=None if address == LOCAL else address, **options)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        raise FaeError(f"{command}: cannot reach the Ray cluster at {address!r}: {exc}") from None
    for signum, handler in handlers.items():  # Ray's core worker installs its own (it aborts on SIGTERM)
        signal.signal(signum, handler)
    try:
        yield ray
    finally:
        ray.shutdown()


def _python_handlers() -> dict[int, Any]:
    """This process's Python handlers of SIGINT and SIGTERM (the stop signals of fae record), main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    return {signum: handler for signum, handler in handlers.items() if callable(handler)}


def cluster_cpus(ray: Any) -> int:
    """The CPUs the connected cluster offers (at least one)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def short_error(exc: BaseException) -> str:
    """One line for a Ray error: the exception at the end of the remote traceback Ray's text carries."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[-1] if any(line.startswith("File ") for line in lines) else lines[0]
