"""The LangChain agent, recorded end to end: every configuration, through the proxy, against the local LLM server.

Real parts only: the scripted OpenAI-compatible server on 127.0.0.1 plays each
run's gold plan (registered per prompt), the embedded FHIR server, the FHIR,
specs and memory MCP servers, and the recording proxy in front of all of them.
Each configuration plays a different variation of the same five suite tasks,
so that its plan can add the lookups only that configuration's tools answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from fae.agents.langchain_agent import LangChainAgent, memory_server_available
from fae.agents.langchain_configs import CONFIGURATIONS
from fae.agents.prefixes import build_agent
from fae.errors import FaeError, RecordError
from fae.harness.config import LlmConfig, RecordConfig, StackConfig
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import render_task, suite_specs
from fae.llm import LlmServer, create_app
from fae.plan import ToolStep, plan_to_dict
from fae.store.log import EventLog
from fae.tasks import load_suite
from fae.tasks.state import MemoryState, bundle_resources

TASKS = ("rec-create-patient", "rec-first-condition", "ins-find-coverage", "sched-book-appointment", "ord-surgery-plan")
OPERATIONS = {
    "createResource": "create",
    "searchResources": "search",
    "getResourceById": "read",
    "updateResource": "update",
    "deleteResource": "delete",
}
MODEL = "scripted:gold"

needs_memory = pytest.mark.skipif(not memory_server_available(), reason="fae.memory.server is not installed")


def register(llm: LlmServer, match: str, plan: dict[str, Any]) -> None:
    """Tell the scripted LLM server which plan to play for prompts holding ``match``."""
    httpx.post(f"{llm.root_url}/_fae/plans", json={"match": match, "plan": plan}, timeout=10).raise_for_status()


def first_call(rendered: Any) -> tuple[str, str]:
    """(resource type, operation) of a gold plan's first tool step."""
    step = next(s for s in rendered.gold_plan.steps if isinstance(s, ToolStep))
    return step.args["resourceType"], OPERATIONS[step.call]


def plan_for(config: str, rendered: Any) -> dict[str, Any]:
    """The gold plan, after the lookups this configuration's extra tools offer."""
    resource, operation = first_call(rendered)
    servers = CONFIGURATIONS[config].servers
    lookups: list[dict[str, Any]] = []
    if any(s.startswith("memory:") for s in servers):
        lookups += [
            {"call": "search_macro_reflections", "args": {"query": f"{resource} {operation} task"}},
            {"call": "search_micro_tips", "args": {"resource": resource, "operation": operation}},
        ]
    if "specs" in servers:
        lookups += [
            {"call": "getStructureDefinition", "args": {"resourceType": resource.lower()}},
            {"call": "getSearchParams", "args": {"resourceType": resource}},
        ]
    plan = plan_to_dict(rendered.gold_plan)
    plan["steps"] = [*lookups, *plan["steps"]]
    return plan


def make_store(path: Path, label: str, pairs: set[tuple[str, str]]) -> Path:
    """A memory store holding one macro reflection and one tip per (resource, operation), marked ``label``."""
    from fae.memory.embeddings import HashedEmbedder
    from fae.memory.reflection_store import MacroReflection, MemoryStore, MicroReflection

    store = MemoryStore.create(path, HashedEmbedder(), created_at="2025-01-01T00:00:00Z")
    store.add_micro(
        [
            MicroReflection(
                resource=r,
                operation=o,
                tip=f"{label} tip for {o} on {r}",
                success=True,
                task_id="training",
                created_at="2025-01-01T00:00:00Z",
            )
            for r, o in pairs
        ]
    )
    store.add_macro(
        [
            MacroReflection(
                text=f"{label} reflection",
                macro_summary=f"{label}: search before writing",
                heuristic="read the record back",
                success=True,
                task_id="training",
                created_at="2025-01-01T00:00:00Z",
            )
        ]
    )
    return path


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmServer]:
    with LlmServer(create_app(fault_delay_s=120.0)) as server:  # fault:timeout answers when the client gives up
        yield server


def configs_available() -> list[str]:
    return [c for c in CONFIGURATIONS if memory_server_available() or not CONFIGURATIONS[c].uses_memory]


