"""Training then evaluation with memory on, over real HTTP on 127.0.0.1.

Training: the scripted gold agent (and a plan that answers wrongly) plays
rec-record-condition; the local server's scripted evaluator and reflector turn
each run into reflections, through the recording proxy. Evaluation: the
LangChain agent in its ``memory-nospec`` configuration, driven by the local
server's ``scripted:gold`` model with a plan whose first steps call the memory
tools, retrieves those reflections through the proxied memory MCP server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fae.harness.config import RecordConfig, StackConfig
from fae.harness.training import train
from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.memory.reflection_store import MemoryStore
from fae.plan import plan_to_dict
from fae.store.log import EventLog
from fae.tasks import load_suite
from tests.run_report import why_not_finished

TASK = "rec-record-condition"
MATCH = "to the medical history of patient"

pytestmark = pytest.mark.anyio


def _events(log_path: Path, sql: str, params: list) -> list[tuple]:
    with EventLog(log_path, read_only=True) as log:
        return log.query(sql, params)[1]


async def test_training_then_evaluation_with_memory(tmp_path):
    from fae.harness.suite_runner import record_suite
    from fae.harness.worklist import suite_specs

    rendered = load_suite()[TASK].render(0)
    wrong_plan = tmp_path / "wrong.yaml"
    wrong_plan.write_text(json.dumps({"name": "wrong", "steps": [{"answer": "<CONDITION>none</CONDITION>"}]}))
    eval_plan = plan_to_dict(rendered.gold_plan)
    eval_plan["steps"] = [
        {"call": "search_macro_reflections", "args": {"query": "record a diagnosis as a Condition"}, "save": "macro"},
        {"call": "search_micro_tips", "args": {"resource": "Condition", "operation": "create"}, "save": "micro"},
        *eval_plan["steps"],
    ]
    registry = PlanRegistry([entry_from_dict({"match": MATCH, "plan": eval_plan})])
    store_dir, log_path = tmp_path / "memory", tmp_path / "fae.duckdb"
    with LlmServer(create_app(registry)) as llm:
        gold = await train(log_path, [TASK], store_dir=store_dir, llm_url=llm.base_url, agent="gold", variations=[0])
        wrong = await train(
            log_path, [TASK], store_dir=store_dir, llm_url=llm.base_url, agent=f"plan:{wrong_plan}", variations=[0]
        )
        specs = suite_specs([TASK], [0], ["langchain:memory-nospec@scripted:gold"], 1, "eval")
        result = await record_suite(
            log_path, specs, RecordConfig(stack=StackConfig(llm_url=llm.base_url, memory_stores={"nospec": store_dir}))
        )

    # training: the gold agent passed at once; the wrong one got both trials and failed both
    assert [(r.trial, r.passed) for r in gold.runs] == [(0, True)]
    assert [(r.trial, r.passed) for r in wrong.runs] == [(0, False), (1, False)]
    store = MemoryStore.open(store_dir)
    macro = store.macro()
    assert [m.success for m in macro] == [True, False, False]
    assert all(m.created_at == rendered.now.isoformat() for m in macro)  # the task's clock
    tips = store.micro_tips("Condition", "create")
    assert tips and tips[0].task_id == TASK
    # the evaluator and reflector calls are in the log, as the verifier of each training run
    verifier_calls = _events(
        log_path,
        "SELECT run_id, payload->>'$.model' FROM events WHERE kind = 'LlmCalled' "
        "AND actor = 'verifier' ORDER BY run_id, seq",
        [],
    )
    assert [model for _, model in verifier_calls] == ["scripted:evaluator", "scripted:reflector"] * 3

    # evaluation: the agent's memory tool calls went through the proxy and returned the reflections
    assert result.statuses["finished"] == 1, why_not_finished(log_path)
    run_id = specs[0].run_id
    calls = _events(
        log_path, "SELECT payload FROM events WHERE run_id = ? AND kind = 'ToolCalled' ORDER BY seq", [run_id]
    )
    tools = [json.loads(p) for (p,) in calls]
    by_name = {t["tool"]: t for t in tools}
    assert [t["tool"] for t in tools][:2] == ["search_macro_reflections", "search_micro_tips"]
    macro_hits = by_name["search_macro_reflections"]["result"]["results"]
    assert {hit["run_id"] for hit in macro_hits} <= {m.run_id for m in macro} and macro_hits
    micro_hits = by_name["search_micro_tips"]["result"]["results"]
    assert micro_hits[0]["tip"] == tips[0].tip
    assert "createResource" in by_name  # and the task itself was done
