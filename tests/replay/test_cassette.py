"""fae replay of LLM-agent runs: the model answered by the log's cassette, with the LLM server stopped.

Real parts only: a LangChain-agent run and a streamed probe run are recorded
through the proxy against the local scripted LLM server on 127.0.0.1; the
server is then stopped, and every replay below re-drives the run through a
fresh recording stack whose LLM upstream is the cassette.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from fae.agents.base import AgentContext, AgentResult
from fae.cli import app
from fae.harness.config import RecordConfig, StackConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import render_task, suite_specs
from fae.llm import LlmServer, create_app
from fae.plan import plan_to_dict
from fae.replay.cassette import Cassette, recorded_calls, request_key
from fae.replay.source import load_run
from fae.store.log import EventLog
from fae.util.serve import serve_asgi
from tests.run_report import why_not_finished

runner = CliRunner()
TASK = "sched-book-appointment"
AGENT = "langchain:baseline@scripted:gold"
RUN = suite_specs([TASK], [0], [AGENT], 1)[0].run_id
PROBE = f"{TASK}.v0.stream-probe"


class StreamingProbe:
    """Asks the model once with ``stream: true`` and keeps the raw stream as its answer's length."""

    name = "probe:stream"

    def config(self) -> dict[str, Any]:
        return {"kind": "probe"}

    async def run(self, ctx: AgentContext) -> AgentResult:
        request = {"model": "scripted:gold", "stream": True, "messages": [{"role": "user", "content": ctx.prompt}]}
        async with httpx.AsyncClient(timeout=30) as client:
            reply = await client.post(f"{ctx.llm_base_url}/chat/completions", json=request)
        return AgentResult(answer=str(len(reply.content)))


async def _record_probe(log: Path, rendered: Any, llm_url: str) -> str:
    async with open_stack(log, StackConfig(llm_url=llm_url)) as stack:
        spec = RunSpec(run_id=PROBE, task_id=TASK, variation=0, agent=StreamingProbe.name, repeat=0)
        return await execute_run(stack, spec, rendered, StreamingProbe())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Any]:
    """The LangChain run and the streamed probe, recorded; the LLM server is stopped on return."""
    log = tmp_path_factory.mktemp("cassette") / "runs.duckdb"
    rendered = render_task(TASK, 0)
    with LlmServer(create_app()) as llm:
        httpx.post(
            f"{llm.root_url}/_fae/plans",
            json={"match": rendered.prompt, "plan": plan_to_dict(rendered.gold_plan)},
            timeout=10,
        ).raise_for_status()
        specs = suite_specs([TASK], [0], [AGENT], 1)
        result = anyio.run(
            lambda: record_suite(log, specs, RecordConfig(stack=StackConfig(llm_url=llm.base_url))), backend="asyncio"
        )
        assert dict(result.statuses) == {"finished": 1}, why_not_finished(log)
        assert anyio.run(lambda: _record_probe(log, rendered, llm.base_url), backend="asyncio") == "finished"
        root = llm.root_url
    with pytest.raises(httpx.ConnectError):  # nothing answers the model's URL any more
        httpx.get(f"{root}/v1/models", timeout=2)
    return {"log": log}


def _rows(log: Path, sql: str, params: list[Any]) -> list[tuple]:
    with EventLog(log, read_only=True) as opened:
        return opened.query(sql, params)[1]


def _tool_calls(log: Path, run_id: str) -> list[tuple[str, Any]]:
    return [
        (tool, json.loads(arguments))
        for tool, arguments in _rows(
            log, "SELECT tool, arguments FROM tool_calls WHERE run_id = ? ORDER BY seq", [run_id]
        )
    ]


def _tamper_seed(log: Path, old: str, new: str) -> None:
    """Edit the recorded seed of the run in a copy of the log, so the agent's searches find other things."""
    with EventLog(log) as opened:
        (digest,) = opened.query(
            "SELECT payload->>'$.seed_blob' FROM events WHERE run_id = ? AND kind = 'SandboxSeeded'", [RUN]
        )[1][0]
        (data,) = opened.query("SELECT data FROM blobs WHERE hash = ?", [digest])[1][0]
        assert old.encode() in bytes(data)
        opened.query(
            "UPDATE blobs SET data = ? WHERE hash = ?", [bytes(data).replace(old.encode(), new.encode()), digest]
        )


