import os

import pytest

pytest_plugins = ["tests.ray_cluster"]

# A recording's second process (the FHIR and MCP servers) costs ~3 s of CPU to start, and most
# tests record: they record in one process. tests/harness/test_upstream_process.py,
# test_signals.py and test_resume.py record in two, as `fae record` does by default.
os.environ.setdefault("FAE_RECORD_PROCESSES", "1")


@pytest.fixture
def anyio_backend():
    # mitmproxy runs only on asyncio
    return "asyncio"
