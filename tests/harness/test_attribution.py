"""A run that does not finish names who ended it, and --resume re-records only what was not the agent's fault."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from fae.agents.prefixes import build_agent
from fae.fhir.engine import FhirEngine
from fae.harness.config import RecordConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack, sandbox_id
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import is_done, suite_specs
from fae.proxy.routes import Upstream
from fae.store.log import EventLog
from fae.tasks.fixture import BUILTIN_TASK, render_builtin


def _spec(name: str) -> RunSpec:
    return RunSpec(run_id=f"{BUILTIN_TASK}.{name}", task_id=BUILTIN_TASK, variation=0, agent=name, repeat=0)


def _dead_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bad_plan(tmp_path) -> str:
    """A plan that breaks itself: it refers to a result it never saved (the agent's own fault)."""
    plan = tmp_path / "bad-ref.yaml"
    plan.write_text("steps:\n  - answer: ${neverSaved.id}\n")
    return f"plan:{plan}"


def _row(log_path, run_id: str) -> tuple:
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query("SELECT status, cause, error FROM runs WHERE run_id = ?", [run_id])
        _, ends = log.query("SELECT payload->>'$.cause' FROM events WHERE run_id = ? AND kind = 'RunFailed'", [run_id])
    return rows[0], [c for (c,) in ends]


@pytest.mark.anyio
async def test_each_failure_names_its_cause_and_drops_its_sandbox(tmp_path):
    log_path = tmp_path / "causes.duckdb"
    engine = FhirEngine()
    rendered = render_builtin(0)
    async with open_stack(log_path, fhir_engine=engine) as stack:
        # the agent's own fault while the stack answers: errored, the agent's
        agent_spec = _spec("agent-fault")
        assert await execute_run(stack, agent_spec, rendered, build_agent(_bad_plan(tmp_path))) == "errored"
        # the harness's: a seed bundle the server refuses
        refused = dataclasses.replace(rendered, seed_bundle={"resourceType": "Patient"})
        harness_spec = _spec("harness-fault")
        assert await execute_run(stack, harness_spec, refused, build_agent("gold")) == "failed"
        # the stack's: the FHIR MCP server stopped answering mid-suite
        stack.proxy.upstreams["mcp-fhir"] = Upstream("mcp-fhir", f"http://127.0.0.1:{_dead_port()}", "mcp")
        stack_spec = _spec("stack-fault")
        assert await execute_run(stack, stack_spec, rendered, build_agent("gold")) == "failed"
        left = set(engine.sandbox_ids())
        await stack.writer.flush()

    (status, cause, error), ends = _row(log_path, agent_spec.run_id)
    assert (status, cause, ends) == ("errored", "agent", ["agent"]), error
    assert "neverSaved" in error, error
    (status, cause, error), ends = _row(log_path, harness_spec.run_id)
    assert (status, cause, ends) == ("failed", "harness", ["harness"]), error
    assert "seeding" in error
    (status, cause, error), ends = _row(log_path, stack_spec.run_id)
    assert (status, cause, ends) == ("failed", "stack", ["stack"]), error
    assert "mcp-fhir" in error, error
    # no run's sandbox outlives it, whatever became of the run (the stack fault's was seeded)
    for spec in (agent_spec, harness_spec, stack_spec):
        assert sandbox_id(spec.run_id) not in left, (spec.run_id, left)


@pytest.mark.parametrize(
    ("status", "cause", "retry_errored", "done"),
    [
        ("finished", None, False, True),
        ("finished", None, True, True),
        ("errored", "agent", False, True),
        ("errored", None, False, True),  # recorded before causes were: the agent's, as it was stored
        ("errored", "agent", True, False),
        ("errored", "stack", False, False),
        ("errored", "harness", False, False),
        ("failed", "harness", False, False),
        ("failed", "stack", False, False),
        ("interrupted", "signal", False, False),
        ("interrupted", "harness", False, False),
        ("running", None, False, False),
    ],
)
def test_resume_keeps_only_finished_runs_and_the_agents_own_errors(status, cause, retry_errored, done):
    assert is_done(status, cause, retry_errored=retry_errored) is done


@pytest.mark.anyio
async def test_resume_skips_an_agent_error_unless_asked_to_retry_it(tmp_path):
    log_path = tmp_path / "retry.duckdb"
    specs = suite_specs([BUILTIN_TASK], [0], [_bad_plan(tmp_path)], 1)
    first = await record_suite(log_path, specs)
    assert dict(first.statuses) == {"errored": 1}
    again = await record_suite(log_path, specs, RecordConfig(resume=True))
    assert again.skipped == 1 and not again.runs
    retried = await record_suite(log_path, specs, RecordConfig(resume=True, retry_errored=True))
    assert retried.skipped == 0 and [status for _, status in retried.runs] == ["errored"]
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query("SELECT run_id, status, cause FROM runs ORDER BY run_id")
    assert [(status, cause) for _, status, cause in rows] == [("errored", "agent")] * 2, rows
