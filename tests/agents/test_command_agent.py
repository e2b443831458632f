"""The program agent (``cmd:``) on its own: real programs, real pipes, real signals; no stack.

Each program is a small Python file run with this interpreter. The context's URLs point nowhere: these
programs never call them, they only show what they were given. ``record`` collects the agent's own events
(the harness's writer stands there in a recording; tests/agents/test_command_examples.py covers that path).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from fae.agents.base import AgentContext, AgentError
from fae.agents.command import STDERR_KEEP, CommandAgent, build_command_agent, parse_command_spec
from fae.agents.prefixes import build_agent, check_agent
from fae.errors import PlanError
from fae.store import events as ev
from fae.store.log import blob_hash

BASE = "http://127.0.0.1:9/run/r1/agent/fae-cap-x"
PROMPT = "Current date and time: 2025-03-03T08:00:00Z\n\nCreate the patient. Answer in <id></id>.\n"


class Recorded:
    """The events and blobs an agent recorded, as the run's log would get them."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.blobs: dict[str, bytes] = {}

    async def __call__(self, event: ev.Event, blobs: dict[str, bytes]) -> None:
        self.events.append(event)
        self.blobs.update(blobs)

    def ended(self) -> ev.ProgramEnded:
        [event] = [e for e in self.events if isinstance(e, ev.ProgramEnded)]
        return event


def _context(recorded: Recorded) -> AgentContext:
    return AgentContext(
        run_id="r1",
        prompt=PROMPT,
        now=datetime(2025, 3, 3, 8, tzinfo=UTC),
        mcp_url=f"{BASE}/mcp-fhir/mcp",
        llm_base_url=f"{BASE}/llm/v1",
        extra_mcp={"specs": f"{BASE}/mcp-specs/mcp", "memory:spec": f"{BASE}/mcp-memory-spec/mcp"},
        record=recorded,
    )


