"""The Python example program agent (docs/examples/anthropic_agent.py) recorded, judged, rejudged and replayed.

Real parts only: fae's scripted LLM server on 127.0.0.1 (Anthropic Messages, streamed) playing the suite's
gold plans, the official ``anthropic`` SDK and MCP Python SDK inside the program, the whole recording stack.
Beside it in the same recording: programs that exit non-zero, crash and hang, each a run status with a cause.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
import yaml
from typer.testing import CliRunner

from fae import api
from fae.agents.prefixes import build_agent
from fae.cli import app
from fae.errors import TaskError
from fae.harness.config import StackConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.llm import LlmServer, PlanRegistry, create_app
from fae.llm.suite_plans import SuitePlans
from fae.replay.source import load_run
from fae.store import events as ev
from fae.store.bodies import bodies_dir
from fae.store.log import EventLog
from fae.tasks import load_suite
from fae.tasks.sources import PACKAGED
from fae.tasks.suite import task_from_dict
from fae.util.data_files import read_yaml
from tests.run_report import live_against_rejudge, why_not_finished

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "anthropic_agent.py"
PYTHON = shlex.quote(sys.executable)
AGENT = f"cmd:{PYTHON} {EXAMPLE}"
TASK = "rec-create-patient"
SECRET = "sk-ant-test-" + "5" * 24
FAILS = f"cmd:{PYTHON} -c 'import sys; print(\"bad key\", file=sys.stderr); sys.exit(3)'"
CRASHES = f"cmd:{PYTHON} -c 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'"
HANGS = f"cmd?timeout=2:{PYTHON} -c 'import time; time.sleep(3600)'"
LEAKS = f"cmd:{PYTHON} {Path(__file__).with_name('leaky_program.py')}"
OVER_SSE = f"cmd:{PYTHON} {Path(__file__).with_name('sse_program.py')}"
AGENTS = [AGENT, FAILS, CRASHES, HANGS, LEAKS, OVER_SSE]
runner = CliRunner()


@pytest.fixture(scope="module")
def llm():
    with LlmServer(create_app(PlanRegistry(fallback=SuitePlans().find))) as server:
        yield server


@pytest.fixture(scope="module")
def recorded(llm, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    log = tmp_path_factory.mktemp("cmd") / "cmd.duckdb"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_API_KEY", SECRET)  # the program's own key, from the user's environment
        result = api.record(
            log,
            api.run_specs([TASK], agents=AGENTS),
            api.RecordConfig(stack=api.StackConfig(llm_url=llm.base_url), llm=api.LlmConfig(model="scripted:gold")),
        )
    by_run = dict(result.runs)
    return log, {spec.agent: by_run[spec.run_id] for spec in _specs()}


def _specs() -> list[Any]:
    return api.run_specs([TASK], agents=AGENTS)


def _run_id(agent: str) -> str:
    return next(s.run_id for s in _specs() if s.agent == agent)


def _events(log: Path, run_id: str) -> list[Any]:
    with EventLog(log, read_only=True) as opened:
        return list(load_run(opened, run_id).events)


def _ended(log: Path, run_id: str) -> tuple[ev.ProgramEnded, dict[str, bytes]]:
    with EventLog(log, read_only=True) as opened:
        run = load_run(opened, run_id)
        [ended] = [r.event for r in run.events if isinstance(r.event, ev.ProgramEnded)]
        blobs = {h: run.body(h) for h in (ended.stdout_blob, ended.stderr_blob) if h}
    return ended, blobs


def test_the_example_run_finishes_and_passes_its_task(recorded):
    log, statuses = recorded
    assert statuses[AGENT] == "finished", why_not_finished(log)
    rows = api.query(
        log, "SELECT judge, outcome, passed FROM verdicts WHERE run_id = ? AND batch = 'live'", [_run_id(AGENT)]
    )
    task = {(r["outcome"], r["passed"]) for r in rows if r["judge"] == "task"}
    assert task == {("pass", True)}, rows
    ended, blobs = _ended(log, _run_id(AGENT))
    assert (ended.exit_code, ended.answer_from) == (0, "stdout")
    [answer] = api.query(log, "SELECT answer FROM run_summary WHERE run_id = ?", [_run_id(AGENT)])
    assert answer["answer"] and blobs[ended.stdout_blob].decode().strip() == answer["answer"]


def test_the_anthropic_run_s_tokens_are_the_server_s_usage_as_the_sdk_read_it(recorded):
    log, _ = recorded
    ended, blobs = _ended(log, _run_id(AGENT))
    usages = [json.loads(line)["usage"] for line in blobs[ended.stderr_blob].decode().splitlines()]
    calls = api.query(
        log,
        "SELECT api, stream, prompt_tokens, completion_tokens, cache_read_tokens, cache_write_tokens, tokens_known"
        " FROM llm_calls WHERE run_id = ? ORDER BY seq",
        [_run_id(AGENT)],
    )
    assert len(calls) == len(usages) == 2, (calls, usages)
    for call, usage in zip(calls, usages, strict=True):
        assert (call["api"], call["stream"], call["tokens_known"]) == ("messages", True, True)
        assert (call["prompt_tokens"], call["completion_tokens"]) == (usage["input_tokens"], usage["output_tokens"])
        assert (call["cache_read_tokens"], call["cache_write_tokens"]) == (
            usage["cache_read_input_tokens"] or 0,
            usage["cache_creation_input_tokens"] or 0,
        )
    [summary] = api.query(log, "SELECT total_tokens FROM run_summary WHERE run_id = ?", [_run_id(AGENT)])
    assert summary["total_tokens"] == sum(u["input_tokens"] + u["output_tokens"] for u in usages)


def test_what_the_sdks_send_is_recorded_with_the_key_redacted(recorded):
    log, _ = recorded
    exchanges = [r.event for r in _events(log, _run_id(AGENT)) if isinstance(r.event, ev.HttpExchanged)]
    llm = [x for x in exchanges if x.path == "/v1/messages"]
    mcp = [x for x in exchanges if x.path == "/mcp"]
    assert len(llm) == 2 and all(x.streamed and x.status == 200 for x in llm)
    for exchange in llm:
        headers = {h.name.lower(): h.value for h in exchange.request_headers}
        assert headers["anthropic-version"] and headers["user-agent"].startswith("AsyncAnthropic/Python")
        # the anthropic SDK sends its key as a bearer token (x-api-key on older versions): both are secrets
        assert {headers.get("authorization"), headers.get("x-api-key")} - {None} == {"[redacted]"}, headers
    assert {next((h.value for h in x.request_headers if h.name == "mcp-method"), None) for x in mcp} >= {
        "tools/list",
        "tools/call",
    }
    leaked = [
        r.event for r in _events(log, _run_id(LEAKS)) if isinstance(r.event, ev.HttpExchanged) and r.actor == "agent"
    ]
    assert [(x.path, x.status) for x in leaked] == [("/v1/models", 200)]
    assert {h.value for h in leaked[0].request_headers if h.name.lower() == "x-api-key"} == {"[redacted]"}
    ended, blobs = _ended(log, _run_id(LEAKS))
    assert blobs[ended.stderr_blob].endswith(b"my key is [redacted]\n"), blobs  # scrubbed after the proxy saw it
    stored = log.read_bytes() + b"".join(p.read_bytes() for p in bodies_dir(log).rglob("*") if p.is_file())
    with EventLog(log, read_only=True) as opened:
        stored += "".join(p for (p,) in opened.query("SELECT payload FROM events")[1]).encode()
        stored += b"".join(bytes(b) for (b,) in opened.query("SELECT data FROM blobs WHERE NOT external")[1])
    assert SECRET.encode() not in stored


@pytest.mark.parametrize(
    ("agent", "error", "exit_code", "signal", "timed_out"),
    [
        (FAILS, "the program exited with code 3: bad key", 3, None, False),
        (CRASHES, "the program was killed by SIGSEGV", None, "SIGSEGV", False),
        (HANGS, "the program ran past its timeout of 2 s and was stopped", None, None, True),
    ],
)
def test_a_failing_program_is_an_errored_run_with_a_cause_never_a_harness_failure(
    recorded, agent, error, exit_code, signal, timed_out
):
    log, statuses = recorded
    assert statuses[agent] == "errored", why_not_finished(log)
    [run] = api.query(log, "SELECT status, cause, error FROM runs WHERE run_id = ?", [_run_id(agent)])
    assert (run["status"], run["cause"], run["error"]) == ("errored", "agent", error)
    ended, blobs = _ended(log, _run_id(agent))
    assert (ended.exit_code, ended.signal, ended.timed_out) == (exit_code, signal, timed_out)
    if agent == FAILS:
        assert blobs[ended.stderr_blob] == b"bad key\n"
    shown = runner.invoke(app, ["show", _run_id(agent), "--log", str(log)])
    how = {FAILS: "exited 3", CRASHES: "killed by SIGSEGV", HANGS: "ran past its timeout"}[agent]
    assert shown.exit_code == 0 and f"program {how} (answer from nowhere" in shown.output, shown.output


def test_the_legacy_sse_url_reaches_the_run_s_fhir_mcp_server_through_the_proxy(recorded):
    log, statuses = recorded
    assert statuses[OVER_SSE] == "finished", why_not_finished(log)
    [answer] = api.query(log, "SELECT answer FROM run_summary WHERE run_id = ?", [_run_id(OVER_SSE)])
    assert answer["answer"].split() == sorted(
        [
            "createResource",
            "deleteResource",
            "getResourceById",
            "listResourceTypes",
            "searchResources",
            "updateResource",
        ]
    )
    paths = {e.event.path for e in _events(log, _run_id(OVER_SSE)) if isinstance(e.event, ev.HttpExchanged)}
    assert "/sse" in paths and any(p.startswith("/messages/") for p in paths), paths


def test_rejudging_the_log_gives_the_live_verdicts(recorded):
    log, _ = recorded
    live, again = live_against_rejudge(log)
    assert live and live == again


def test_the_example_run_replays_identically(recorded, tmp_path, monkeypatch):
    log, _ = recorded
    monkeypatch.setenv("ANTHROPIC_API_KEY", "any")  # the SDK wants a key to start; the cassette ignores it
    report = api.replay(log, _run_id(AGENT), out=tmp_path / "replay.duckdb", agent=AGENT)
    assert not report.divergences, [d.describe() for d in report.divergences]
    assert (report.llm_calls, report.llm_played, report.matched) == (2, 2, 1)
    [recorded_answer] = api.query(log, "SELECT answer FROM run_summary WHERE run_id = ?", [_run_id(AGENT)])
    assert report.answer == recorded_answer["answer"]
    [config] = api.query(tmp_path / "replay.duckdb", "SELECT agent_config FROM runs")
    assert json.loads(config["agent_config"])["kind"] == "command"


def _forged(log: Path, tmp_path: Path, command: str, argv: list[str]) -> Path:
    """A copy of the log whose example run names another program, as a log written by someone else may."""
    forged = tmp_path / "forged.duckdb"
    forged.write_bytes(log.read_bytes())
    if bodies_dir(log).exists():
        shutil.copytree(bodies_dir(log), bodies_dir(forged))
    with duckdb.connect(str(forged)) as db:
        [(seq, payload)] = db.execute(
            "SELECT seq, payload FROM events WHERE run_id = ? AND kind = 'RunStarted'", [_run_id(AGENT)]
        ).fetchall()
        started = json.loads(payload)
        started["agent_config"].update(command=command, argv=argv, shell=False)
        db.execute(
            "UPDATE events SET payload = ? WHERE run_id = ? AND seq = ?", [json.dumps(started), _run_id(AGENT), seq]
        )
    return forged


def test_a_log_cannot_make_replay_run_the_program_it_names(recorded, tmp_path, monkeypatch):
    """A log from anyone else names the program its run played; replaying it must not run that program unless
    the user names the agent again or says they trust the log (the program here would write a marker file)."""
    log, _ = recorded
    monkeypatch.setenv("ANTHROPIC_API_KEY", "any")
    marker = tmp_path / "ran"
    hostile = f"touch it \x1b]8;;http://evil\x07\x1b[2J{marker}"
    forged = _forged(log, tmp_path, hostile, [sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    out = tmp_path / "replay.duckdb"

    refused = runner.invoke(app, ["replay", _run_id(AGENT), "--log", str(forged), "--out", str(out)])
    assert refused.exit_code != 0 and not marker.exists(), refused.output
    assert "--trust-log-agent" in refused.output and "touch it" in refused.output, refused.output
    assert "\x1b" not in refused.output and "Traceback" not in refused.output, refused.output
    assert not out.exists() or not api.query(out, "SELECT run_id FROM runs"), "a refused replay recorded a run"

    wrong_kind = runner.invoke(
        app, ["replay", _run_id(AGENT), "--log", str(forged), "--out", str(out), "--agent", "a2a:http://127.0.0.1:9/"]
    )
    assert wrong_kind.exit_code != 0 and "command agent" in wrong_kind.output and not marker.exists(), wrong_kind.output

    # named again, the user's own program runs (the example), never the log's
    named = runner.invoke(app, ["replay", _run_id(AGENT), "--log", str(forged), "--out", str(out), "--agent", AGENT])
    assert named.exit_code == 0 and not marker.exists(), named.output

    # trusted, the log's program is what runs: the guard, not an accident, kept it from running above
    trusted = runner.invoke(
        app, ["replay", _run_id(AGENT), "--log", str(forged), "--out", str(tmp_path / "t.duckdb"), "--trust-log-agent"]
    )
    assert marker.exists(), trusted.output


def test_an_experiment_file_names_a_program_agent_and_gives_it_the_experiment_s_model(llm, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    experiment = tmp_path / "byo.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "name": "byo",
                "model": "scripted:gold",
                "trials": 1,
                "configurations": [AGENT],
                "evaluation": {"tasks": [TASK], "variations": [1]},
            }
        )
    )
    log = tmp_path / "byo.duckdb"
    result = runner.invoke(app, ["experiment", "run", str(experiment), "--log", str(log), "--llm-url", llm.base_url])
    assert result.exit_code == 0, result.output + why_not_finished(log)
    [run] = api.query(log, "SELECT agent, status, agent_config FROM runs")
    assert (run["agent"], run["status"]) == (AGENT, "finished")
    assert json.loads(run["agent_config"])["model"] == "scripted:gold"


def test_the_command_line_refuses_a_program_it_cannot_find_in_one_line(tmp_path):
    result = runner.invoke(
        app, ["record", "--log", str(tmp_path / "x.duckdb"), "--task", TASK, "--agent", "cmd:no-such-agent-program"]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "cannot find an executable program 'no-such-agent-program'" in result.output
    assert not (tmp_path / "x.duckdb").exists()


READS_FHIR = f"cmd:{PYTHON} {Path(__file__).with_name('fhir_direct_program.py')}"


def test_only_a_task_that_allows_direct_fhir_access_gives_the_program_its_run_s_fhir_base(tmp_path):
    task = load_suite()[TASK]
    allowed = dataclasses.replace(task, fhir_access="direct").render(0)
    statuses: dict[str, str] = {}

    async def record() -> None:
        async with open_stack(tmp_path / "direct.duckdb", StackConfig(processes=1)) as stack:
            for run_id, rendered in (("direct", allowed), ("mcp-only", task.render(0))):
                spec = RunSpec(run_id=run_id, task_id=TASK, variation=0, agent=READS_FHIR, repeat=0)
                statuses[run_id] = await execute_run(stack, spec, rendered, build_agent(READS_FHIR))

    anyio.run(record, backend="asyncio")
    log = tmp_path / "direct.duckdb"
    assert statuses == {"direct": "finished", "mcp-only": "errored"}, why_not_finished(log)
    [answer] = api.query(log, "SELECT answer FROM run_summary WHERE run_id = 'direct'")
    seeded = api.query(log, "SELECT count(*) AS n FROM fhir_exchanges WHERE run_id = 'direct' AND actor = 'agent'")
    assert int(answer["answer"]) > 0 and seeded[0]["n"] == 1  # its own read, through the proxy, as the agent
    [run] = api.query(log, "SELECT error FROM runs WHERE run_id = 'mcp-only'")
    assert "exited with code 1: KeyError: 'FAE_FHIR_BASE'" in run["error"]


def test_a_task_file_says_mcp_or_direct_for_its_fhir_access():
    task = load_suite()[TASK]
    raw = read_yaml(PACKAGED / task.source)
    assert task_from_dict(raw, task.family, source=task.source).fhir_access == "mcp"
    assert task_from_dict({**raw, "fhir_access": "direct"}, task.family).fhir_access == "direct"
    with pytest.raises(TaskError, match="fhir_access: Invalid enum value 'sideways'; one of direct, mcp"):
        task_from_dict({**raw, "fhir_access": "sideways"}, task.family)