@pytest.fixture(scope="module")
def recorded(llm, tmp_path_factory) -> dict[str, Any]:
    """One suite: each available configuration × the five tasks, recorded into one log."""
    root = tmp_path_factory.mktemp("lc")
    configs = configs_available()
    specs, rendered, pairs = [], {}, set()
    for variation, config in enumerate(configs):
        for task_id in TASKS:
            one = render_task(task_id, variation)
            rendered[(task_id, variation)] = one
            pairs.add(first_call(one))
            register(llm, one.prompt, plan_for(config, one))
            specs += suite_specs([task_id], [variation], [f"langchain:{config}@{MODEL}"], 1)
    stores = None
    if memory_server_available():
        stores = {
            "nospec": make_store(root / "mem-nospec", "NOSPEC", pairs),
            "spec": make_store(root / "mem-spec", "SPEC", pairs),
        }
    log = root / "runs.duckdb"
    result = anyio.run(
        lambda: record_suite(
            log, specs, RecordConfig(stack=StackConfig(llm_url=llm.base_url, memory_stores=stores), concurrency=4)
        ),
        backend="asyncio",
    )
    return {"log": log, "result": result, "specs": specs, "rendered": rendered, "configs": configs}


def query(log: Path | EventLog, sql: str, params: list[Any] | None = None) -> list[tuple]:
    if isinstance(log, EventLog):
        return log.query(sql, params)[1]
    with EventLog(log, read_only=True) as opened:
        return opened.query(sql, params)[1]


@pytest.fixture(scope="module")
def db(recorded) -> Iterator[EventLog]:
    """The recorded suite's log, opened once for reading."""
    with EventLog(recorded["log"], read_only=True) as opened:
        yield opened


def test_every_run_finishes_with_the_right_answer(recorded, db):
    log = db
    assert len(recorded["specs"]) == 5 * len(recorded["configs"]) >= 10
    runs = query(log, "SELECT run_id, task_id, variation, status, stop_reason, error FROM runs")
    assert len(runs) == len(recorded["specs"])
    suite = load_suite()
    for run_id, task_id, variation, status, stop_reason, error in runs:
        assert (status, stop_reason) == ("finished", "answered"), (run_id, error)
        rendered = recorded["rendered"][(task_id, variation)]
        (answer,) = query(log, "SELECT answer FROM run_summary WHERE run_id = ?", [run_id])[0]
        (state_blob,) = query(
            log, "SELECT payload->>'$.state_blob' FROM events WHERE run_id = ? AND kind = 'StateCaptured'", [run_id]
        )[0]
        (data,) = query(log, "SELECT data FROM blobs WHERE hash = ?", [state_blob])[0]
        state = MemoryState(json.loads(bytes(data)), bundle_resources(rendered.seed_bundle))
        verdict = suite[task_id].validate_strict(rendered, answer, state)
        assert verdict.passed, (run_id, answer, verdict.reasons)


def test_llm_calls_tool_calls_and_fhir_exchanges_are_in_the_log(recorded, db):
    log = db
    rows = query(log, "SELECT run_id, agent, llm_calls, tool_calls, fhir_exchanges, total_tokens FROM run_summary")
    for run_id, agent, llm_calls, tool_calls, fhir_exchanges, total_tokens in rows:
        rendered = next(r for (t, v), r in recorded["rendered"].items() if run_id.startswith(f"{t}.v{v}."))
        config = agent.removeprefix("langchain:").split("@")[0]
        planned = plan_for(config, rendered)["steps"]
        tool_steps = len(planned) - 1
        # one LLM call per tool step and one for the answer; every call is an MCP tools/call
        assert llm_calls == tool_steps + 1, run_id
        assert tool_calls == tool_steps, run_id
        assert fhir_exchanges >= 1 and total_tokens > 0, run_id
        replies = query(
            log, "SELECT payload FROM events WHERE run_id = ? AND kind = 'LlmCalled' ORDER BY seq", [run_id]
        )
        asked = [call["name"] for (payload,) in replies for call in json.loads(payload)["tool_calls"]]
        called = [tool for (tool,) in query(log, "SELECT tool FROM tool_calls WHERE run_id = ? ORDER BY seq", [run_id])]
        assert asked == called == [s["call"] for s in planned[:-1]]
        fhir_actor = query(
            log,
            "SELECT DISTINCT actor FROM fhir_exchanges WHERE run_id = ? AND actor NOT IN ('setup', 'harness')",
            [run_id],
        )
        assert fhir_actor == [("agent",)], run_id
    tokens = query(log, "SELECT sum(total_tokens) FROM llm_calls")[0][0]
    assert tokens == sum(r[5] for r in rows) > 0


