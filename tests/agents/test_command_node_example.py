"""The Node.js example program agent (docs/examples/node-agent) recorded, judged, rejudged and replayed from the CLI.

Real parts only: ``npm ci`` installs the committed lock file's official ``@modelcontextprotocol/sdk`` and
``openai`` packages into a temporary copy of the example, which runs under fae's recording stack against
fae's scripted LLM server (Chat Completions) on 127.0.0.1. Skipped only where node or npm is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fae import api
from fae.cli import app
from fae.llm import LlmServer, PlanRegistry, create_app
from fae.llm.suite_plans import SuitePlans
from fae.replay.source import load_run
from fae.store import events as ev
from fae.store.log import EventLog
from tests.run_report import live_against_rejudge, why_not_finished

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        shutil.which("node") is None or shutil.which("npm") is None,
        reason="node and npm are not installed: the Node.js example agent cannot run",
    ),
]

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "node-agent"
TASK = "rec-create-patient"
SECRET = "sk-node-test-" + "7" * 24
runner = CliRunner()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("node-agent")
    for name in ("package.json", "package-lock.json", "agent.mjs"):
        shutil.copy(EXAMPLE / name, folder / name)
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=folder, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"npm ci failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return folder


@pytest.fixture(scope="module")
def recorded(installed, tmp_path_factory) -> tuple[Path, str]:
    log = tmp_path_factory.mktemp("node-log") / "node.duckdb"
    agent = f"cmd:node {installed / 'agent.mjs'}"
    with (
        LlmServer(create_app(PlanRegistry(fallback=SuitePlans().find))) as llm,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv("OPENAI_API_KEY", SECRET)  # the program's own key: the openai package refuses to start without one
        result = runner.invoke(
            app,
            ["record", "--log", str(log), "--task", TASK, "--agent", agent]
            + ["--llm-url", llm.base_url, "--model", "scripted:gold"],
        )
    assert result.exit_code == 0, result.output + why_not_finished(log)
    [run] = api.query(log, "SELECT run_id, status FROM runs")
    assert run["status"] == "finished", why_not_finished(log)
    return log, run["run_id"]


def _events(log: Path, run_id: str) -> tuple[list[ev.Event], dict[str, bytes]]:
    """The agent's events, and the bodies of its program's output and of its MCP requests."""
    with EventLog(log, read_only=True) as opened:
        run = load_run(opened, run_id)
        events = [r.event for r in run.events if r.actor == "agent"]
        ended = next(e for e in events if isinstance(e, ev.ProgramEnded))
        named = [ended.stdout_blob, ended.stderr_blob]
        named += [e.request_blob for e in events if isinstance(e, ev.HttpExchanged) and e.path == "/mcp"]
        blobs = {h: run.body(h) for h in named if h}
    return events, blobs


def test_the_node_agent_passes_and_answers_in_its_answer_file_over_its_stdout_log(recorded):
    log, run_id = recorded
    rows = api.query(log, "SELECT judge, outcome FROM verdicts WHERE run_id = ? AND batch = 'live'", [run_id])
    assert {r["outcome"] for r in rows if r["judge"] == "task"} == {"pass"}, rows
    events, blobs = _events(log, run_id)
    ended = next(e for e in events if isinstance(e, ev.ProgramEnded))
    assert (ended.exit_code, ended.answer_from) == (0, "file")
    logged = blobs[ended.stdout_blob].decode()
    [answer] = api.query(log, "SELECT answer FROM run_summary WHERE run_id = ?", [run_id])
    assert logged.startswith("turn 1:") and answer["answer"] and answer["answer"] not in logged
    # the tokens the openai package read in each reply are the tokens the log counts for that call
    said = [int(line.split(": ")[1].split()[0]) for line in logged.splitlines() if line.startswith("turn ")]
    calls = api.query(log, "SELECT api, total_tokens FROM llm_calls WHERE run_id = ? ORDER BY seq", [run_id])
    assert [c["api"] for c in calls] == ["chat"] * len(said) and [c["total_tokens"] for c in calls] == said


def test_what_the_node_sdks_send_is_recorded_with_the_key_redacted(recorded):
    log, run_id = recorded
    events, bodies = _events(log, run_id)
    exchanges = [e for e in events if isinstance(e, ev.HttpExchanged)]
    llm = [x for x in exchanges if x.path == "/v1/chat/completions"]
    assert len(llm) == 2 and all(x.status == 200 for x in llm)
    for exchange in llm:
        headers = {h.name.lower(): h.value for h in exchange.request_headers}
        assert headers["user-agent"].startswith("OpenAI/JS") and headers["authorization"] == "[redacted]"
    # the TypeScript SDK's streamable-HTTP client: its POSTs in order, then the GET stream it opens for the
    # server's own messages, which the stateless server holds open until the client closes
    mcp = [x for x in exchanges if x.path == "/mcp"]
    posts = [json.loads(bodies[x.request_blob])["method"] for x in mcp if x.method == "POST" and x.request_blob]
    assert posts == ["initialize", "notifications/initialized", "tools/list", "tools/call"], posts
    assert [x.method for x in mcp if x.method != "POST"] == ["GET"]
    tools = [e for e in events if isinstance(e, ev.ToolCalled)]
    assert [t.tool for t in tools] == ["createResource"]
    assert SECRET.encode() not in log.read_bytes()
    with EventLog(log, read_only=True) as opened:
        payloads = "".join(p for (p,) in opened.query("SELECT payload FROM events")[1])
        blobs = b"".join(bytes(b) for (b,) in opened.query("SELECT data FROM blobs WHERE NOT external")[1])
    assert SECRET not in payloads and SECRET.encode() not in blobs


def test_the_node_run_rejudges_to_its_live_verdicts_and_replays_identically(recorded, tmp_path, monkeypatch):
    log, run_id = recorded
    live, again = live_against_rejudge(log)
    assert live and live == again
    monkeypatch.setenv("OPENAI_API_KEY", "any")  # the cassette answers whatever key
    out = tmp_path / "replay.duckdb"
    result = runner.invoke(app, ["replay", run_id, "--log", str(log), "--out", str(out), "--trust-log-agent"])
    assert result.exit_code == 0, result.output
    assert "2/2 LLM calls answered from the log, 1/1 tool calls matched; replayed identically" in result.output
