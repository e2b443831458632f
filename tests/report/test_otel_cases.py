"""`fae export --otel` on runs recorded through the real stack that the demo lacks: a streamed LLM call, an LLM
call refused with 429 (its run errored), and a run whose agent-controlled strings are hostile."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace as replaced
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import msgspec
import pytest
from typer.testing import CliRunner

from fae.agents.base import AgentContext, AgentError, AgentResult
from fae.agents.scripted_agent import ScriptedAgent
from fae.cli import app
from fae.harness.config import StackConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.harness.worklist import render_task
from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.plan import plan_from_dict
from fae.replay.source import load_run
from fae.report.otel import export_otel
from fae.report.otel_spans import span_id, trace_id
from fae.report.otlp import SpanData, request_json, request_proto, text
from fae.store.live import LogReader
from fae.util.tls import client_tls
from tests.report.otlp_decode import attributes, from_json_lines, from_protobuf, spans_of, traces
from tests.run_report import why_not_finished

TASK = "rec-create-patient"
HOSTILE = "\x1b]0;pwn\x07\x1b[2J\u202e[/bogus]<script>\"'\\{}\u2028 \u2620"
ANSWER = "<PATIENT>streamed</PATIENT>"
runner = CliRunner()


class LlmAgent:
    """Calls the run's proxied LLM once with plain httpx: streamed, or with a model the server refuses (429); or,
    with ``anthropic``, twice through the Anthropic Messages API with a cached system prompt."""

    def __init__(self, name: str, model: str, stream: bool, anthropic: bool = False):
        self.name, self.model, self.stream, self.anthropic = name, model, stream, anthropic

    def config(self) -> dict[str, Any]:
        return {"kind": "test", "model": self.model}

    async def run(self, ctx: AgentContext) -> AgentResult:
        if self.anthropic:
            return await self._messages(ctx)
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": ctx.prompt}],
            "stream": self.stream,
            "stream_options": {"include_usage": True},
        }
        async with httpx.AsyncClient(timeout=30, verify=client_tls()) as client:
            reply = await client.post(f"{ctx.llm_base_url}/chat/completions", json=body)
        if reply.status_code >= 400:
            raise AgentError(f"LLM call 1 failed: HTTP {reply.status_code}")
        text_parts = []
        for line in reply.text.splitlines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices") or []:
                    text_parts.append((choice.get("delta") or {}).get("content") or "")
        return AgentResult(answer="".join(text_parts))

    async def _messages(self, ctx: AgentContext) -> AgentResult:
        system = [{"type": "text", "text": "You answer in tags. " * 50, "cache_control": {"type": "ephemeral"}}]
        body = {
            "model": self.model,
            "max_tokens": 200,
            "system": system,
            "messages": [{"role": "user", "content": ctx.prompt}],
        }
        async with httpx.AsyncClient(timeout=30, verify=client_tls()) as client:
            for _ in range(2):  # the second call reads the prompt the first wrote to the cache
                reply = await client.post(f"{ctx.llm_base_url}/messages", json=body)
                reply.raise_for_status()
        return AgentResult(answer="".join(block.get("text", "") for block in reply.json()["content"]))


@pytest.fixture(scope="module")
def edge_log(tmp_path_factory) -> Path:
    log = tmp_path_factory.mktemp("otel-cases") / "cases.duckdb"
    rendered = render_task(TASK, 0)
    registry = PlanRegistry()
    registry.add(entry_from_dict({"match": rendered.prompt, "plan": {"steps": [{"answer": ANSWER}]}}))
    hostile_plan = plan_from_dict(
        {
            "steps": [
                {"call": "searchResources", "args": {"resourceType": "Patient", "params_json": {"name": HOSTILE}}},
                {"answer": HOSTILE},
            ]
        }
    )
    agents = {
        "streamed": LlmAgent("llm:streamed", "scripted:gold", stream=True),
        "limited": LlmAgent("llm:limited", "fault:429", stream=False),
        "anthropic": LlmAgent("llm:anthropic", "scripted:gold", stream=False, anthropic=True),
        "hostile": ScriptedAgent(name=f"scripted:{HOSTILE}", plan=hostile_plan),
    }

    async def record(llm_url: str) -> dict[str, str]:
        statuses = {}
        async with open_stack(log, StackConfig(llm_url=llm_url)) as stack:
            for key, agent in agents.items():
                spec = RunSpec(f"{TASK}.v0.{key}", TASK, 0, agent.name, 0, suite=HOSTILE if key == "hostile" else None)
                statuses[key] = await execute_run(stack, spec, rendered, agent)
        return statuses

    with LlmServer(create_app(registry)) as llm:
        statuses = anyio.run(record, llm.base_url)
    assert statuses == {"streamed": "finished", "limited": "errored", "anthropic": "finished", "hostile": "finished"}, (
        why_not_finished(log)
    )
    return log


@pytest.fixture(scope="module")
def exported(edge_log, tmp_path_factory) -> dict[str, Any]:
    target = tmp_path_factory.mktemp("otel-cases-out") / "cases.jsonl"
    done = runner.invoke(app, ["export", "--log", str(edge_log), "--otel", str(target), "--otel-content"])
    assert done.exit_code == 0, done.output
    return {"output": done.output, "bytes": target.read_bytes(), "traces": traces(from_json_lines(target.read_bytes()))}


def test_a_streamed_call_is_a_streaming_chat_span_with_its_assembled_reply(exported):
    trace = exported["traces"][f"{TASK}.v0.streamed"]
    (chat,) = trace.named("chat ")
    found = attributes(chat.attributes)
    assert found["gen_ai.request.stream"] is True and found["fae.llm.chunk_count"] >= 1, found
    assert found["gen_ai.request.model"] == "scripted:gold" and chat.kind == 3
    (reply,) = json.loads(found["gen_ai.output.messages"])
    assert reply["parts"] == [{"type": "text", "content": ANSWER}] and reply["finish_reason"] == "stop"
    assert trace.root.status.code == 0 and trace.root_attributes["fae.run.status"] == "finished"


def test_anthropic_messages_calls_name_their_provider_and_cache_tokens(exported):
    trace = exported["traces"][f"{TASK}.v0.anthropic"]
    first, second = sorted(trace.named("chat "), key=lambda s: s.start_time_unix_nano)
    written, read = attributes(first.attributes), attributes(second.attributes)
    assert written["gen_ai.provider.name"] == "anthropic" and written["fae.llm.api"] == "messages", written
    assert written["gen_ai.usage.cache_creation.input_tokens"] > 0 and "gen_ai.usage.cache_read.input_tokens" not in (
        {k for k, v in written.items() if v}
    )
    assert read["gen_ai.usage.cache_read.input_tokens"] == written["gen_ai.usage.cache_creation.input_tokens"]
    sent = json.loads(read["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user"] and sent[0]["parts"][0]["type"] == "text", sent
    (reply,) = json.loads(read["gen_ai.output.messages"])
    assert reply["finish_reason"] == "stop" and reply["parts"] == [{"type": "text", "content": ANSWER}], reply


def test_a_refused_call_and_its_errored_run_are_errors(exported):
    trace = exported["traces"][f"{TASK}.v0.limited"]
    (chat,) = trace.named("chat ")
    found = attributes(chat.attributes)
    assert found["error.type"] == "429" and chat.status.code == 2 and "429" in chat.status.message, found
    assert "gen_ai.response.model" not in found and "gen_ai.output.messages" not in found
    assert found["gen_ai.request.model"] == "fault:429"
    root = trace.root_attributes
    assert trace.root.status.code == 2 and "LLM call 1 failed: HTTP 429" in trace.root.status.message
    assert root["error.type"] == "errored" and root["fae.run.cause"] == "agent", root


def test_hostile_strings_arrive_byte_for_byte_and_are_shown_escaped(edge_log, exported, tmp_path):
    trace = exported["traces"][f"{TASK}.v0.hostile"]
    assert trace.root.name == f"invoke_agent scripted:{HOSTILE}"
    root = trace.root_attributes
    assert root["gen_ai.agent.name"] == f"scripted:{HOSTILE}" and root["fae.run.suite"] == HOSTILE
    (answer,) = json.loads(root["gen_ai.output.messages"])
    assert answer["parts"][0]["content"] == HOSTILE
    (tool,) = trace.named("execute_tool ")
    assert json.loads(attributes(tool.attributes)["gen_ai.tool.call.arguments"])["params_json"]["name"] == HOSTILE
    (search,) = [s for s in trace.spans if attributes(s.attributes).get("fae.fhir.interaction") == "search-type"]
    assert search.parent_span_id == tool.span_id
    assert "\x1b" not in exported["output"] and "\u202e" not in exported["output"]
    plain = tmp_path / "plain.jsonl"
    assert export_otel(edge_log, plain).runs == 4
    (again,) = [t for t in traces(from_json_lines(plain.read_bytes())).values() if t.root.span_id == trace.root.span_id]
    assert again.root.name == trace.root.name and HOSTILE not in json.dumps(
        again.root_attributes.get("gen_ai.output.messages")
    )


def test_the_protobuf_and_json_encodings_carry_the_same_values():
    """Edge values of the encoder itself: a lone surrogate, negative and 64-bit integers, non-finite doubles."""
    span = SpanData(
        b"\x01" * 16,
        b"\x02" * 8,
        b"",
        "x\ud800y",
        1,
        2**63 - 1,
        2**63 - 1,
        [("a", -5), ("b", 2**63 - 1), ("c", float("inf")), ("d", ["p", "\ud800"]), ("e", False), ("f", 0.25)],
    )
    resource = [("service.name", "fae")]
    (from_json,) = from_json_lines(request_json(resource, ("fae", "1"), "u", [span]))
    from_proto = from_protobuf(request_proto(resource, ("fae", "1"), "u", [span]))
    assert from_json == from_proto
    (decoded,) = spans_of([from_proto])
    assert decoded.name == "x\ufffdy" == text("x\ud800y")
    assert attributes(decoded.attributes) == {
        "a": -5,
        "b": 2**63 - 1,
        "c": float("inf"),
        "d": ["p", "\ufffd"],
        "e": False,
        "f": 0.25,
    }


def test_the_same_run_id_recorded_again_is_another_trace(edge_log):
    """Run ids repeat when a plan is recorded twice (in two logs): the trace id also hashes the run's first time."""
    with LogReader(edge_log) as reader:
        run = load_run(reader, f"{TASK}.v0.streamed")
    later = replaced(run, events=[msgspec.structs.replace(r, wall_us=r.wall_us + 1) for r in run.events])
    assert trace_id(run) != trace_id(later) and trace_id(run) == trace_id(replaced(run, events=list(run.events)))
    assert span_id(trace_id(run), 3) != span_id(trace_id(run), 4) != span_id(trace_id(run), None)


