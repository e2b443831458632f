"""Write-verification cases played by any agent: the world and the faults around the task come from the case, the
agent is whatever is named — fae's scripted gold, the LangChain agent on the local scripted LLM server, a program.

The expected table is worked out by hand from fae/tasks/data/scenarios/register-patient.yaml's cases, for an agent
that creates the patient right once and answers (all three do):

- harmful, and stopped by ensure_record (the read-back or another actor's write in the window shows it):
  create-changed-in-flight (the server stores the wrong phone), create-acknowledged-lost (the server holds no
  record), overwritten-after-create (a fault's PUT), changed-unseen-after-answer (a write past the proxy) → 4 caught;
- harmless and not stopped: quiet, slow-create, other-user-reads-record, bystander-edited-at-start;
- harmless but stopped: other-user-edits-record (another user's write lands in the window: ensure_record cannot
  tell a benign edit from a harmful one) → 1 false stop;

the same under accept_corrections=false and =true (an agent that never corrects itself).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from fae import api
from fae.harness.config import RecordConfig, StackConfig
from fae.harness.suite_runner import record_suite
from fae.llm.app import create_app
from fae.llm.plan_registry import PlanRegistry, entry_from_dict
from fae.plan import plan_to_dict
from fae.store.log import EventLog
from fae.tasks.scenarios import case_names, scenario_plan
from tests.run_report import why_not_finished

pytestmark = pytest.mark.timeout(900)  # two dozen runs, a program's start each, on a loaded 2-core machine

TASK = "wv-register-patient"
LLM_AGENT = "langchain:baseline@scripted:gold"
PROGRAM = """
import asyncio, os, re, sys
from mcp import Client

async def main():
    prompt = sys.stdin.read()
    given, family, birth, phone = re.search(r"patient (\\S+) (\\S+), born (\\S+), phone ([^.]+)\\.", prompt).groups()
    body = {"resourceType": "Patient", "name": [{"family": family, "given": [given]}], "birthDate": birth,
            "telecom": [{"system": "phone", "value": phone}]}
    async with Client(os.environ["FAE_MCP_URL"]) as mcp:
        created = await mcp.call_tool("createResource", {"resourceType": "Patient", "body_json": body})
    text = "".join(getattr(part, "text", "") for part in created.content)
    found = re.search(r'"id"\\s*:\\s*"([^"]+)"', text)
    print(f"<PATIENT>{found.group(1) if found else ''}</PATIENT>")

asyncio.run(main())
"""
EXPECTED = {"caught": (4, 4), "missed": (0, 0), "false_stops": (1, 1)}


def _llm_app():
    """The local scripted LLM server, playing the right create for the task's prompt of variation 0."""
    registry = PlanRegistry()
    registry.add(
        entry_from_dict({"match": "Register a new patient", "plan": plan_to_dict(scenario_plan("writes-right"))})
    )
    return create_app(registry)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cases")
    program = folder / "registers.py"
    program.write_text(PROGRAM)
    agents = ["gold", LLM_AGENT, f"cmd:{sys.executable} {program}"]
    log = folder / "cases.duckdb"
    runs = api.run_specs(case_names(TASK), agents=agents)
    result = anyio.run(
        lambda: record_suite(log, runs, RecordConfig(stack=StackConfig(processes=1), concurrency=4), llm_app=_llm_app())
    )
    assert result.statuses == {"finished": len(runs)}, why_not_finished(log)
    return log, agents


def test_every_case_is_played_around_every_kind_of_agent_and_the_table_is_the_worked_out_one(recorded):
    log, agents = recorded
    compared = api.compare(log, "accept_corrections=false", "accept_corrections=true", judge_name="ensure_record")
    [item] = compared.judges
    assert set(item.case_harms) == {(f"{TASK} cases", agent) for agent in agents}, item.case_harms
    for agent in agents:
        assert item.case_harms[(f"{TASK} cases", agent)] == EXPECTED, (agent, item.case_harms)


def _events(log: Path, run_id: str) -> list[tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT seq, kind, actor, upstream, payload->>'$.method', payload->>'$.fault' FROM events WHERE run_id = ?"
            " AND kind IN ('HttpExchanged', 'LlmCalled', 'ToolCalled', 'AnswerGiven') ORDER BY seq",
            [run_id],
        )
    return rows


def test_the_world_acts_between_the_agent_s_write_and_its_next_step(recorded):
    """The fault's PUT lands after the agent's create and before the agent's next model call: the create's reply
    waited for it. Without the wait the model call could come first (or the PUT not at all)."""
    log, _ = recorded
    run_id = f"{TASK}--overwritten-after-create.v0.{LLM_AGENT.replace(':', '-').replace('@', '-')}.r0"
    rows = _events(log, run_id)
    assert rows, f"no run {run_id}: {[r['run_id'] for r in api.query(log, 'SELECT run_id FROM runs')]}"
    create = next(
        seq for seq, _, actor, upstream, method, _ in rows if (actor, upstream, method) == ("agent", "fhir", "POST")
    )
    fault = [
        seq for seq, _, actor, upstream, method, _ in rows if (actor, upstream, method) == ("fault", "fhir", "PUT")
    ]
    later_llm = [seq for seq, kind, *_ in rows if kind == "LlmCalled" and seq > create]
    assert fault and create < fault[0] < later_llm[0], rows


def test_faults_touch_the_agent_s_write_whatever_the_agent(recorded):
    log, agents = recorded
    for agent in agents:
        [row] = api.query(
            log,
            "SELECT run_id FROM runs WHERE task_id = ? AND agent = ?",
            [f"{TASK}--create-changed-in-flight", agent],
        )
        faulted = [f for *_, f in _events(log, row["run_id"]) if f]
        assert faulted and faulted[0].startswith("write 1 POST Patient: set telecom.0.value"), (agent, faulted)


def test_compare_prints_the_case_set_by_agent_table(recorded, capsys):
    from typer.testing import CliRunner

    from fae.cli import app

    log, agents = recorded
    done = CliRunner().invoke(
        app,
        [
            "compare",
            "--log",
            str(log),
            "--old",
            "accept_corrections=false",
            "--new",
            "accept_corrections=true",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    [judged] = json.loads(done.output)["judges"]
    rows = {(r["case_set"], r["agent"]): r for r in judged["harms_by_case_set"]}
    for agent in agents:
        row = rows[(f"{TASK} cases", agent)]
        assert (row["caught"], row["false_stops"]) == ({"old": 4, "new": 4}, {"old": 1, "new": 1}), row
