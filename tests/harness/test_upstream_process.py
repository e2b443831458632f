"""With processes=2 the FHIR and MCP servers run in a child process; a child that dies is the stack's fault."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import httpx
import pytest

from fae.agents.prefixes import build_agent
from fae.errors import RecordError
from fae.harness.config import RecordConfig, StackConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.harness.suite_runner import PROCESSES_ENV, default_processes, record_suite
from fae.harness.worklist import suite_specs
from fae.store.log import EventLog
from fae.tasks.fixture import BUILTIN_TASK, render_builtin
from tests.processes import upstream_children, wait_gone


def _runs(log_path) -> list[tuple]:
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query("SELECT variation, run_id, status, cause, error FROM runs ORDER BY started_at, run_id")
    return rows


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")


@pytest.mark.anyio
async def test_the_fhir_server_runs_in_the_child_and_its_death_is_the_stacks_fault(tmp_path):
    rendered = render_builtin(0)
    async with open_stack(tmp_path / "one.duckdb", StackConfig(processes=1)) as stack:
        assert stack.upstream_pid is None and not upstream_children(os.getpid())
    log_path = tmp_path / "two.duckdb"
    async with open_stack(log_path, StackConfig(processes=2)) as stack:
        child = stack.upstream_pid
        assert child is not None and child != os.getpid()
        assert upstream_children(os.getpid()) == [child]
        first = RunSpec(run_id="before-kill", task_id=BUILTIN_TASK, variation=0, agent="gold", repeat=0)
        assert await execute_run(stack, first, rendered, build_agent("gold"), settle_s=0) == "finished", _runs(log_path)
        os.kill(child, signal.SIGKILL)
        assert wait_gone(child)
        # the FHIR server went with the child, even when another process has since taken its port (a busy machine
        # hands freed ports out again): here this test listens on it
        fhir_port = httpx.URL(stack.proxy.upstreams["fhir"].base_url).port
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                squatter.bind(("127.0.0.1", fhir_port))
                squatter.listen()
            except OSError:
                pass  # another process took the port first: the case this test plays
            broken = await stack.unreachable()
        assert broken is not None and broken.startswith("the fhir upstream") and "process ended" in broken, broken
        second = RunSpec(run_id="after-kill", task_id=BUILTIN_TASK, variation=0, agent="gold", repeat=0)
        assert await execute_run(stack, second, rendered, build_agent("gold"), settle_s=0) == "failed"
    # the stack closed cleanly around a dead child
    rows = {run_id: (status, cause, error) for _, run_id, status, cause, error in _runs(log_path)}
    assert rows["before-kill"][:2] == ("finished", None), rows
    status, cause, error = rows["after-kill"]
    assert (status, cause) == ("failed", "stack"), rows


@pytest.mark.anyio
async def test_a_child_killed_mid_suite_fails_runs_on_the_stack_and_resume_records_them(tmp_path):
    log_path = tmp_path / "suite.duckdb"
    specs = suite_specs([BUILTIN_TASK], [0, 1, 2], ["gold"], 1)
    killed: list[int] = []

    def kill_after_first(spec, status) -> None:
        if killed:
            return
        children = upstream_children(os.getpid())
        assert len(children) == 1 and children[0] != os.getpid(), children
        os.kill(children[0], signal.SIGKILL)
        killed.append(children[0])
        assert wait_gone(children[0])  # blocks the loop: no run moves on before the child is dead

    first = await record_suite(
        log_path,
        specs,
        RecordConfig(stack=StackConfig(processes=2), concurrency=1, settle_s=0),
        on_progress=kill_after_first,
    )
    assert dict(first.statuses) == {"finished": 1, "failed": 2}, _runs(log_path)
    for _, run_id, status, cause, error in _runs(log_path):
        if status != "finished":
            assert (status, cause) == ("failed", "stack"), (run_id, status, cause, error)

    again = await record_suite(
        log_path, specs, RecordConfig(stack=StackConfig(processes=2), concurrency=1, resume=True, settle_s=0)
    )
    assert again.skipped == 1 and dict(again.statuses) == {"finished": 2}, _runs(log_path)
    finished = sorted(variation for variation, _, status, _, _ in _runs(log_path) if status == "finished")
    assert finished == [0, 1, 2], _runs(log_path)
    assert not upstream_children(os.getpid())  # each suite's child ended with it


def test_the_default_is_two_processes_unless_the_environment_says_otherwise(monkeypatch):
    monkeypatch.delenv(PROCESSES_ENV, raising=False)
    assert default_processes() == 2
    monkeypatch.setenv(PROCESSES_ENV, "1")
    assert default_processes() == 1
    monkeypatch.setenv(PROCESSES_ENV, "4")
    with pytest.raises(RecordError, match="FAE_RECORD_PROCESSES='4'"):
        default_processes()
