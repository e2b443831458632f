"""``a2a:URL``: fae sends each run's task to an A2A server built with the official a2a-sdk, through the proxy.

The server's agent (``tests/agents/a2a_server.py``) reads the run's endpoints from the message's data
part and writes the patient through fae's FHIR MCP server with the official MCP SDK client; the run is
recorded (the A2A exchange itself as HTTP exchanges of actor ``agent``), judged, and rejudged from the
log alone. A server whose task fails, is rejected, asks for input, never ends, or that is down ends its
run errored with the cause ``agent`` and a line saying what happened.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import anyio
import pytest

from fae import api
from fae.agents.a2a_agent import TIMEOUT_ENV, upstream_name
from fae.agents.prefixes import check_agent
from fae.errors import PlanError
from fae.harness.config import RecordConfig, StackConfig
from fae.harness.experiment_phases import agent_name
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import render_task
from fae.llm import PlanRegistry, create_app
from fae.llm.suite_plans import SuitePlans
from fae.plan import ToolStep
from fae.store.log import EventLog
from tests.agents.a2a_server import a2a_server
from tests.run_report import live_against_rejudge, why_not_finished

pytestmark = pytest.mark.anyio
TASK = "rec-create-patient"
CAPABILITY = "fae-cap-" + "redacted" * 4


def _gold_write() -> dict:
    step = render_task(TASK, 0).gold_plan.steps[0]
    assert isinstance(step, ToolStep) and step.call == "createResource"
    return dict(step.args)


def _a2a_exchanges(log: EventLog, run_id: str) -> list[tuple]:
    _, rows = log.query(
        "SELECT actor, upstream, payload->>'$.method', payload->>'$.path', payload->>'$.status', "
        "payload->>'$.request_blob', payload->'$.request_headers' FROM events "
        "WHERE run_id = ? AND kind = 'HttpExchanged' AND upstream LIKE 'a2a-%' ORDER BY seq",
        [run_id],
    )
    return rows


def _blob(log: EventLog, digest: str) -> bytes:
    _, rows = log.query("SELECT data FROM blobs WHERE hash = ?", [digest])
    return bytes(rows[0][0])


async def test_an_a2a_agent_is_recorded_judged_and_rejudged(tmp_path):
    log_path = tmp_path / "a2a.duckdb"
    async with a2a_server("fhir", _gold_write()) as (url, heard):
        specs = api.run_specs([TASK], agents=[f"a2a:{url}"])
        result = await record_suite(
            log_path, specs, RecordConfig(stack=StackConfig(processes=1)), llm_app=create_app(PlanRegistry())
        )
    run_id = specs[0].run_id
    assert dict(result.statuses) == {"finished": 1}, why_not_finished(log_path)

    # what the A2A agent was sent: the prompt, and its own run's proxied endpoints in the data part
    assert heard.prompts == [render_task(TASK, 0).prompt]
    (endpoints,) = heard.endpoints
    own = f"/run/{run_id}/agent/"
    assert endpoints["kind"] == "fae.run-endpoints" and endpoints["run_id"] == run_id
    assert own in endpoints["fhir_mcp_url"] and endpoints["fhir_mcp_url"].endswith("/mcp-fhir/mcp")
    assert endpoints["fhir_mcp_sse_url"].endswith("/mcp-fhir/sse")
    assert endpoints["mcp_servers"]["fhir"] == endpoints["fhir_mcp_url"]
    assert own in endpoints["mcp_servers"]["specs"]
    assert own in endpoints["openai_base_url"] and endpoints["openai_base_url"].endswith("/llm/v1")
    assert endpoints["anthropic_base_url"] == endpoints["openai_base_url"].removesuffix("/v1")
    created_id = heard.tool_results[0]["id"]

    with EventLog(log_path, read_only=True) as log:
        _, verdicts = log.query("SELECT judge, outcome FROM verdicts WHERE run_id = ? AND batch = 'live'", [run_id])
        assert {("task", "pass"), ("ensure_record", "created_verified")} <= set(verdicts), verdicts
        _, answer = log.query(
            "SELECT payload->>'$.text' FROM events WHERE run_id = ? AND kind = 'AnswerGiven'", [run_id]
        )
        assert answer == [(f"<PATIENT>{created_id}</PATIENT>",)]
        # the agent's write went through fae's MCP server as the run's agent
        _, calls = log.query(
            "SELECT e.actor, e.upstream, t.tool FROM tool_calls t JOIN events e USING (run_id, seq) WHERE t.run_id = ?",
            [run_id],
        )
        assert calls == [("agent", "mcp-fhir", "createResource")], calls
        # the A2A exchange itself: the card, then one streamed SendStreamingMessage, as the agent, through the proxy
        exchanges = _a2a_exchanges(log, run_id)
        upstream = upstream_name(url.rstrip("/"))
        assert [(a, u, m, p, int(s)) for a, u, m, p, s, _, _ in exchanges] == [
            ("agent", upstream, "GET", "/.well-known/agent-card.json", 200),
            ("agent", upstream, "POST", "/", 200),
        ], exchanges
        headers = {name.lower(): value for name, value in json.loads(exchanges[1][6])}
        assert headers["a2a-version"] == "1.0" and headers["accept"] == "text/event-stream", headers
        sent = json.loads(_blob(log, exchanges[1][5]))
        stored = log_path.read_bytes()
    assert sent["jsonrpc"] == "2.0" and sent["method"] == "SendStreamingMessage", sent
    parts = sent["params"]["message"]["parts"]
    assert sent["params"]["message"]["role"] == "ROLE_USER"
    assert parts[0]["text"] == render_task(TASK, 0).prompt
    # the log keeps the endpoints the agent was given, with their capabilities scrubbed
    assert parts[1]["data"]["fhir_mcp_url"] == endpoints["fhir_mcp_url"].replace(
        endpoints["fhir_mcp_url"].split("/")[6], CAPABILITY
    )
    assert b"fae-cap-" not in stored.replace(CAPABILITY.encode(), b"")

    live, rejudged = live_against_rejudge(log_path)
    assert rejudged == live and live, (live, rejudged)


async def test_an_a2a_agent_driven_by_its_model_is_recorded_with_its_llm_calls(tmp_path):
    log_path = tmp_path / "a2a-claude.duckdb"
    # fae's scripted model plays the suite task's gold plan it finds from the prompt
    llm = create_app(PlanRegistry(fallback=SuitePlans().find))
    async with a2a_server("claude") as (url, heard):
        specs = api.run_specs([TASK], agents=[f"a2a:{url}"])
        result = await record_suite(log_path, specs, RecordConfig(stack=StackConfig(processes=1)), llm_app=llm)
        assert dict(result.statuses) == {"finished": 1}, why_not_finished(log_path)
        run_id = specs[0].run_id
        # replayed: the same A2A server is sent the task again, its model answered from the recording
        out = tmp_path / "replay.duckdb"
        # ... only when the user names it again: a log's own URL is never contacted because the log says so
        with pytest.raises(PlanError, match="--trust-log-agent"):
            await anyio.to_thread.run_sync(lambda: api.replay(log_path, run_id, out=out))
        assert len(heard.prompts) == 1, heard.prompts
        report = await anyio.to_thread.run_sync(lambda: api.replay(log_path, run_id, out=out, agent=f"a2a:{url}"))
    assert not report.divergences, [d.describe() for d in report.divergences]
    assert (report.llm_calls, report.llm_played) == (2, 2) and len(heard.prompts) == 2, report
    [replayed] = api.query(out, "SELECT agent_config, status FROM runs")
    assert json.loads(replayed["agent_config"])["kind"] == "a2a" and replayed["status"] == "finished", replayed
    with EventLog(log_path, read_only=True) as log:
        _, verdicts = log.query("SELECT judge, outcome FROM verdicts WHERE run_id = ? AND batch = 'live'", [run_id])
        _, calls = log.query(
            "SELECT actor, api, finish_reason, tokens_known, total_tokens > 0 FROM llm_calls WHERE run_id = ? "
            "ORDER BY seq",
            [run_id],
        )
        _, tools = log.query("SELECT tool FROM tool_calls WHERE run_id = ? ORDER BY seq", [run_id])
    assert {("task", "pass"), ("ensure_record", "created_verified")} <= set(verdicts), verdicts
    # the model's two turns (a tool call, then the answer) are the agent's LLM calls, through the proxy
    assert calls == [("agent", "messages", "tool_use", True, True), ("agent", "messages", "end_turn", True, True)], (
        calls
    )
    assert ("createResource",) in tools, tools


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _runs(log_path: Path) -> dict[str, tuple]:
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query("SELECT agent, status, cause, error FROM runs")
    return {agent: (status, cause, error) for agent, status, cause, error in rows}


async def test_a2a_tasks_that_do_not_complete_end_their_runs_errored_with_the_reason(tmp_path):
    log_path = tmp_path / "a2a-fail.duckdb"
    down = f"a2a:http://127.0.0.1:{_free_port()}"
    async with (
        a2a_server("fail") as (failing, _),
        a2a_server("reject", streaming=False) as (rejecting, _),
        a2a_server("input") as (asking, _),
    ):
        agents = {f"a2a:{failing}": "failed", f"a2a:{rejecting}": "rejected", f"a2a:{asking}": "input", down: "down"}
        specs = api.run_specs([TASK], agents=list(agents))
        await record_suite(log_path, specs, RecordConfig(stack=StackConfig(processes=1)))
    runs = {agents[agent]: run for agent, run in _runs(log_path).items()}
    assert {name: run[:2] for name, run in runs.items()} == dict.fromkeys(agents.values(), ("errored", "agent")), runs
    assert runs["failed"][2].endswith("the A2A task ended failed: the FHIR server is out of my reach"), runs
    assert runs["rejected"][2].endswith("the A2A task ended rejected: I do not register patients"), runs
    assert runs["input"][2].endswith("ended input-required: Which clinic should the patient be registered at?"), runs
    assert (
        runs["down"][2] == f"{down}: the A2A agent at {down[4:]} did not answer (HTTP 502 through the recording proxy)"
    )
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query(
            "SELECT r.agent, count(*) FROM events e JOIN runs r USING (run_id) "
            "WHERE e.kind = 'HttpExchanged' AND e.upstream LIKE 'a2a-%' AND e.actor = 'agent' GROUP BY 1"
        )
    # every run's A2A exchange is in its log: card and message; the down server's refused connection too
    assert sorted(n for _, n in rows) == [1, 2, 2, 2], rows


async def test_an_a2a_task_that_never_ends_is_cancelled_at_the_timeout(tmp_path, monkeypatch):
    # the task's first events come over loopback in milliseconds: 5 s leaves a loaded machine room to send them
    monkeypatch.setenv(TIMEOUT_ENV, "5")
    log_path = tmp_path / "a2a-hang.duckdb"
    async with a2a_server("hang") as (url, heard):
        specs = api.run_specs([TASK], agents=[f"a2a:{url}"])
        await record_suite(log_path, specs, RecordConfig(stack=StackConfig(processes=1)))
    ((status, cause, error),) = _runs(log_path).values()
    assert (status, cause) == ("errored", "agent"), error
    assert error.endswith("the A2A task did not finish within 5 s (its last state: working)"), error
    assert len(heard.cancelled) == 1  # fae asked the server to stop the task it gave up on
    with EventLog(log_path, read_only=True) as log:
        exchanges = _a2a_exchanges(log, specs[0].run_id)
        cancel = json.loads(_blob(log, exchanges[-1][5]))
    assert [e[2:4] for e in exchanges] == [("GET", "/.well-known/agent-card.json"), ("POST", "/"), ("POST", "/")]
    assert cancel["method"] == "CancelTask" and cancel["params"]["id"] == heard.cancelled[0], cancel


@pytest.mark.parametrize("spec", ["a2a:", "a2a:ftp://x", "a2a:http://", "a2a:http://h:port", "a2a:http://h/?q=1"])
def test_a_bad_a2a_url_is_one_line_before_anything_records(spec):
    with pytest.raises(PlanError, match="a2a:") as caught:
        check_agent(spec)
    assert "\n" not in str(caught.value)


async def test_a_task_still_working_when_answered_is_polled_to_its_end(tmp_path):
    log_path = tmp_path / "a2a-later.duckdb"
    async with a2a_server("later", streaming=False) as (url, _):
        specs = api.run_specs([TASK], agents=[f"a2a:{url}"])
        await record_suite(log_path, specs, RecordConfig(stack=StackConfig(processes=1)))
    ((status, cause, error),) = _runs(log_path).values()
    assert status == "finished", error
    with EventLog(log_path, read_only=True) as log:
        methods = [json.loads(_blob(log, e[5]))["method"] for e in _a2a_exchanges(log, specs[0].run_id)[1:]]
        _, answer = log.query("SELECT payload->>'$.text' FROM events WHERE kind = 'AnswerGiven'")
    assert methods == ["SendMessage", "GetTask"], methods
    assert answer == [("done after the answer",)]


def test_a_bad_a2a_timeout_is_one_line_before_anything_records(monkeypatch):
    monkeypatch.setenv(TIMEOUT_ENV, "abc")
    with pytest.raises(PlanError, match=r"^FAE_A2A_TIMEOUT_S must be a positive number of seconds \(got 'abc'\)$"):
        check_agent("a2a:http://127.0.0.1:9999")


def test_an_experiment_configuration_names_an_a2a_agent_as_it_is():
    assert agent_name("a2a:http://127.0.0.1:9999", "some-model") == "a2a:http://127.0.0.1:9999"
    check_agent("a2a:http://127.0.0.1:9999/agents/fhir")


async def test_an_a2a_server_that_requires_a_bearer_token_gets_it_and_the_log_never_keeps_it(tmp_path, monkeypatch):
    token = "a2a-token-" + "s3cr3t" * 4
    async with a2a_server("fhir", _gold_write(), token=token) as (url, heard):
        specs = api.run_specs([TASK], agents=[f"a2a:{url}"])
        without = tmp_path / "without.duckdb"
        monkeypatch.delenv("FAE_A2A_TOKEN", raising=False)
        await record_suite(without, specs, RecordConfig(stack=StackConfig(processes=1)))
        monkeypatch.setenv("FAE_A2A_TOKEN", token)
        with_token = tmp_path / "with.duckdb"
        await record_suite(with_token, specs, RecordConfig(stack=StackConfig(processes=1)))
    refused = _runs(without)
    assert [(status, cause) for status, cause, _ in refused.values()] == [("errored", "agent")], refused
    assert "401" in next(iter(refused.values()))[2], refused
    assert [status for status, _, _ in _runs(with_token).values()] == ["finished"], why_not_finished(with_token)
    assert len(heard.prompts) == 1  # the server heard only the run that carried its token
    with EventLog(with_token, read_only=True) as log:
        sent = [json.loads(h) for *_, h in _a2a_exchanges(log, specs[0].run_id)]
    authorization = [value for headers in sent for name, value in headers if name.lower() == "authorization"]
    assert authorization and all(token not in value for value in authorization), authorization
    for path in (without, with_token):
        assert token.encode() not in path.read_bytes()