def test_each_configuration_offers_exactly_its_tools(recorded, db):
    log = db
    rows = query(
        log,
        "SELECT r.agent, e.payload->'$.tools' FROM runs r JOIN events e ON e.run_id = r.run_id "
        "WHERE e.kind = 'LlmCalled'",
    )
    fhir = {
        "createResource",
        "searchResources",
        "getResourceById",
        "updateResource",
        "deleteResource",
        "listResourceTypes",
    }
    specs = {"listResources", "getStructureDefinition", "getSearchParams", "getDataTypeDefinition"}
    memory = {"search_memory", "search_macro_reflections", "search_micro_tips", "memory_stats"}
    expected = {
        "baseline": fhir,
        "specs": fhir | specs,
        "memory-nospec": fhir | memory,
        "memory-spec": fhir | memory,
        "memory-spec+specs": fhir | specs | memory,
    }
    seen = {}
    for agent, tools in rows:
        seen.setdefault(agent.removeprefix("langchain:").split("@")[0], set()).update(json.loads(tools))
    assert seen == {c: expected[c] for c in recorded["configs"]}
    prompts = query(log, "SELECT agent, agent_config->>'$.system_prompt' FROM runs")
    for agent, prompt in prompts:
        config = agent.removeprefix("langchain:").split("@")[0]
        assert ("getSearchParams" in prompt) == ("specs" in CONFIGURATIONS[config].servers)
        assert ("search_micro_tips" in prompt) == CONFIGURATIONS[config].uses_memory


def test_specs_lookups_go_through_the_proxy_to_the_specs_server(recorded, db):
    rows = query(
        db,
        "SELECT t.run_id, t.tool, e.upstream, t.actor, t.result, t.is_error FROM tool_calls t "
        "JOIN events e USING (run_id, seq) "
        "WHERE t.tool IN ('getStructureDefinition', 'getSearchParams')",
    )
    expected_runs = sum(1 for c in recorded["configs"] if "specs" in CONFIGURATIONS[c].servers) * len(TASKS)
    assert len(rows) == 2 * expected_runs > 0
    for run_id, tool, upstream, actor, result, is_error in rows:
        assert (upstream, actor, is_error) == ("mcp-specs", "agent", False)
        rendered = next(r for (t, v), r in recorded["rendered"].items() if run_id.startswith(f"{t}.v{v}."))
        found = json.loads(result)
        assert found["resourceType"] == first_call(rendered)[0]
        assert found["searchParams" if tool == "getSearchParams" else "elements"]


@needs_memory
def test_memory_lookups_reach_the_store_of_their_configuration(recorded, db):
    rows = query(
        db,
        "SELECT r.agent, e.upstream, t.tool, t.result FROM tool_calls t "
        "JOIN events e USING (run_id, seq) JOIN runs r USING (run_id) "
        "WHERE t.tool IN ('search_macro_reflections', 'search_micro_tips')",
    )
    assert len(rows) == 2 * 3 * len(TASKS)
    for agent, upstream, tool, result in rows:
        store = "nospec" if "memory-nospec" in agent else "spec"
        assert upstream == f"mcp-memory-{store}"
        hits = json.loads(result)["results"]
        assert hits, (agent, tool, result)
        text = json.dumps(hits)
        assert f"{store.upper()} " in text or f"{store.upper()}:" in text
        assert ("NOSPEC" in text) == (store == "nospec")


def _fault_log(tmp_path: Path, llm: LlmServer, models: list[str], **llm_options: Any) -> Path:
    log = tmp_path / "faults.duckdb"
    specs = suite_specs(["builtin-create-patient"], [0], [f"langchain:baseline@{m}" for m in models], 1)
    register(
        llm,
        render_task("builtin-create-patient", 0).prompt,
        plan_to_dict(render_task("builtin-create-patient", 0).gold_plan),
    )
    anyio.run(
        lambda: record_suite(
            log,
            specs,
            RecordConfig(stack=StackConfig(llm_url=llm.base_url), llm=LlmConfig(**llm_options), concurrency=4),
        ),
        backend="asyncio",
    )
    return log


