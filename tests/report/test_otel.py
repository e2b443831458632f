"""`fae export --otel` on the demo log: OTLP traces the official protobuf definitions decode, named by the
semantic conventions, the same twice, contents only on request, and delivered to a real OTLP/HTTP endpoint."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from typer.testing import CliRunner

from fae.cli import app
from fae.report.otel import export_otel
from fae.store.live import LogReader
from tests.report.otlp_decode import (
    attributes,
    enum_values,
    from_json_lines,
    from_protobuf,
    semconv_names,
    spans_of,
    traces,
)

runner = CliRunner()
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.evaluation.explanation",
    "fae.answer.text",
)


def query(log: Path, sql: str) -> list[tuple]:
    with LogReader(log) as reader:
        return reader.query(sql)[1]


@pytest.fixture(scope="module")
def exported(demo_log, tmp_path_factory) -> dict[str, Any]:
    """The demo log exported through the command line, without and with contents."""
    folder = tmp_path_factory.mktemp("otel")
    files = {}
    for name, extra in (("plain", []), ("content", ["--otel-content"])):
        files[name] = folder / f"{name}.jsonl"
        done = runner.invoke(app, ["export", "--log", str(demo_log), "--otel", str(files[name]), *extra])
        assert done.exit_code == 0, done.output
        assert "17 runs" in done.output and str(files[name]) in done.output, done.output
    return {name: from_json_lines(path.read_bytes()) for name, path in files.items()} | {"files": files}


def _every_key(requests) -> set[str]:
    keys = set()
    for span in spans_of(requests):
        keys |= {pair.key for pair in span.attributes}
        for event in span.events:
            keys |= {pair.key for pair in event.attributes}
    for request in requests:
        for resource in request.resource_spans:
            keys |= {pair.key for pair in resource.resource.attributes}
    return keys


def test_each_run_is_one_trace_with_a_span_per_call_and_exchange(demo_log, exported):
    by_run = traces(exported["plain"])
    assert sorted(by_run) == sorted(r for (r,) in query(demo_log, "SELECT run_id FROM runs")), sorted(by_run)
    expected = dict(
        query(
            demo_log,
            "SELECT kind, count(*) FROM events WHERE kind IN ('LlmCalled', 'ToolCalled')"
            " OR (kind = 'HttpExchanged' AND upstream = 'fhir') GROUP BY kind",
        )
    )
    spans = [span for trace in by_run.values() for span in trace.spans]
    assert len([s for s in spans if s.name.startswith("chat ")]) == expected["LlmCalled"] == 33
    assert len([s for s in spans if s.name.startswith("execute_tool ")]) == expected["ToolCalled"] == 44
    fhir = [s for s in spans if attributes(s.attributes).get("fae.upstream") == "fhir"]
    assert len(fhir) == expected["HttpExchanged"], len(fhir)
    for run_id, trace in by_run.items():
        root = trace.root_attributes
        assert trace.root.name == f"invoke_agent {root['gen_ai.agent.name']}" and root["gen_ai.operation.name"] == (
            "invoke_agent"
        )
        ids = {trace.root.span_id} | {s.span_id for s in trace.spans}
        assert len(ids) == len(trace.spans) + 1, run_id
        for span in trace.spans:
            assert span.parent_span_id in ids, (run_id, span.name)
            assert trace.root.start_time_unix_nano <= span.start_time_unix_nano <= span.end_time_unix_nano
            assert span.end_time_unix_nano <= trace.root.end_time_unix_nano, (run_id, span.name)


def test_spans_follow_the_genai_and_http_conventions(demo_log, exported):
    names, replaced = semconv_names()
    used = _every_key(exported["content"])
    foreign = sorted(key for key in used if not key.startswith("fae.") and key not in names)
    assert not foreign, f"not in opentelemetry-semantic-conventions: {foreign}"
    assert not used & replaced, sorted(used & replaced)
    assert {"gen_ai.provider.name", "gen_ai.usage.input_tokens", "http.response.status_code", "url.full"} <= used
    spans = spans_of(exported["plain"])
    operations = {attributes(s.attributes).get("gen_ai.operation.name") for s in spans} - {None}
    assert operations == {"invoke_agent", "chat", "execute_tool"} and operations <= enum_values(
        "GenAiOperationNameValues"
    )
    providers = {attributes(s.attributes).get("gen_ai.provider.name") for s in spans} - {None}
    assert providers and providers <= enum_values("GenAiProviderNameValues"), providers
    kinds = {s.name.split(" ")[0]: s.kind for s in spans}
    assert kinds["chat"] == 3 and kinds["execute_tool"] == 1 and kinds["invoke_agent"] == 1 and kinds["POST"] == 3
    (tokens,) = query(demo_log, "SELECT sum(prompt_tokens), sum(completion_tokens) FROM llm_calls")
    chats = [attributes(s.attributes) for s in spans if s.name.startswith("chat ")]
    assert (
        sum(c["gen_ai.usage.input_tokens"] for c in chats),
        sum(c["gen_ai.usage.output_tokens"] for c in chats),
    ) == (tokens)
    assert all(c["gen_ai.request.model"].startswith("scripted:") for c in chats)


def test_an_agents_fhir_writes_sit_under_the_tool_call_that_made_them(exported):
    trace = traces(exported["plain"])["rec-create-patient.v0.langchain-baseline-scripted-gold.r0"]
    by_id = {span.span_id: span for span in trace.spans}
    (create,) = [s for s in trace.spans if s.name == "POST /sandbox/{sandbox}/fhir/Patient"]
    tool = by_id[create.parent_span_id]
    assert tool.name == "execute_tool createResource", tool.name
    assert (
        tool.start_time_unix_nano <= create.start_time_unix_nano <= create.end_time_unix_nano <= tool.end_time_unix_nano
    )
    tool_attributes = attributes(tool.attributes)
    (chat,) = [
        s for s in trace.spans if s.name.startswith("chat ") and s.start_time_unix_nano < tool.start_time_unix_nano
    ]
    # the call id the model gave is the one on the tool's span
    assert tool_attributes["gen_ai.tool.call.id"].startswith("call_"), tool_attributes
    fhir = attributes(create.attributes)
    assert fhir["fae.fhir.interaction"] == "create" and fhir["http.response.status_code"] == 201
    assert fhir["url.full"].endswith("/fhir/Patient") and fhir["server.address"] == "127.0.0.1"
    assert attributes(chat.attributes)["gen_ai.response.finish_reasons"] == ["tool_calls"]
    setup = [s for s in trace.spans if attributes(s.attributes).get("fae.actor") == "setup"]
    assert setup and all(s.parent_span_id == trace.root.span_id for s in setup)


def test_verdicts_are_evaluation_events_on_the_root_span(demo_log, exported):
    by_run = traces(exported["plain"])
    rows = query(demo_log, "SELECT run_id, judge, outcome, passed FROM verdicts")
    found = sorted(
        (run_id, e["fae.verdict.judge"], e["gen_ai.evaluation.score.label"], e.get("fae.verdict.passed"))
        for run_id, trace in by_run.items()
        for e in (attributes(ev.attributes) for ev in trace.root.events if ev.name == "gen_ai.evaluation.result")
    )
    assert found == sorted(rows)
    wrong = by_run["rec-create-patient.v0.langchain-baseline-scripted-wrong-answer.r0"].root
    (strict,) = [
        attributes(e.attributes)
        for e in wrong.events
        if e.name == "gen_ai.evaluation.result"
        and attributes(e.attributes)["gen_ai.evaluation.name"] == "task mode=strict"
    ]
    assert strict["gen_ai.evaluation.score.label"] == "fail" and strict["gen_ai.evaluation.score.value"] == 0.0
    assert all(e.time_unix_nano == wrong.end_time_unix_nano for e in wrong.events if e.name.startswith("gen_ai."))


def test_contents_go_in_only_when_asked(demo_log, exported):
    assert not _every_key(exported["plain"]) & set(CONTENT_KEYS)
    trace = traces(exported["content"])["rec-create-patient.v0.langchain-baseline-scripted-gold.r0"]
    (first, last) = sorted(trace.named("chat "), key=lambda s: s.start_time_unix_nano)
    sent = json.loads(attributes(last.attributes)["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"], sent
    assert sent[2]["parts"][0]["type"] == "tool_call" and sent[3]["parts"][0]["type"] == "tool_call_response"
    assert sent[2]["parts"][0]["id"] == sent[3]["parts"][0]["id"]
    (reply,) = json.loads(attributes(last.attributes)["gen_ai.output.messages"])
    assert reply["finish_reason"] == "stop" and reply["parts"][0]["content"].startswith("<PATIENT>")
    (tool,) = trace.named("execute_tool ")
    arguments = json.loads(attributes(tool.attributes)["gen_ai.tool.call.arguments"])
    assert arguments["resourceType"] == "Patient"
    root = trace.root_attributes
    (prompt,) = query(
        demo_log,
        "SELECT payload->>'$.prompt' FROM events WHERE kind = 'RunStarted' AND run_id = "
        "'rec-create-patient.v0.langchain-baseline-scripted-gold.r0'",
    )
    assert json.loads(root["gen_ai.input.messages"])[0]["parts"][0]["content"] == prompt[0]
    assert "authorization" not in exported["files"]["content"].read_text().lower()


def test_the_same_log_exports_to_the_same_bytes_and_ids(demo_log, exported, tmp_path):
    again = tmp_path / "again.jsonl"
    export_otel(demo_log, again)
    assert again.read_bytes() == exported["files"]["plain"].read_bytes()
    ids = [(s.trace_id, s.span_id) for s in spans_of(exported["plain"])]
    assert len(set(ids)) == len(ids) and len({s.span_id for s in spans_of(exported["plain"])}) == len(ids)


class _Collector:
    """A real OTLP/HTTP receiver on 127.0.0.1: records each POST, answers from a script (then 200)."""

    def __init__(self, answers: list[tuple[int, dict[str, str], bytes]] | None = None):
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.answers = list(answers or [])
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                collector.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status, headers, reply = collector.answers.pop(0) if collector.answers else (200, {}, b"")
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> _Collector:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[_Collector]:
    with _Collector() as running:
        yield running


def test_an_otlp_endpoint_receives_the_same_traces_in_protobuf_and_json(demo_log, exported, collector):
    done = runner.invoke(
        app,
        ["export", "--log", str(demo_log), "--otel", collector.url, "--otel-header", "Authorization=Bearer s3cr3t"],
    )
    assert done.exit_code == 0, done.output
    assert "s3cr3t" not in done.output and f"{collector.url}/v1/traces" in done.output
    done = runner.invoke(
        app, ["export", "--log", str(demo_log), "--otel", collector.url + "/v1/traces", "--otel-protocol", "http/json"]
    )
    assert done.exit_code == 0, done.output
    (path, headers, body), (json_path, json_headers, json_body) = collector.received
    assert (path, json_path) == ("/v1/traces", "/v1/traces")
    assert headers["content-type"] == "application/x-protobuf" and headers["authorization"] == "Bearer s3cr3t"
    assert json_headers["content-type"] == "application/json" and "authorization" not in json_headers
    posted = spans_of([from_protobuf(body)])
    filed = spans_of(exported["plain"])
    assert [(s.span_id, s.name, s.end_time_unix_nano) for s in posted] == [
        (s.span_id, s.name, s.end_time_unix_nano) for s in filed
    ]
    assert from_json_lines(json_body) == exported["plain"]


def test_an_endpoint_that_asks_for_a_retry_gets_one_and_partial_success_is_reported(demo_log, tmp_path):
    partial = ExportTraceServiceResponse()
    partial.partial_success.rejected_spans = 2
    partial.partial_success.error_message = "spans too old"
    answers = [(503, {"Retry-After": "0"}, b"busy"), (200, {}, partial.SerializeToString())]
    waits: list[float] = []
    with _Collector(answers) as running:
        done = export_otel(demo_log, running.url, runs="sched-*", sleep=waits.append)
    assert waits == [0.0] and len(running.received) == 2 and running.received[0][2] == running.received[1][2]
    assert (done.runs, done.rejected_spans, done.rejected_message) == (4, 2, "spans too old")
    with _Collector([(400, {}, b"bad data\nsecond line")]) as refusing:
        refused = runner.invoke(app, ["export", "--log", str(demo_log), "--otel", refusing.url])
    assert refused.exit_code == 1 and "refused the traces: HTTP 400 bad data" in refused.output, refused.output
    assert "Traceback" not in refused.output and "second line" not in refused.output


def test_a_failed_export_leaves_no_file_and_says_why_in_one_line(demo_log, tmp_path):
    target = tmp_path / "out.jsonl"
    missing = runner.invoke(app, ["export", "--log", str(tmp_path / "nope.duckdb"), "--otel", str(target)])
    assert missing.exit_code == 1 and "no log at" in missing.output, missing.output
    assert list(tmp_path.iterdir()) == []
    for bad in (["--otel", "ftp://example.org/x"], ["--otel", str(target), "--parquet", str(tmp_path)], []):
        done = runner.invoke(app, ["export", "--log", str(demo_log), *bad])
        assert done.exit_code == 1 and done.output.startswith("error: ") and "Traceback" not in done.output, bad
    done = runner.invoke(app, ["export", "--log", str(demo_log), "--otel", "http://127.0.0.1:1", "--otel-header", "x"])
    assert done.exit_code == 1 and "KEY=VALUE" in done.output, done.output


def test_a_run_still_recording_is_left_out_and_counted(demo_log, tmp_path):
    log = tmp_path / "recording.duckdb"
    shutil.copy(demo_log, log)
    with duckdb.connect(str(log)) as con:  # a run whose recording has not closed yet, as a killed recorder leaves it
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = 'ord-order-wgs.v0.gold.r0'")
    target = tmp_path / "out.jsonl"
    done = runner.invoke(app, ["export", "--log", str(log), "--otel", str(target)])
    assert done.exit_code == 0 and "16 runs" in done.output and "left out 1 runs still recording" in done.output
    assert "ord-order-wgs.v0.gold.r0" not in traces(from_json_lines(target.read_bytes()))
