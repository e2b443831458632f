"""One two-node Ray cluster on this machine for the session's Ray tests (skipped where Ray is not installed)."""

from __future__ import annotations

import compileall
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

OBJECT_STORE_BYTES = 80 * 1024 * 1024
QUIET = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    # Ray starts its workers at niceness 15. This cluster's two "nodes" share the machine's two cores with the
    # rest of the suite (and, on a loaded CI machine, with other busy processes at niceness 0), so a niced
    # actor got about 1 % of a core: importing fae and opening its stack took 185 s and more, past fae's 300 s
    # actor-start limit on some runs. At 0 the actors share the cores as a --workers process does.
    "RAY_worker_niceness": "0",
}
_SESSION: list[Path] = []
"""The running test cluster's temp folder (one at a time), for the logs a failed test prints."""


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """Ray's own test cluster: a head and a second node, one CPU each, small object stores, no dashboard."""
    saved = {key: os.environ.get(key) for key in QUIET}
    os.environ.update(QUIET)  # before Ray is imported: it reads them once
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if sys.dont_write_bytecode:
        # the raylet gives each node's agent 15 s to start; compiling Ray's modules on every start takes
        # longer than that on a loaded 2-core machine (PYTHONDONTWRITEBYTECODE), so compile them once
        compileall.compile_dir(Path(ray.__file__).parent, quiet=2)
    # the test cluster writes its address to Ray's default temp folder without creating it (on a fresh machine
    # it is absent), whatever temp_dir its nodes have
    Path(ray._private.utils.get_ray_address_file(None)).parent.mkdir(parents=True, exist_ok=True)
    temp = tempfile.mkdtemp(prefix="fae-ray-")  # short: Ray's socket paths live under it
    node = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "temp_dir": temp}
    _SESSION.append(Path(temp))
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        yield ray
    finally:
        ray.shutdown()
        cluster.shutdown()
        _SESSION.remove(Path(temp))
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def log_tails(lines: int = 15) -> str:
    """The last lines of the test cluster's raylet, GCS and worker logs: what Ray said about a failed test."""
    found = []
    for temp in _SESSION:
        logs = temp / "session_latest" / "logs"
        for pattern in ("raylet*.out", "gcs_server.out", "worker-*.err", "python-core-worker-*.log"):
            for path in sorted(logs.glob(pattern), key=lambda p: p.stat().st_mtime)[-4:]:
                text = path.read_text(errors="replace").splitlines()
                if not path.name.startswith("worker-"):  # only the log records, not the periodic stats tables
                    text = [line for line in text if line.startswith("[")]
                tail = text[-lines:]
                found.append(f"--- {path.name}\n" + "\n".join(tail))
    return "\n".join(found) if found else "(no Ray session logs found)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that used the cluster carries the tails of Ray's logs in its report."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and "ray_cluster" in getattr(item, "fixturenames", ()) and _SESSION:
        report.sections.append(("Ray's logs", log_tails()))
