"""What a recorded run must not pay for again and again: the costs found by profiling `fae record`
(bench/bench_record.py --stages), each checked by counting the costly call in a real recording."""

from __future__ import annotations

import ssl

import pytest

from fae.agents.prefixes import build_agent
from fae.harness.config import StackConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.tasks.fixture import BUILTIN_TASK, render_builtin


@pytest.mark.anyio
async def test_runs_build_no_tls_context_of_their_own(tmp_path, monkeypatch):
    """The harness's client, the scripted agent's and its MCP client's share one TLS context: each built its
    own (loading the CA bundle, ~15-25 ms of CPU) on every run, a third of a gold run's CPU. The real
    ``ssl.create_default_context`` is wrapped to count it, and still builds the context."""
    built: list[dict] = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **kw: built.append(kw) or real(*a, **kw))
    agent = build_agent("gold")
    async with open_stack(tmp_path / "runs.duckdb", StackConfig(processes=1)) as stack:
        for n in range(4):
            if n == 1:
                built.clear()  # the first run may build the one shared context
            spec = RunSpec(run_id=f"tls-{n}", task_id=BUILTIN_TASK, variation=n, agent="gold", repeat=0)
            assert await execute_run(stack, spec, render_builtin(n), agent, settle_s=0) == "finished"
    assert built == [], f"{len(built)} TLS contexts built for 3 runs"
