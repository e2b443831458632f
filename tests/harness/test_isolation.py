"""One run cannot reach another: a hostile agent beside an honest one, in one recording, on the real stack.

The hostile agent (``hostile_agent.py``, registered as a plugin) attacks while the honest run's patient
exists: through the other run's endpoints, the admin routes, forged headers, bad tool arguments and the
upstreams' own ports. The honest run's verdicts are those of the same run recorded alone; every attempt is
refused, the proxy's refusals are in the hostile run's own log with their status, and the log holds no
credential that works.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from fae.agents.base import AgentContext, AgentResult
from fae.agents.prefixes import build_agent, register_agent
from fae.agents.scripted_agent import ScriptedAgent
from fae.harness.config import StackConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack, sandbox_id
from fae.harness.worklist import render_task
from fae.llm import PlanRegistry, create_app
from fae.store.bodies import bodies_dir
from fae.store.log import EventLog
from tests.harness import hostile_agent
from tests.harness.hostile_agent import Intel, hostile_factory
from tests.run_report import why_not_finished

CREDENTIAL = re.compile(rb"fae-(cap|key)-[0-9a-f]{32}")


class HonestAgent:
    """The gold plan (it creates the patient), then it waits until the hostile agent is done, then answers."""

    name = "honest"

    def __init__(self, ready: anyio.Event, go_on: anyio.Event) -> None:
        self.ready, self.go_on = ready, go_on

    def config(self) -> dict[str, Any]:
        return {"kind": "honest"}

    async def run(self, ctx: AgentContext) -> AgentResult:
        result = await ScriptedAgent(name="gold", plan=None).run(ctx)
        self.ready.set()
        await self.go_on.wait()
        return result


TASK = "rec-create-patient"


def _spec(agent: str) -> RunSpec:
    return RunSpec(run_id=f"{TASK}.v0.{agent}", task_id=TASK, variation=0, agent=agent, repeat=0)


async def _record(log: Path) -> dict[str, str]:
    register_agent("hostile", hostile_factory)
    intel = hostile_agent.INTEL = Intel()
    rendered = render_task(TASK, 0)
    statuses: dict[str, str] = {}
    async with open_stack(log, StackConfig(processes=2), llm_app=create_app(PlanRegistry())) as stack:
        intel.upstreams = {name: upstream.base_url for name, upstream in stack.proxy.upstreams.items()}

        async def one(spec: RunSpec, agent: Any) -> None:
            statuses[spec.run_id] = await execute_run(stack, spec, rendered, agent)

        async with anyio.create_task_group() as group:
            group.start_soon(one, _spec("honest"), HonestAgent(intel.victim_ready, intel.done))
            group.start_soon(one, _spec("hostile"), build_agent("hostile"))
        alone = anyio.Event()
        alone.set()
        await one(_spec("alone"), HonestAgent(anyio.Event(), alone))
    return statuses


def _verdicts(log: EventLog, run_id: str) -> list[tuple]:
    _, rows = log.query("SELECT judge, outcome, passed FROM verdicts WHERE run_id = ? ORDER BY judge", [run_id])
    return rows


@pytest.mark.anyio
async def test_a_hostile_agent_cannot_reach_the_run_beside_it(tmp_path):
    log_path = tmp_path / "isolation.duckdb"
    statuses = await _record(log_path)
    honest, hostile, alone = (_spec(name).run_id for name in ("honest", "hostile", "alone"))
    assert statuses == {honest: "finished", hostile: "finished", alone: "finished"}, why_not_finished(log_path)

    with EventLog(log_path, read_only=True) as log:
        # the honest run's verdicts are what the same run gets alone: the hostile run changed nothing of it
        assert _verdicts(log, honest) == _verdicts(log, alone), (_verdicts(log, honest), _verdicts(log, alone))
        assert {(j, o) for j, o, _ in _verdicts(log, honest)} >= {
            ("task", "pass"),
            ("ensure_record", "created_verified"),
        }
        _, honest_refused = log.query(
            "SELECT count(*) FROM events WHERE run_id = ? AND kind = 'HttpExchanged' AND payload->>'$.error' "
            "LIKE 'refused%'",
            [honest],
        )
        assert honest_refused == [(0,)]  # no attempt is charged to the run it was aimed at
        # the proxy's refusals are the hostile run's own, with what it asked and the status it got
        _, refused = log.query(
            "SELECT payload->>'$.method', payload->>'$.path', payload->>'$.status' FROM events "
            "WHERE run_id = ? AND kind = 'HttpExchanged' AND payload->>'$.error' LIKE 'refused by the proxy%' "
            "ORDER BY seq",
            [hostile],
        )
        _, paths = log.query("SELECT DISTINCT path FROM fhir_exchanges WHERE run_id = ? AND actor = 'agent'", [hostile])
        _, answered = log.query(
            "SELECT payload->>'$.text' FROM events WHERE run_id = ? AND kind = 'AnswerGiven'", [hostile]
        )
    placeholder = "fae-cap-" + "redacted" * 4
    victim = f"/run/{honest}/agent/{placeholder}/mcp-fhir/mcp"
    own = f"/run/{hostile}/agent/{placeholder}"
    assert [(method, path, int(status)) for method, path, status in refused] == [
        ("POST", victim, 403),
        ("GET", f"{own}/fhir/sandbox/{sandbox_id(honest)}/fhir/Patient", 403),
        ("DELETE", f"{own}/fhir/sandbox/{sandbox_id(honest)}/fhir/Patient?_id=x", 403),
        ("GET", f"{own}/fhir/sandbox", 403),
        ("DELETE", f"{own}/fhir/sandbox/{sandbox_id(honest)}", 403),
        ("POST", f"{own}/fhir/sandbox/{sandbox_id(honest)}/$reset", 403),
        ("GET", f"/run/{hostile}/setup/{placeholder}/fhir/sandbox", 403),
        ("POST", f"{own}/llm/_fae/plans", 403),
    ], refused
    # the one call that went through (its forged headers dropped) read the hostile run's own sandbox
    assert {path.split("/fhir/")[0] for (path,) in paths} == {f"/sandbox/{sandbox_id(hostile)}"}, paths

    tried = {attempt["name"]: attempt for attempt in json.loads(answered[0][0])}
    statuses_seen = {name: (attempt["status"], attempt["tool_error"]) for name, attempt in tried.items()}
    assert statuses_seen.pop("own mcp, forged run header") == (200, None)
    refused_outright = {name: status for name, (status, error) in statuses_seen.items() if error is None}
    assert refused_outright == {
        "victim mcp, own capability: search": 403,
        "victim mcp, guessed capability: search": 403,
        "victim mcp, no capability: search": 404,  # the shape of URLs before capabilities routes nowhere
        "victim sandbox through own route": 403,
        "conditional delete in victim sandbox": 403,
        "sandbox list": 403,
        "drop victim sandbox": 403,
        "reset victim sandbox": 403,
        "sandbox list as setup": 403,
        "LLM plan registry": 403,
        "direct: sandbox list": 403,
        "direct: drop victim sandbox": 403,
        "direct: victim patients": 403,
        "direct: LLM plan registry": 403,
        "direct: mcp-fhir": 403,
        "direct: mcp-specs": 403,
    }, statuses_seen
    bad_arguments = {name: outcome for name, outcome in statuses_seen.items() if name not in refused_outright}
    assert len(bad_arguments) == 8 and set(bad_arguments.values()) == {(200, "INVALID_ARGUMENT")}, bad_arguments

    stored = log_path.read_bytes() + b"".join(p.read_bytes() for p in bodies_dir(log_path).rglob("*") if p.is_file())
    with EventLog(log_path, read_only=True) as log:
        stored += "".join(p for (p,) in log.query("SELECT payload FROM events")[1]).encode()
        stored += b"".join(bytes(b) for (b,) in log.query("SELECT data FROM blobs WHERE NOT external")[1])
    assert not CREDENTIAL.search(stored), CREDENTIAL.search(stored)
    assert placeholder.encode() in stored
