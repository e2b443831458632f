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
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}


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
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        yield ray
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