class HeldAgent:
    """Answers once the test lets it: its run stays open (status running) while the test reads the log."""

    name = "test:held"

    def __init__(self, release: threading.Event):
        self.release = release

    def config(self) -> dict[str, Any]:
        return {"kind": "test"}

    async def run(self, ctx: AgentContext) -> AgentResult:
        with anyio.fail_after(120):
            while not self.release.is_set():
                await anyio.sleep(0.05)
        return AgentResult(answer="done")


def test_a_log_being_recorded_exports_its_finished_runs_through_the_live_endpoint(tmp_path):
    """While a recording holds the log, the export reads it through the recording's live endpoint (the file is
    locked): the run finished so far is exported, the one still recording is left out and counted."""
    log, target = tmp_path / "rec.duckdb", tmp_path / "live.jsonl"
    task = "builtin-create-patient"
    rendered = render_task(task, 0)
    release = threading.Event()
    seen: dict[str, Any] = {}

    def export_while_recording() -> None:
        with LogReader(log) as reader:
            seen["live"] = reader.live
            deadline = time.monotonic() + 120  # the held run's row, written as it starts
            while not reader.query("SELECT run_id FROM runs WHERE status = 'running'")[1]:
                assert time.monotonic() < deadline, "the held run never started"
                time.sleep(0.05)
        seen["done"] = export_otel(log, target)

    async def main() -> dict[str, str]:
        statuses = {}
        async with open_stack(log) as stack:
            gold = ScriptedAgent(name="scripted:gold", plan=None)
            statuses["gold"] = await execute_run(
                stack, RunSpec(f"{task}.v0.gold", task, 0, gold.name, 0), rendered, gold
            )

            async def held() -> None:
                spec = RunSpec(f"{task}.v0.held", task, 0, HeldAgent.name, 0)
                statuses["held"] = await execute_run(stack, spec, rendered, HeldAgent(release))

            async with anyio.create_task_group() as group:
                group.start_soon(held)
                try:
                    await anyio.to_thread.run_sync(export_while_recording)
                finally:
                    release.set()
        return statuses

    statuses = anyio.run(main)
    assert statuses == {"gold": "finished", "held": "finished"}, why_not_finished(log)
    done = seen["done"]
    assert seen["live"] is True and (done.runs, done.still_running) == (1, 1), (seen, done)
    exported = traces(from_json_lines(target.read_bytes()))
    assert list(exported) == [f"{task}.v0.gold"]
    again = tmp_path / "after.jsonl"
    export_otel(log, again)  # the file read directly, once the recording closed it: the same trace, and the other
    later = traces(from_json_lines(again.read_bytes()))
    assert sorted(later) == [f"{task}.v0.gold", f"{task}.v0.held"]
    assert later[f"{task}.v0.gold"].root.span_id == exported[f"{task}.v0.gold"].root.span_id
    assert from_json_lines(again.read_bytes()) != from_json_lines(target.read_bytes())
