"""``fae train-memory --specs``: the reflector is grounded in the FHIR R4 specs server.

The CLI trains the gold agent on rec-record-condition against the local
scripted LLM server. The log must show, for the training run's ``verifier``
actor, the specs lookups through the recording proxy (upstream ``mcp-specs``),
and the reflector's request must carry what those lookups returned. Without
``--specs`` neither appears, so the test fails if grounding were skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fae.cli import app
from fae.llm import LlmServer, PlanRegistry, create_app
from fae.store.log import EventLog

TASK = "rec-record-condition"
RUN_ID = f"train.{TASK}.v0.gold.r0"


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


def _reflector_prompt(log_path: Path) -> str:
    rows = _rows(log_path, "SELECT payload FROM events WHERE kind = 'LlmCalled' AND actor = 'verifier' ORDER BY seq")
    calls = [json.loads(p) for (p,) in rows]
    assert [c["model"] for c in calls] == ["scripted:evaluator", "scripted:reflector"]
    return "\n".join(m["content"] for m in calls[1]["messages"] if m.get("role") == "user")


def test_train_memory_with_specs_grounds_the_reflector(tmp_path):
    with LlmServer(create_app(PlanRegistry([]))) as llm:
        grounded_log = _train(tmp_path, llm.base_url, "grounded", "--specs")
        plain_log = _train(tmp_path, llm.base_url, "plain")

    # the specs server was consulted through the proxy, as the verifier of the training run
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
    codes = [p["code"] for p in lookups[0]["result"]["searchParams"]]
    required = [e["path"] for e in lookups[1]["result"]["elements"] if str(e["min"]) != "0"]
    assert "Condition.subject" in required and "patient" in codes  # real R4 facts came back

    # what the lookups returned reached the reflector's request
    prompt = _reflector_prompt(grounded_log)
    assert "FHIR R4 REFERENCE:" in prompt
    assert f"Condition required elements: {', '.join(required)}" in prompt
    assert f"Condition search parameters: {', '.join(codes[:25])}" in prompt

    # without --specs: no specs lookups, no reference in the reflector's request
    assert not _rows(plain_log, "SELECT 1 FROM events WHERE upstream = 'mcp-specs'")
    assert "FHIR R4 REFERENCE:" not in _reflector_prompt(plain_log)