def test_llm_faults_end_the_run_errored_with_every_exchange_recorded(llm, tmp_path):
    # max_retries=1: each retried fault shows as two recorded calls; the timeout is shorter than the delay, and
    # long enough that a 429 and its retry get through a loaded machine (at 1 s, a retry was once cut off on its
    # way to the proxy: one call recorded, correctly, where the test counted two)
    log = _fault_log(
        tmp_path,
        llm,
        ["fault:429", "fault:500", "fault:timeout", "fault:garbage", "fault:429-then-ok"],
        timeout_s=8.0,
        max_retries=1,
    )
    runs = {
        agent.split("@")[1]: (run_id, status, stop, error)
        for run_id, agent, status, stop, error in query(
            log, "SELECT run_id, agent, status, stop_reason, error FROM runs"
        )
    }
    expected_calls = {"fault:429": 2, "fault:500": 2, "fault:timeout": 2, "fault:garbage": 1}
    for model, calls in expected_calls.items():
        run_id, status, stop, error = runs[model]
        assert (status, stop) == ("errored", "errored"), (model, error)
        assert "LLM call 1 failed" in error, error
        final = query(
            log,
            "SELECT kind, payload->>'$.status', payload->>'$.cause' FROM events WHERE run_id = ? "
            "ORDER BY seq DESC LIMIT 1",
            [run_id],
        )
        assert final == [("RunFailed", "errored", "agent")]  # the LLM is the agent's own upstream
        recorded = query(log, "SELECT status, error FROM llm_calls WHERE run_id = ? ORDER BY seq", [run_id])
        exchanges = query(
            log,
            "SELECT count(*) FROM events WHERE run_id = ? AND kind = 'HttpExchanged' AND upstream = 'llm'",
            [run_id],
        )[0][0]
        assert len(recorded) == exchanges == calls, (model, recorded)
        if model in ("fault:429", "fault:500"):
            assert [s for s, _ in recorded] == [int(model[-3:])] * 2
        if model == "fault:garbage":
            assert recorded[0][0] == 200
        # the harness still closed the run properly: state captured, nothing written by the agent
        kinds = [k for (k,) in query(log, "SELECT kind FROM events WHERE run_id = ?", [run_id])]
        assert "StateCaptured" in kinds and "ToolCalled" not in kinds
    run_id, status, stop, error = runs["fault:429-then-ok"]
    assert (status, stop) == ("finished", "answered"), error
    statuses = [s for (s,) in query(log, "SELECT status FROM llm_calls WHERE run_id = ? ORDER BY seq", [run_id])]
    assert statuses == [429, 200, 429, 200]
    # an errored run is labelled errored, never with a mode of the agent's; the run that recovered is judged
    labels = dict(query(log, "SELECT run_id, outcome FROM latest_verdicts WHERE judge = 'failure_mode'"))
    for model, (run_id, status, _, error) in runs.items():
        assert (labels[run_id] == "errored") == (status == "errored"), (model, labels[run_id], error)
    # tokens are one number in every view: a refused call spent none, a call with no answer (a timeout) or with
    # no usage (garbage) makes the run's total unknown
    tokens = {
        run_id: (summary, results)
        for run_id, summary, results in query(
            log,
            "SELECT run_id, s.total_tokens, r.total_tokens FROM run_summary s JOIN run_results r USING (run_id)",
        )
    }
    expected = {"fault:429": 0, "fault:500": 0, "fault:timeout": None, "fault:garbage": None}
    for model, total in expected.items():
        assert tokens[runs[model][0]] == (total, total), (model, tokens[runs[model][0]])
    summary, results = tokens[runs["fault:429-then-ok"][0]]
    assert summary == results and summary > 0, (summary, results)


