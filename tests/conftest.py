import os
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["tests.ray_cluster"]

# A recording's second process (the FHIR and MCP servers) costs ~3 s of CPU to start, and most
# tests record: they record in one process. tests/harness/test_upstream_process.py,
# test_signals.py and test_resume.py record in two, as `fae record` does by default.
os.environ.setdefault("FAE_RECORD_PROCESSES", "1")
# xdist's workers inherit COLUMNS=80 from execnet; the commands' output must not depend on how tests are run
for _variable in ("COLUMNS", "LINES"):
    os.environ.pop(_variable, None)

SESSION_LOG_DIRS = ("tests/judge/", "tests/replay/")
"""Directories whose conftest records a log once per session: their tests share one xdist worker."""
DEMO_LOG_MODULES = ("tests/report/test_otel.py",)
"""Modules outside tests/judge/ that read the session's demo log (``demo_log``): they join the judge tests."""


def worker_group(nodeid: str) -> str:
    """Which tests run on one xdist worker, in order: a session log's directory, else one test module.

    The Ray tests join the judge tests (one cluster a session; the rejudge test reads the judge tests' log), and so
    do the other readers of the demo log (recorded once, by whichever of them comes first).
    """
    module = nodeid.split("::", 1)[0]
    if os.path.basename(module).startswith("test_ray_") or module in DEMO_LOG_MODULES:
        return "tests/judge/"
    return next((folder for folder in SESSION_LOG_DIRS if module.startswith(folder)), module)


LONGEST_GROUPS = (
    "tests/judge/",
    "tests/store/test_hostile_logs.py",
    "tests/cli/test_hostile_output.py",
    "tests/harness/test_signals.py",
    "tests/harness/test_experiment.py",
    "tests/harness/test_local_workers.py",
    "tests/tasks/test_gold.py",
    "tests/store/test_sandbox.py",
    "tests/proxy/test_body_limit.py",
)
"""The groups that take longest (in a loaded run of the whole suite: 457, 181, then 92-61 s of its 2,175 test-seconds;
measured with ``--junitxml``): handed out first, longest first, so none of them starts last and leaves the other
workers idle."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest groups first; every other test keeps its place (a stable sort: groups stay contiguous)."""

    def rank(item: pytest.Item) -> int:
        group = worker_group(item.nodeid)
        return LONGEST_GROUPS.index(group) if group in LONGEST_GROUPS else len(LONGEST_GROUPS)

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than there are cores. A third of the suite's wall time on 2 cores is spent
    waiting (servers and subprocesses starting, DuckDB syncing its files, timeouts that are the tests' subject),
    and a third worker fills it: measured side by side on a loaded 2-core machine, 3 workers took 550 s where 2
    took 830 s and 4 took 723 s (bench/RESULTS.md, "The test suite's workers")."""
    return (os.cpu_count() or 1) + 1


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole groups to a worker (xdist's own loadgroup reads markers that pytest 9 no longer puts in test ids)."""
    from xdist.scheduler import LoadScopeScheduling

    # xdist would hand out the groups with the most tests first; a few long tests (a recording, a signal) cost
    # more than many quick ones, so the order is the collection's, which puts LONGEST_GROUPS first
    config.option.loadscopereorder = False

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def demo_log(tmp_path_factory) -> Path:
    """The demo suite (`fae demo`'s recording: scripted, LangChain and scenario agents), recorded once a session."""
    from fae.harness.demo import record_demo
    from tests.run_report import why_not_finished

    log = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    result = record_demo(log)
    assert result.statuses.get("finished") == result.planned, why_not_finished(log)
    return log


@pytest.fixture
def anyio_backend():
    # mitmproxy runs only on asyncio
    return "asyncio"