def test_replay_with_the_llm_server_stopped_reproduces_the_tool_calls(recorded, tmp_path):
    out = tmp_path / "replayed.duckdb"
    done = runner.invoke(app, ["replay", RUN, "--log", str(recorded["log"]), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert "replayed identically" in done.output and "5/5 LLM calls" in done.output
    replay_id = f"{RUN}.replay1"
    original = _tool_calls(recorded["log"], RUN)
    assert len(original) == 4 and _tool_calls(out, replay_id) == original
    answer = "SELECT answer FROM run_summary WHERE run_id = ?"
    assert _rows(out, answer, [replay_id]) == _rows(recorded["log"], answer, [RUN])
    ((status, config),) = _rows(out, "SELECT status, agent_config FROM runs WHERE run_id = ?", [replay_id])
    config = json.loads(config)
    assert status == "finished", why_not_finished(out)
    assert config["replay_of"]["run_id"] == RUN and config["replay_of"]["policy"] == "stop"
    started = _rows(
        out,
        "SELECT payload->'$.agent_config.replay_of.run_id' FROM events WHERE run_id = ? AND kind = 'RunStarted'",
        [replay_id],
    )
    assert json.loads(started[0][0]) == RUN
    # the replay went through the recording proxy: its own LLM calls, FHIR exchanges and verdicts are logged
    counts = _rows(out, "SELECT llm_calls, tool_calls, fhir_exchanges FROM run_summary WHERE run_id = ?", [replay_id])
    assert counts[0][0] == 5 and counts[0][1] == 4 and counts[0][2] >= 4
    assert _rows(out, "SELECT count(*) FROM verdicts WHERE run_id = ?", [replay_id])[0][0] > 0
    again = runner.invoke(app, ["replay", RUN, "--log", str(recorded["log"]), "--out", str(out)])
    assert again.exit_code == 0 and f"{RUN}.replay2" in again.output


def test_strict_replay_stops_at_the_first_divergence(recorded, tmp_path):
    log = tmp_path / "tampered.duckdb"
    shutil.copy(recorded["log"], log)
    _tamper_seed(log, "Varga", "Vargo")  # the practitioner search now finds nobody
    done = runner.invoke(app, ["replay", RUN, "--log", str(log)])
    assert done.exit_code == 1
    text = " ".join(done.output.split())
    assert "LLM call 2 (event" in text and "the request at messages[3].content" in text, text
    out = log.with_name("tampered.replay.duckdb")
    ((status, llm_calls, tool_calls),) = _rows(out, "SELECT status, llm_calls, tool_calls FROM run_summary", [])
    # the cassette refused the diverged call, so the agent stopped after its first tool call
    assert (status, llm_calls, tool_calls) == ("errored", 2, 1)


def test_lenient_replay_warns_and_goes_on(recorded, tmp_path):
    log = tmp_path / "tampered.duckdb"
    shutil.copy(recorded["log"], log)
    _tamper_seed(log, "Varga", "Vargo")
    out = tmp_path / "lenient.duckdb"
    done = runner.invoke(app, ["replay", RUN, "--log", str(log), "--lenient", "--out", str(out)])
    assert done.exit_code == 1
    text = " ".join(done.output.split())
    assert text.count("warning: LLM call") == 4 and "warning: LLM call 2 (event" in text, text
    ((status, llm_calls, tool_calls),) = _rows(out, "SELECT status, llm_calls, tool_calls FROM run_summary", [])
    # each unmatched request got the next recorded answer, so the agent played every recorded call
    assert (status, llm_calls, tool_calls) == ("finished", 5, 4), why_not_finished(out)


def test_a_streamed_recording_is_replayed_as_a_stream(recorded):
    with EventLog(recorded["log"], read_only=True) as log:
        run = load_run(log, PROBE)
        (call,) = recorded_calls(run)
        request = run.body(next(r.event.request_blob for r in run.events if r.seq == call.seq))
    assert call.streamed and len(call.chunks) > 1

    async def play() -> tuple[str, list[bytes]]:
        async with serve_asgi(Cassette([call]).app()) as port:
            async with (
                httpx.AsyncClient() as client,
                client.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", content=request) as reply,
            ):
                return reply.headers["content-type"], [part async for part in reply.aiter_raw()]

    content_type, parts = anyio.run(play, backend="asyncio")
    assert content_type.startswith("text/event-stream")
    assert b"".join(parts) == b"".join(call.chunks) and b"data: [DONE]" in b"".join(parts)


def test_the_request_key_normalises_only_volatile_parts():
    def request(call_id: str, stamp: str, port: int, family: str) -> bytes:
        result = {
            "resourceType": "Bundle",
            "link": [{"url": f"http://127.0.0.1:{port}/sandbox/sb-{port}/fhir/X"}],
            "entry": [
                {
                    "resource": {
                        "id": "p1",
                        "name": [{"family": family}],
                        "meta": {"versionId": "1", "lastUpdated": stamp},
                    }
                }
            ],
        }
        call = {"id": call_id, "type": "function", "function": {"name": "searchResources", "arguments": '{"a": 1}'}}
        return json.dumps(
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": "find"},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
                ],
            }
        ).encode()

    base = request_key("POST", "/v1/chat/completions", request("call_a", "2025-01-01T00:00:00Z", 1, "Varga"))
    assert base == request_key("POST", "/v1/chat/completions", request("call_b", "2026-02-02T00:00:00Z", 2, "Varga"))
    assert base != request_key("POST", "/v1/chat/completions", request("call_a", "2025-01-01T00:00:00Z", 1, "Vargo"))
    assert base != request_key("POST", "/v1/responses", request("call_a", "2025-01-01T00:00:00Z", 1, "Varga"))


