"""Light judging over recorded runs: the target must be written by the agent's own requests.

Three runs of one update task through the real stack (proxy, embedded FHIR, MCP): the gold
agent; an agent that reads and answers like gold but writes nothing; and an agent that reads
and answers like gold while another actor (``other-user``) makes the very write the task asks
for. Only the gold run passes light, live and when rejudged from the log.
"""

from __future__ import annotations

import json

import anyio
from recording import record_runs

from fae.agents.scripted_agent import ScriptedAgent
from fae.harness.run import RunSpec
from fae.judge.rejudge import rejudge
from fae.plan import AnswerStep, HttpStep, Plan, ToolStep
from fae.store.log import EventLog
from fae.tasks import load_suite

TASK = "sched-waitlist-remove"


def _plans(rendered) -> dict[str, Plan | None]:
    search = rendered.gold_plan.steps[0]
    answer = AnswerStep("<APPOINTMENT>${appts.entry.0.resource.id}</APPOINTMENT>")
    by_other = HttpStep(
        http={
            "method": "PUT",
            "path": "Appointment/${appts.entry.0.resource.id}",
            "body": {"$merge": ["${appts.entry.0.resource}", {"status": "cancelled"}]},
        },
        actor="other-user",
    )
    assert isinstance(search, ToolStep) and search.save == "appts"
    return {
        "gold": None,
        "no-write": Plan(name="no-write", steps=(search, answer)),
        "other-actor-wrote": Plan(name="other-actor-wrote", steps=(search, by_other, answer)),
    }


def _light(log, batch: str) -> dict[str, tuple[str, list[str]]]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, outcome, evidence FROM verdicts WHERE judge = 'task' AND batch = ?"
            " AND rule_set::VARCHAR LIKE '%light%'",
            [batch],
        )
    return {run_id: (outcome, json.loads(evidence).get("reasons", [])) for run_id, outcome, evidence in rows}


def test_light_passes_only_the_agents_own_write(tmp_path):
    rendered = load_suite()[TASK].render(0)
    runs = []
    for name, plan in _plans(rendered).items():
        agent = ScriptedAgent(name=f"scripted:{name}", plan=plan)
        runs.append((RunSpec(f"{TASK}.v0.{name}", TASK, 0, agent.name, 0), rendered, agent))
    log = tmp_path / "light.duckdb"
    statuses = anyio.run(record_runs, log, runs)
    assert set(statuses.values()) == {"finished"}, statuses
    target = f"Appointment/{rendered.params['appointment_id']}"
    for batch in ("live", rejudge(log, full=True).batch):
        light = _light(log, batch)
        assert light[f"{TASK}.v0.gold"] == ("pass", []), light
        for name in ("no-write", "other-actor-wrote"):
            outcome, reasons = light[f"{TASK}.v0.{name}"]
            assert outcome == "fail" and f"{target} was not updated by the agent" in reasons, (name, reasons)
