"""`fae demo`: a small suite on the embedded stack, judged, rejudged under a changed rule, compared.

No key and no network: the LangChain agent talks to the local scripted LLM
server over real HTTP, through the recording proxy, like any other upstream;
the stack serves it, so it answers only the proxy.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from fae.harness.config import RecordConfig
from fae.harness.suite_runner import SuiteResult, record_suite
from fae.harness.worklist import render_task, suite_specs
from fae.plan import plan_to_dict
from fae.tasks.scenarios import TASK_ID as SCENARIO_TASK

DEMO_TASKS = ("rec-create-patient", "sched-book-appointment", "ord-order-wgs")
DEMO_AGENTS = (
    "gold",
    "langchain:baseline@scripted:gold",
    "langchain:specs@scripted:gold",
    "langchain:baseline@scripted:wrong-answer",
)
DEMO_SCENARIOS = (
    "scenario:writes-right",
    "scenario:scripted-fix",
    "scenario:duplicate-behind-fix",
    "scenario:other-user-reads-while-wrong",
    "scenario:fault-after-create",
)


def record_demo(log: Path, on_progress: Callable[[Any, str], None] | None = None) -> SuiteResult:
    """Record the demo suite into ``log`` with a local scripted LLM server serving the gold plans."""
    from fae.llm import PlanRegistry, create_app, entry_from_dict

    registry = PlanRegistry()
    for task_id in DEMO_TASKS:
        rendered = render_task(task_id, 0)
        registry.add(entry_from_dict({"match": rendered.prompt, "plan": plan_to_dict(rendered.gold_plan)}))
    specs = suite_specs(DEMO_TASKS, [0], DEMO_AGENTS, 1, "demo")
    specs += suite_specs([SCENARIO_TASK], [0], DEMO_SCENARIOS, 1, "demo")
    app = create_app(registry)
    return anyio.run(
        lambda: record_suite(log, specs, RecordConfig(concurrency=4), llm_app=app, on_progress=on_progress)
    )