def test_stop_reasons_hit_cap_gave_up_and_recovery(llm, tmp_path):
    prompts = {v: render_task("builtin-create-patient", v).prompt for v in (20, 21, 22)}
    endless = [{"call": "listResourceTypes", "args": {}}] * 16 + [{"answer": "never reached"}]
    failing = (
        [{"call": "noSuchTool", "args": {}}]
        + [
            {"call": "getResourceById", "args": {"resourceType": "Patient", "resourceId": f"missing-{i}"}}
            for i in range(4)
        ]
        + [{"answer": "never reached"}]
    )
    register(llm, prompts[20], {"name": "endless", "steps": endless})
    register(llm, prompts[21], {"name": "failing", "steps": failing})
    register(llm, prompts[22], plan_to_dict(render_task("builtin-create-patient", 22).gold_plan))
    specs = [
        *suite_specs(["builtin-create-patient"], [20, 21], [f"langchain:baseline@{MODEL}"], 1),
        *suite_specs(["builtin-create-patient"], [22], ["langchain:baseline@scripted:mistake-recover"], 1),
    ]
    log = tmp_path / "stops.duckdb"
    anyio.run(
        lambda: record_suite(log, specs, RecordConfig(stack=StackConfig(llm_url=llm.base_url))), backend="asyncio"
    )
    rows = {
        v: (status, stop, llm_calls, tool_calls, answer)
        for v, status, stop, llm_calls, tool_calls, answer in query(
            log, "SELECT variation, status, stop_reason, llm_calls, tool_calls, answer FROM run_summary"
        )
    }
    assert rows[20] == ("finished", "hit_cap", 15, 15, None)
    # an unknown tool is answered by the agent itself (no MCP call), and counts as a failed call
    assert rows[21] == ("finished", "gave_up", 5, 4, None)
    second = query(
        log,
        "SELECT e.payload->'$.messages' FROM events e JOIN runs r USING (run_id) "
        "WHERE r.variation = 21 AND e.kind = 'LlmCalled' ORDER BY e.seq LIMIT 1 OFFSET 1",
    )
    told = json.loads(second[0][0])[-1]
    assert told["role"] == "tool" and json.loads(told["content"])["error"] == "UNKNOWN_TOOL"
    status, stop, llm_calls, tool_calls, answer = rows[22]
    assert (status, stop, llm_calls, tool_calls) == ("finished", "answered", 3, 2)
    assert answer.startswith("<patient_id>") and answer != "<patient_id></patient_id>"
    errors = query(
        log, "SELECT is_error FROM tool_calls t JOIN runs r USING (run_id) WHERE r.variation = 22 ORDER BY seq"
    )
    assert errors == [(True,), (False,)]


def _agent_requests(log: Path | EventLog, run_id: str | None = None) -> list[dict[str, Any]]:
    """The bodies of the agent's LLM requests as the proxy recorded them."""
    where = " AND run_id = ?" if run_id else ""
    rows = query(
        log,
        "SELECT payload->>'$.request_blob' FROM events WHERE kind = 'HttpExchanged' AND upstream = 'llm'"
        f" AND actor = 'agent'{where} ORDER BY run_id, seq",
        [run_id] if run_id else None,
    )
    opened = log if isinstance(log, EventLog) else EventLog(log, read_only=True)
    try:
        return [json.loads(opened.blob(blob) or b"{}") for (blob,) in rows]
    finally:
        if opened is not log:
            opened.close()


def test_every_llm_request_names_tool_choice_auto_with_its_tools(recorded, db):
    """llama.cpp's server shows the model no tools unless tool_choice is named: every request names it."""
    requests = _agent_requests(db)
    assert len(requests) >= 5 * len(recorded["configs"])
    assert all(r.get("tool_choice") == "auto" and r.get("tools") for r in requests), [
        (r.get("tool_choice"), len(r.get("tools") or [])) for r in requests if r.get("tool_choice") != "auto"
    ]


def test_a_configuration_names_another_tool_choice_or_none(llm, tmp_path):
    rendered = render_task("builtin-create-patient", 30)
    register(llm, rendered.prompt, plan_to_dict(rendered.gold_plan))
    agents = [f"langchain:baseline?tool_choice=none@{MODEL}", f"langchain:baseline?tool_choice=omit@{MODEL}"]
    specs = suite_specs(["builtin-create-patient"], [30], agents, 1)
    log = tmp_path / "choice.duckdb"
    anyio.run(
        lambda: record_suite(log, specs, RecordConfig(stack=StackConfig(llm_url=llm.base_url))), backend="asyncio"
    )
    runs = {
        agent: (run_id, status, answer)
        for run_id, agent, status, answer in query(
            log, "SELECT r.run_id, r.agent, r.status, s.answer FROM runs r JOIN run_summary s USING (run_id)"
        )
    }
    off_id, off_status, off_answer = runs[agents[0]]
    assert off_status == "finished" and off_answer.startswith("Tools are off for this request"), off_answer
    assert [r["tool_choice"] for r in _agent_requests(log, off_id)] == ["none"]
    omitted_id, omitted_status, _ = runs[agents[1]]
    omitted = _agent_requests(log, omitted_id)
    assert omitted_status == "finished" and len(omitted) > 1 and all("tool_choice" not in r for r in omitted)
    assert query(log, "SELECT agent_config->>'$.tool_choice' FROM runs ORDER BY agent") == [("none",), ("omit",)]