def test_the_request_key_normalises_anthropic_tool_use_ids_and_tool_result_times_only():
    def request(tool_use_id: str, stamp: str, family: str) -> bytes:
        result = {"resourceType": "Patient", "id": "p1", "name": [{"family": family}], "meta": {"lastUpdated": stamp}}
        return json.dumps(
            {
                "model": "m",
                "max_tokens": 100,
                "messages": [
                    {"role": "user", "content": "find"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": tool_use_id, "name": "s", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": json.dumps(result)}],
                    },
                ],
            }
        ).encode()

    base = request_key("POST", "/v1/messages", request("toolu_a", "2025-01-01T00:00:00Z", "Varga"))
    assert base == request_key("POST", "/v1/messages", request("toolu_b", "2026-02-02T00:00:00Z", "Varga"))
    assert base != request_key("POST", "/v1/messages", request("toolu_a", "2025-01-01T00:00:00Z", "Vargo"))
    assert base != request_key("POST", "/v1/chat/completions", request("toolu_a", "2025-01-01T00:00:00Z", "Varga"))


def test_a_log_from_before_capabilities_and_one_after_replay_alike():
    """A recording's links have one of three shapes: no capability (logs from before them), the capability's
    placeholder (what a log stores now), a live capability (what a replay's agent sends): one request key."""

    def request(link: str) -> bytes:
        result = {"resourceType": "Bundle", "link": [{"relation": "self", "url": link}], "entry": []}
        return json.dumps(
            {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": json.dumps(result)}]}
        ).encode()

    tail = "fhir/sandbox/sb-1/fhir/Patient?name=x"
    shapes = [
        f"http://127.0.0.1:1/run/r.v0/agent/{tail}",
        f"http://127.0.0.1:2/run/r.v0/agent/fae-cap-{'redacted' * 4}/{tail}",
        f"http://127.0.0.1:3/run/r.v0.replay1/agent/fae-cap-{'0a' * 16}/{tail}",
    ]
    keys = {request_key("POST", "/v1/chat/completions", request(link)) for link in shapes}
    assert len(keys) == 1
    other = request_key("POST", "/v1/chat/completions", request(shapes[0].replace("name=x", "name=y")))
    assert other not in keys