def _program(tmp_path: Path, body: str, name: str = "agent.py") -> str:
    path = tmp_path / name
    path.write_text("import os, sys, json, signal, subprocess, time\n" + body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def _play(spec: str, recorded: Recorded, **options: Any) -> Any:
    agent = build_agent(spec, **options)
    return anyio.run(agent.run, _context(recorded))


def test_the_program_gets_the_prompt_and_its_run_s_endpoints_in_the_sdks_names(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "https://elsewhere.example/v1")  # the user's own: never past the proxy
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://elsewhere.example")
    monkeypatch.setenv("FAE_FHIR_BASE", "http://127.0.0.1:1/fhir")
    monkeypatch.setenv("MY_OWN_SETTING", "kept")
    names = [
        "FAE_RUN_ID",
        "FAE_TASK_NOW",
        "FAE_MCP_URL",
        "FAE_MCP_SSE_URL",
        "FAE_SPECS_MCP_URL",
        "FAE_SPECS_MCP_SSE_URL",
        "FAE_MEMORY_SPEC_MCP_URL",
        "FAE_MODEL",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "FAE_FHIR_BASE",
        "MY_OWN_SETTING",
    ]
    command = _program(
        tmp_path,
        f"names = {names!r}\n"
        "seen = {n: os.environ.get(n) for n in names}\n"
        "seen['stdin'] = sys.stdin.read()\n"
        "seen['file'] = open(os.environ['FAE_PROMPT_FILE']).read()\n"
        "seen['servers'] = json.loads(os.environ['FAE_MCP_SERVERS'])\n"
        "print(json.dumps(seen))\n",
    )
    recorded = Recorded()
    result = _play(f"cmd:{command}", recorded, model="scripted:gold", api_key="ignored")
    seen = json.loads(result.answer)
    assert seen.pop("stdin") == seen.pop("file") == PROMPT
    assert seen.pop("servers") == {
        "fhir": f"{BASE}/mcp-fhir/mcp",
        "specs": f"{BASE}/mcp-specs/mcp",
        "memory:spec": f"{BASE}/mcp-memory-spec/mcp",
    }
    assert seen == {
        "FAE_RUN_ID": "r1",
        "FAE_TASK_NOW": "2025-03-03T08:00:00+00:00",
        "FAE_MCP_URL": f"{BASE}/mcp-fhir/mcp",
        "FAE_MCP_SSE_URL": f"{BASE}/mcp-fhir/sse",
        "FAE_SPECS_MCP_URL": f"{BASE}/mcp-specs/mcp",
        "FAE_SPECS_MCP_SSE_URL": f"{BASE}/mcp-specs/sse",
        "FAE_MEMORY_SPEC_MCP_URL": f"{BASE}/mcp-memory-spec/mcp",
        "FAE_MODEL": "scripted:gold",
        "OPENAI_BASE_URL": f"{BASE}/llm/v1",
        "ANTHROPIC_BASE_URL": f"{BASE}/llm",
        "FAE_FHIR_BASE": None,
        "MY_OWN_SETTING": "kept",
    }
    assert result.stop_reason == "answered"
    ended = recorded.ended()
    assert (ended.exit_code, ended.signal, ended.timed_out, ended.answer_from) == (0, None, False, "stdout")
    assert recorded.blobs[ended.stdout_blob].decode().strip() == result.answer
    assert ended.stderr_blob is None and ended.stderr_bytes == 0


def test_without_an_llm_the_sdks_base_urls_lead_nowhere_rather_than_to_a_model_unrecorded(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "https://elsewhere.example/v1")
    command = _program(tmp_path, "print(os.environ['OPENAI_BASE_URL'], os.environ['ANTHROPIC_BASE_URL'])")
    agent = build_agent(f"cmd:{command}")
    context = dataclasses.replace(_context(Recorded()), llm_base_url=None)
    answer = anyio.run(agent.run, context).answer
    assert answer == "http://no-llm-given-to-fae.invalid/v1 http://no-llm-given-to-fae.invalid"


def test_the_answer_file_wins_over_stdout_and_an_empty_one_does_not(tmp_path):
    writes = _program(
        tmp_path,
        "print('step 1: looked up the patient')\nopen(os.environ['FAE_ANSWER_FILE'], 'w').write(sys.argv[1])\n",
    )
    recorded = Recorded()
    result = _play(f"cmd:{writes} '<id>p1</id>'", recorded)
    assert result.answer == "<id>p1</id>" and recorded.ended().answer_from == "file"
    assert recorded.blobs[recorded.ended().stdout_blob] == b"step 1: looked up the patient\n"  # stdout is kept
    recorded = Recorded()
    result = _play(f"cmd:{writes} '  '", recorded)
    assert result.answer == "step 1: looked up the patient" and recorded.ended().answer_from == "stdout"


def test_a_program_that_says_nothing_has_no_answer(tmp_path):
    recorded = Recorded()
    result = _play(f"cmd:{_program(tmp_path, 'sys.stdin.read()')}", recorded)
    assert (result.answer, result.stop_reason) == (None, "no_answer")
    assert recorded.ended().answer_from is None and recorded.ended().stdout_blob is None


def test_a_non_zero_exit_errors_the_run_with_its_code_and_last_stderr_line_kept(tmp_path):
    command = _program(
        tmp_path,
        "print('half an answer')\nprint('Traceback...', file=sys.stderr)\n"
        "print('KeyError: ANTHROPIC_API_KEY', file=sys.stderr)\nsys.exit(3)\n",
    )
    recorded = Recorded()
    with pytest.raises(AgentError, match=r"exited with code 3: KeyError: ANTHROPIC_API_KEY"):
        _play(f"cmd:{command}", recorded)
    ended = recorded.ended()
    assert (ended.exit_code, ended.signal, ended.timed_out) == (3, None, False)
    assert recorded.blobs[ended.stderr_blob] == b"Traceback...\nKeyError: ANTHROPIC_API_KEY\n"


def test_stderr_is_kept_up_to_its_bound_from_the_end(tmp_path):
    command = _program(tmp_path, "sys.stderr.write('x' * 200_000 + 'THE END')\nprint('ok')\n")
    recorded = Recorded()
    assert _play(f"cmd:{command}", recorded).answer == "ok"
    ended = recorded.ended()
    kept = recorded.blobs[ended.stderr_blob]
    assert ended.stderr_bytes == 200_007 and len(kept) == STDERR_KEEP and kept.endswith(b"THE END")
    assert ended.stderr_blob == blob_hash(kept)


def test_a_program_killed_by_a_signal_errors_the_run(tmp_path):
    recorded = Recorded()
    with pytest.raises(AgentError, match="killed by SIGKILL"):
        _play(f"cmd:{_program(tmp_path, 'os.kill(os.getpid(), signal.SIGKILL)')}", recorded)
    assert (recorded.ended().exit_code, recorded.ended().signal) == (None, "SIGKILL")


def _running(pid: int) -> bool:
    """A process that exists and is not a zombie (a container's init may not reap what it inherits)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def _alive(pid: int, within_s: float = 30.0) -> bool:
    """Still running ``within_s`` after fae's stop returned: SIGKILL is sent when it returns, and on a loaded
    machine the kernel may take a moment to end a process that was handling SIGTERM (polled, not timed)."""
    deadline = time.monotonic() + within_s
    while _running(pid):
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)
    return False


CHILD = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (open(sys.argv[1], 'w').write('asked to stop'), sys.exit(0)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(3600)\n"
)
SPAWNS_AND_HANGS = (
    f"child = subprocess.Popen([sys.executable, '-c', {CHILD!r}, sys.argv[1] + '.term'], stdout=subprocess.PIPE)\n"
    "child.stdout.readline()\n"
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}')\n"
    "if len(sys.argv) < 3: time.sleep(3600)\n"
)


def test_the_timeout_stops_the_program_and_everything_it_started(tmp_path):
    pids = tmp_path / "pids"
    recorded = Recorded()
    # the timeout leaves the program ample time to start its child and say so, even on a loaded machine
    with pytest.raises(AgentError, match=r"ran past its timeout of 10 s"):
        _play(f"cmd?timeout=10:{_program(tmp_path, SPAWNS_AND_HANGS)} {pids}", recorded)
    assert recorded.ended().timed_out and recorded.ended().exit_code is None
    assert pids.exists(), "the program had not started its child by its timeout: the machine is overloaded"
    program, child = map(int, pids.read_text().split())
    assert not _alive(program) and not _alive(child)
    assert Path(f"{pids}.term").read_text() == "asked to stop"  # the whole group got SIGTERM first


def test_what_a_program_leaves_running_when_it_exits_is_stopped(tmp_path):
    pids = tmp_path / "pids"
    recorded = Recorded()
    _play(f"cmd:{_program(tmp_path, SPAWNS_AND_HANGS)} {pids} exit", recorded)
    assert recorded.ended().exit_code == 0
    program, child = map(int, pids.read_text().split())
    assert not _alive(program) and not _alive(child)


def test_an_interrupted_run_stops_the_program_and_everything_it_started(tmp_path):
    pids = tmp_path / "pids"
    agent = build_agent(f"cmd:{_program(tmp_path, SPAWNS_AND_HANGS)} {pids}")
    recorded = Recorded()

    async def interrupt() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(agent.run, _context(recorded))
            while not pids.exists() or len(pids.read_text().split()) < 2:
                await anyio.sleep(0.05)
            group.cancel_scope.cancel()

    anyio.run(interrupt)
    program, child = map(int, pids.read_text().split())
    assert not _alive(program) and not _alive(child)
    # the program's end is in the log all the same: stopped by fae, neither an exit nor its own signal
    ended = recorded.ended()
    assert (ended.interrupted, ended.exit_code, ended.signal, ended.timed_out) == (True, None, None, False), ended


def test_a_shell_runs_only_when_asked(tmp_path):
    recorded = Recorded()
    assert _play("cmd:echo $HOME && echo two", recorded).answer == "$HOME && echo two"
    assert _play("cmd?shell=true:echo one && echo two", recorded).answer == "one\ntwo"


def test_the_stored_configuration_names_the_program_and_its_options():
    agent = build_agent(f"cmd?timeout=30:{shlex.quote(sys.executable)} -c 'print(1)'", model="m1")
    assert isinstance(agent, CommandAgent)
    assert agent.config() == {
        "kind": "command",
        "command": f"{shlex.quote(sys.executable)} -c 'print(1)'",
        "argv": [sys.executable, "-c", "print(1)"],
        "shell": False,
        "timeout_s": 30.0,
        "model": "m1",
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cmd:", "names no command"),
        ("cmd:   ", "names no command"),
        ("cmd:python 'unbalanced", "cannot be split"),
        ("cmd?timeout=0:python", "timeout is a number of seconds above 0"),
        ("cmd?timeout=soon:python", "timeout is a number of seconds above 0"),
        ("cmd?timeout=inf:python", "timeout is a number of seconds above 0"),
        ("cmd?retries=2:python", "options are timeout=SECONDS and shell"),
        ("cmd?timeout=1&timeout=2:python", "each once"),
        ("cmd?shell=maybe:echo", "shell is true or false"),
        ("cmd:no-such-program-anywhere --flag", "cannot find an executable program 'no-such-program-anywhere'"),
        ("cmd:./not/here.py", "cannot find an executable program './not/here.py'"),
    ],
)
def test_a_bad_program_agent_is_refused_before_anything_records(spec, message):
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace("?", r"\?")):
        check_agent(spec)


def test_the_spec_keeps_colons_and_quotes_of_the_command_line():
    parsed = parse_command_spec("cmd?timeout=2.5:node agent.mjs --url http://127.0.0.1:8700 'two words'")
    assert parsed.argv == ("node", "agent.mjs", "--url", "http://127.0.0.1:8700", "two words")
    assert parsed.timeout_s == 2.5 and not parsed.shell
    assert build_command_agent(f"cmd:{sys.executable}").name == f"cmd:{sys.executable}"
