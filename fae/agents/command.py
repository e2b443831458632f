"""Any program as an agent: ``cmd:COMMAND LINE`` runs it once per run, given its run's endpoints (docs/agents.md).

The program reads the task prompt on stdin (and from ``FAE_PROMPT_FILE``), reaches FHIR through its run's MCP
URLs and its model through the proxied OpenAI and Anthropic base URLs in the environment the official SDKs
read, and answers on stdout or in ``FAE_ANSWER_FILE`` (the file wins when it holds any text). How it ended and
its stderr are a ``ProgramEnded`` event of the run; a non-zero exit, a signal or its timeout errors the run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fae.agents.base import AgentContext, AgentError, AgentResult
from fae.agents.command_env import program_env
from fae.agents.program import ProgramOutcome, run_program
from fae.errors import PlanError
from fae.store import events as ev
from fae.store.log import blob_hash

PREFIX = "cmd"
DEFAULT_TIMEOUT_S = 600.0
STDOUT_KEEP = 1 << 20
"""The first bytes of stdout kept (and read as the answer); the answer file is read up to as many."""
STDERR_KEEP = 64 << 10
"""The last bytes of stderr kept in the log: where a traceback ends."""
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class CommandSpec:
    """A parsed ``cmd[?timeout=SECONDS][&shell=BOOL]:COMMAND LINE``."""

    command: str
    argv: tuple[str, ...]
    shell: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S


def parse_command_spec(spec: str) -> CommandSpec:
    """The program and options of a ``cmd:`` agent name; a malformed one is one clear ``PlanError``."""
    head, colon, command = spec.partition(":")
    name, _, query = head.partition("?")
    if name != PREFIX or not colon:
        raise PlanError(f"agent {spec!r}: a program agent is cmd:COMMAND LINE (options: cmd?timeout=SECONDS:...)")
    options: dict[str, str] = {}
    for pair in filter(None, query.split("&")):
        key, eq, value = pair.partition("=")
        if key not in ("timeout", "shell") or not eq or not value or key in options:
            raise PlanError(f"agent {spec!r}: options are timeout=SECONDS and shell=true|false, each once")
        options[key] = value
    timeout_s = _timeout(spec, options.get("timeout"))
    shell = _flag(spec, options.get("shell", "false"))
    if not command.strip():
        raise PlanError(f"agent {spec!r} names no command")
    if shell:
        return CommandSpec(command, ("/bin/sh", "-c", command), shell=True, timeout_s=timeout_s)
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise PlanError(f"agent {spec!r}: the command line cannot be split: {exc}") from None
    if not argv:
        raise PlanError(f"agent {spec!r} names no command")
    return CommandSpec(command, argv, timeout_s=timeout_s)


def _timeout(spec: str, value: str | None) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise PlanError(f"agent {spec!r}: timeout is a number of seconds above 0, got {value!r}")
    return seconds


def _flag(spec: str, value: str) -> bool:
    if value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise PlanError(f"agent {spec!r}: shell is true or false, got {value!r}")


def check_program(command: CommandSpec, spec: str) -> None:
    """Refuse, before anything records, a program that cannot be found (from the current directory)."""
    program = command.argv[0]
    found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
    if found is None:
        raise PlanError(f"agent {spec!r}: cannot find an executable program {program!r}")


class CommandAgent:
    """Runs ``command`` once per run, from the current directory, with the user's environment plus the run's."""

    def __init__(self, name: str, command: CommandSpec, model: str | None = None) -> None:
        self.name = name
        self.command = command
        self.model = model

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "kind": "command",
            "command": self.command.command,
            "argv": list(self.command.argv),
            "shell": self.command.shell,
            "timeout_s": self.command.timeout_s,
        }
        return {**config, "model": self.model} if self.model else config

    async def run(self, ctx: AgentContext) -> AgentResult:
        with tempfile.TemporaryDirectory(prefix="fae-cmd-") as folder:
            prompt_file, answer_file = Path(folder, "prompt.txt"), Path(folder, "answer.txt")
            prompt_file.write_text(ctx.prompt, encoding="utf-8")
            env = program_env(os.environ, ctx, prompt_file=prompt_file, answer_file=answer_file, model=self.model)
            try:
                outcome = await run_program(
                    self.command.argv,
                    stdin=ctx.prompt.encode(),
                    env=env,
                    timeout_s=self.command.timeout_s,
                    stdout_limit=STDOUT_KEEP,
                    stderr_limit=STDERR_KEEP,
                    on_interrupt=lambda outcome: _record_end(ctx, outcome, None),
                )
            except OSError as exc:
                raise AgentError(f"the program {self.command.argv[0]!r} could not start: {exc}") from None
            written = _read_answer(answer_file)
        stdout = outcome.stdout.decode("utf-8", errors="replace").strip()
        answer_from = "file" if written else "stdout" if stdout else None
        await _record_end(ctx, outcome, answer_from)
        failure = _failure(outcome, self.command.timeout_s)
        if failure:
            raise AgentError(failure)
        answer = written or stdout or None
        return AgentResult(answer=answer, stop_reason="answered" if answer else "no_answer")


def _read_answer(path: Path) -> str:
    if not path.is_file():
        return ""
    with path.open("rb") as file:
        return file.read(STDOUT_KEEP).decode("utf-8", errors="replace").strip()


async def _record_end(ctx: AgentContext, outcome: ProgramOutcome, answer_from: str | None) -> None:
    """The ``ProgramEnded`` event, with stdout's head and stderr's tail as blobs (none for an empty stream)."""
    if ctx.record is None:
        return
    blobs = {blob_hash(data): data for data in (outcome.stdout, outcome.stderr) if data}
    event = ev.ProgramEnded(
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        timed_out=outcome.timed_out,
        answer_from=answer_from,
        stdout_blob=blob_hash(outcome.stdout) if outcome.stdout else None,
        stdout_bytes=outcome.stdout_size,
        stderr_blob=blob_hash(outcome.stderr) if outcome.stderr else None,
        stderr_bytes=outcome.stderr_size,
        interrupted=outcome.interrupted,
    )
    await ctx.record(event, blobs)


def _failure(outcome: ProgramOutcome, timeout_s: float) -> str | None:
    """Why the run errored, in one line with the program's last stderr line, or None when it exited 0."""
    lines = outcome.stderr.decode("utf-8", errors="replace").strip().splitlines()
    last = f": {lines[-1].strip()[:300]}" if lines else ""
    if outcome.timed_out:
        return f"the program ran past its timeout of {timeout_s:g} s and was stopped{last}"
    if outcome.signal:
        return f"the program was killed by {outcome.signal}{last}"
    if outcome.exit_code:
        return f"the program exited with code {outcome.exit_code}{last}"
    return None


def build_command_agent(spec: str, *, model: str | None = None, **_: Any) -> CommandAgent:
    """The agent of ``cmd:...``; of the LLM options only ``model`` counts (given to the program as FAE_MODEL)."""
    command = parse_command_spec(spec)
    check_program(command, spec)
    return CommandAgent(spec, command, model=model)


def command_agent_from_config(name: str, config: dict[str, Any]) -> CommandAgent:
    """The agent a stored ``agent_config`` of kind ``command`` describes (``fae replay``)."""
    argv = config.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise PlanError(f"agent {name!r}: its stored configuration has no command to run")
    command = CommandSpec(
        command=str(config.get("command", shlex.join(argv))),
        argv=tuple(argv),
        shell=bool(config.get("shell", False)),
        timeout_s=float(config.get("timeout_s", DEFAULT_TIMEOUT_S)),
    )
    check_program(command, name)
    model = config.get("model")
    return CommandAgent(name, command, model=model if isinstance(model, str) else None)