def test_agent_spec_options_are_checked(monkeypatch):
    monkeypatch.delenv("FAE_MODEL", raising=False)
    agent = build_agent(f"langchain:specs?tool_choice=required@{MODEL}")
    assert isinstance(agent, LangChainAgent) and agent.config()["tool_choice"] == "required"
    assert agent.configuration.name == "specs" and agent.settings.model == MODEL
    assert build_agent(f"langchain:baseline@{MODEL}").config()["tool_choice"] == "auto"
    for bad, said in (
        ("langchain:baseline?temperature=0@m", "unknown option 'temperature'"),
        ("langchain:baseline?tool_choice=none&tool_choice=auto@m", "repeated option 'tool_choice'"),
        ("langchain:baseline?tool_choice=@m", "tool_choice needs a value"),
        ("langchain:baseline?tool_choice@m", "options are"),
    ):
        with pytest.raises(FaeError, match=said):
            build_agent(bad)


def test_agent_names_models_and_settings(monkeypatch):
    monkeypatch.delenv("FAE_MODEL", raising=False)
    with pytest.raises(FaeError, match="needs a model"):
        build_agent("langchain:baseline")
    with pytest.raises(FaeError, match="unknown LangChain configuration 'nope'"):
        build_agent("langchain:nope@m")
    monkeypatch.setenv("FAE_MODEL", "from-env")
    monkeypatch.setenv("FAE_LLM_TIMEOUT_S", "7.5")
    agent = build_agent("langchain:specs")
    assert isinstance(agent, LangChainAgent)
    assert agent.config()["model"] == "from-env" and agent.config()["timeout_s"] == 7.5
    assert agent.required_mcp == ("specs",)
    assert build_agent("langchain:specs@vendor/model:tag").config()["model"] == "vendor/model:tag"
    assert build_agent("langchain:baseline", model="flag-model").config()["model"] == "flag-model"
    monkeypatch.setenv("FAE_LLM_MAX_RETRIES", "many")
    with pytest.raises(FaeError, match="FAE_LLM_MAX_RETRIES"):
        build_agent("langchain:baseline")


def test_memory_configurations_fail_clearly_without_the_memory_server(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "fae.memory.server", None)  # as if the module were not installed
    for config in ("memory-nospec", "memory-spec", "memory-spec+specs"):
        with pytest.raises(FaeError, match=r"fae\.memory\.server\.memory_mcp_http_app"):
            build_agent(f"langchain:{config}@{MODEL}")
    assert isinstance(build_agent(f"langchain:specs@{MODEL}"), LangChainAgent)


@needs_memory
def test_memory_configurations_need_their_store(tmp_path):
    specs = suite_specs(["builtin-create-patient"], [0], [f"langchain:memory-spec@{MODEL}"], 1)
    with pytest.raises(RecordError, match="memory store.*spec.*--memory spec=DIR"):
        anyio.run(
            lambda: record_suite(
                tmp_path / "x.duckdb", specs, RecordConfig(stack=StackConfig(llm_url="http://127.0.0.1:9/v1"))
            ),
            backend="asyncio",
        )


def test_without_an_llm_endpoint_the_run_is_errored(tmp_path):
    specs = suite_specs(["builtin-create-patient"], [0], [f"langchain:baseline@{MODEL}"], 1)
    log = tmp_path / "nollm.duckdb"
    anyio.run(lambda: record_suite(log, specs), backend="asyncio")
    ((status, error),) = query(log, "SELECT status, error FROM runs")
    assert status == "errored" and "--llm-url" in error


def test_memory_store_options():
    from fae.harness.stack import parse_memory_stores

    assert parse_memory_stores(["nospec=a/b", "spec=c"]) == {"nospec": Path("a/b"), "spec": Path("c")}
    for bad in (["Bad=x"], ["spec=a", "spec=b"], ["spec="], ["only-a-dir"]):
        with pytest.raises(FaeError, match="--memory"):
            parse_memory_stores(bad)


def test_judges_give_verdicts_for_every_configuration(recorded, db):
    rows = query(
        db, "SELECT r.agent, v.judge, v.rule_set->>'$.mode', v.outcome FROM verdicts v JOIN runs r USING (run_id)"
    )
    by_agent: dict[str, dict[tuple[str, str | None], set[str]]] = {}
    for agent, judge, mode, outcome in rows:
        by_agent.setdefault(agent, {}).setdefault((judge, mode), set()).add(outcome)
    assert len(by_agent) == len(recorded["configs"])
    for agent, verdicts in by_agent.items():
        assert verdicts[("task", "strict")] == {"pass"}, agent
        assert verdicts[("task", "light")] == {"pass"}, agent
        assert verdicts[("state_drift", None)] == {"agree"}, agent
        assert ("failure_mode", None) in verdicts, agent
