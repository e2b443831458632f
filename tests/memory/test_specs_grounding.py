"""``fae train-memory --specs``: the reflector calls the FHIR R4 specs server's tools on demand.

The CLI trains the gold agent on rec-record-condition against the local scripted LLM server; the
reflector is ``scripted:gold`` with a plan (matched on the reflector's input) that calls two specs
tools and then answers its reflection. The log must show the reflector's requests offering the specs
tools, each tool call it made reaching the specs server through the recording proxy (upstream
``mcp-specs``, the training run's ``verifier``), and what the server returned fed back to the model.
Without ``--specs`` the reflector is offered no tools and nothing reaches the specs server.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fae.cli import app
from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.store.log import EventLog

TASK = "rec-record-condition"
RUN_ID = f"train.{TASK}.v0.gold.r0"
REFLECTION = {
    "reflection_text": "A Condition needs its subject.",
    "micro": [{"resource": "Condition", "operation": "create", "tip": "set subject to the patient"}],
    "macro_summary": "record a diagnosis",
    "heuristic": "check required elements first",
}
REFLECTOR_PLAN = {  # matched on the reflector's input: only it holds the evaluator's verdict
    "match": "EVALUATOR:",
    "plan": {
        "name": "spec-reflector",
        "steps": [
            {"call": "getSearchParams", "args": {"resourceType": "Condition"}},
            {"call": "getStructureDefinition", "args": {"resourceType": "Condition"}},
            {"answer": json.dumps(REFLECTION)},
        ],
    },
}


def _rows(log_path: Path, sql: str) -> list[tuple]:
    with EventLog(log_path, read_only=True) as log:
        return log.query(sql, [])[1]


def _train(tmp_path: Path, llm_url: str, name: str, *extra: str) -> Path:
    log_path = tmp_path / f"{name}.duckdb"
    result = CliRunner().invoke(
        app,
        [
            "train-memory",
            "--task",
            TASK,
            "--variations",
            "0",
            "--store",
            str(tmp_path / name),
            "--log",
            str(log_path),
            "--llm-url",
            llm_url,
            "--embedder",
            "hashed-bow",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return log_path


def _reflector_calls(log_path: Path) -> list[dict]:
    rows = _rows(log_path, "SELECT payload FROM events WHERE kind = 'LlmCalled' AND actor = 'verifier' ORDER BY seq")
    calls = [json.loads(p) for (p,) in rows]
    assert calls and calls[0]["model"] == "scripted:evaluator", calls
    return calls[1:]


def test_train_memory_with_specs_lets_the_reflector_call_the_specs_tools(tmp_path):
    with LlmServer(create_app(PlanRegistry([entry_from_dict(REFLECTOR_PLAN)]))) as llm:
        grounded_log = _train(tmp_path, llm.base_url, "grounded", "--specs", "--reflector-model", "scripted:gold")
        plain_log = _train(tmp_path, llm.base_url, "plain")

    # the reflector was offered the specs tools and asked three times: two tool calls, then its answer
    reflector = _reflector_calls(grounded_log)
    assert [c["model"] for c in reflector] == ["scripted:gold"] * 3
    assert all({"getSearchParams", "getStructureDefinition"} <= set(c["tools"]) for c in reflector), reflector
    assert [[t["name"] for t in c["tool_calls"]] for c in reflector] == [
        ["getSearchParams"],
        ["getStructureDefinition"],
        [],
    ]
    # each call it made reached the specs server through the proxy, as the verifier of the training run
    rows = _rows(
        grounded_log,
        "SELECT run_id, actor, upstream, payload FROM events WHERE kind = 'ToolCalled' "
        "AND upstream = 'mcp-specs' ORDER BY seq",
    )
    assert {(run_id, actor) for run_id, actor, _, _ in rows} == {(RUN_ID, "verifier")}
    lookups = [json.loads(p) for *_, p in rows]
    assert [(t["tool"], t["arguments"]) for t in lookups] == [
        ("getSearchParams", {"resourceType": "Condition"}),
        ("getStructureDefinition", {"resourceType": "Condition"}),
    ]
    assert not any(t["is_error"] for t in lookups)
    required = [e["path"] for e in lookups[1]["result"]["elements"] if str(e["min"]) != "0"]
    assert "Condition.subject" in required  # real R4 facts came back
    # what the server returned was fed back to the reflector before it answered
    fed = [m["content"] for m in reflector[2]["messages"] if m.get("role") == "tool"]
    assert len(fed) == 2 and "Condition.subject" in fed[1], fed
    assert "FHIR R4 REFERENCE:" not in json.dumps(reflector[0]["messages"])  # no fixed pre-fetch any more

    # without --specs: no tools offered, nothing reaches the specs server
    assert not _rows(plain_log, "SELECT 1 FROM events WHERE upstream = 'mcp-specs'")
    assert [(c["model"], c["tools"]) for c in _reflector_calls(plain_log)] == [("scripted:reflector", [])]
