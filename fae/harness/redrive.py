"""Re-drive a recorded run against a fresh sandbox and stop (or warn) where it diverges.

Scripted runs (``replay_scripted``) play their plan in process, with no
network, through the same FHIR tool functions the MCP server exposes. LLM-agent
runs (``replay_llm``) run the same agent configuration through the whole
recording stack — proxy, MCP servers, embedded FHIR server — into a new log,
with the model answered by the run's cassette (``fae.replay.cassette``). Either
way the sandbox is seeded from the recorded seed, new resources get the ids the
recording gave them, in order, and each tool call is matched against the
recorded one by ``call_key``. Strict (the default) raises ``ReplayDrift`` at the
first divergence; lenient records it and goes on.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from fae.agents.a2a_agent import a2a_agent_from_config
from fae.agents.base import Agent, AgentContext, AgentResult, declared_upstreams
from fae.agents.command import command_agent_from_config
from fae.agents.plan_runner import PlanRun, ToolOutcome, run_plan
from fae.agents.prefixes import build_agent
from fae.errors import PlanError, ReplayDrift
from fae.harness.config import StackConfig
from fae.plan import Plan
from fae.replay.cassette import Cassette, Miss, Policy, RecordedCall, recorded_calls
from fae.replay.drift import captured_resources, state_drift
from fae.replay.fold import fhir_exchanges, parse_json
from fae.replay.source import RunLog
from fae.replay.transcript import Transcript, fold_transcript
from fae.store import events as ev

# Parts of a FHIR reply that legitimately differ between two plays: server times and absolute links.
_VOLATILE = ("lastUpdated", "fullUrl", "link", "url")


def normalise(value: Any) -> Any:
    """A tool argument or result with the volatile parts removed (keys sorted by the JSON dump)."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def call_key(tool: str, arguments: Any) -> str:
    """The one function that decides whether a replayed call is the recorded call."""
    return json.dumps([tool, normalise(arguments)], sort_keys=True, separators=(",", ":"))


def created_ids(run: RunLog) -> list[str]:
    """The ids the server gave the run's creates, in order."""
    return [x.resource_id for x in fhir_exchanges(run) if x.interaction == "create" and x.ok and x.resource_id]


def recorded_id_factory(ids: list[str]) -> Callable[[], str]:
    """An engine id factory that hands out the recorded ids in order, then fresh ones."""
    given = iter(ids)
    return lambda: next(given, None) or str(uuid.uuid4())


@dataclass(frozen=True)
class Divergence:
    """Where the replay left the recording: which call (or the answer, or the state), and how."""

    index: int
    seq: int | None
    what: str
    recorded: Any
    replayed: Any
    unit: str = "call"

    def describe(self) -> str:
        where = (
            f"{self.unit} {self.index + 1}" + (f" (event {self.seq})" if self.seq else "")
            if self.index >= 0
            else self.what
        )
        if self.recorded is None:
            return f"{where}: {self.what}: replayed {_short(self.replayed)}"
        if self.replayed is None:
            return f"{where}: {self.what}: recorded {_short(self.recorded)}"
        return f"{where}: {self.what} differs: recorded {_short(self.recorded)}, replayed {_short(self.replayed)}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 240 else text[:237] + "..."


@dataclass
class ReplayReport:
    run_id: str
    calls: int = 0
    matched: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    answer: str | None = None
    replay_run_id: str | None = None
    out: str | None = None
    llm_calls: int = 0
    llm_played: int = 0


async def replay_scripted(
    run: RunLog, plan: Plan, *, strict: bool = True, warn: Callable[[Divergence], None] | None = None
) -> ReplayReport:
    """Play ``plan`` again on the run's recorded seed and match every call, the answer and the final state."""
    from fae.fhir.app import create_app
    from fae.fhir.engine import FhirEngine
    from fae.mcp import fhir_tools

    seeded = run.first(ev.SandboxSeeded)
    if seeded is None or not isinstance(seeded.event, ev.SandboxSeeded) or not seeded.event.seed_blob:
        raise ReplayDrift("the run has no recorded seed to replay from", run_id=run.run_id)
    seed = parse_json(run.body(seeded.event.seed_blob))
    engine = FhirEngine(id_factory=recorded_id_factory(created_ids(run)))
    sid = engine.create_sandbox(seed, sandbox_id="replay")
    recorded = fold_transcript(run)
    report = ReplayReport(run.run_id)

    def diverged(divergence: Divergence) -> None:
        report.divergences.append(divergence)
        if strict:
            raise ReplayDrift(f"replay diverged at {divergence.describe()}", run_id=run.run_id, seq=divergence.seq)
        if warn:
            warn(divergence)

    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://replay/sandbox/replay/fhir/") as client:

        async def call_tool(name: str, args: dict[str, Any]) -> ToolOutcome:
            index = report.calls
            report.calls += 1
            tool = getattr(fhir_tools, name, None)
            if name.startswith("_") or not inspect.iscoroutinefunction(tool):
                raise ReplayDrift(f"tool {name!r} is not one of the FHIR tools replay can drive", run_id=run.run_id)
            result = await tool(client, **args)
            outcome = ToolOutcome(result=result, is_error=fhir_tools.is_error_result(result))
            if index >= len(recorded.tool_calls):
                diverged(Divergence(index, None, "an extra call", None, {"tool": name, "arguments": args}))
                return outcome
            was = recorded.tool_calls[index]
            if call_key(was.tool, was.arguments) != call_key(name, args):
                diverged(
                    Divergence(
                        index,
                        was.seq,
                        "the call",
                        {"tool": was.tool, "arguments": was.arguments},
                        {"tool": name, "arguments": args},
                    )
                )
            elif normalise(was.result) != normalise(result):
                diverged(Divergence(index, was.seq, "the result", was.result, result))
            else:
                report.matched += 1
            return outcome

        async def call_http(actor: str, via: str, method: str, path: str, body: Any) -> Any:
            reply = await client.request(
                method.upper(),
                path.lstrip("/"),
                content=json.dumps(body).encode() if body is not None else None,
                headers={"content-type": "application/fhir+json"},
            )
            try:
                return reply.json()
            except ValueError:
                return {"status": reply.status_code}

        try:
            played: PlanRun = await run_plan(plan, call_tool, call_http=call_http)
        except PlanError as exc:
            raise ReplayDrift(f"the plan could not be replayed: {exc}", run_id=run.run_id) from None
    report.answer = played.answer
    if report.calls < len(recorded.tool_calls):
        missing = recorded.tool_calls[report.calls]
        diverged(Divergence(report.calls, missing.seq, "a missing call", {"tool": missing.tool}, None))
    if played.answer != recorded.answer:
        diverged(Divergence(-1, None, "the answer", recorded.answer, played.answer))
    capture = captured_resources(run)
    if capture is not None:
        from fae.replay.fold import FoldedState, FoldedVersion

        state = FoldedState(engine.resources(sid))
        for resource in engine.resources(sid):
            version = str((resource.get("meta") or {}).get("versionId", "1"))
            if version != "1":
                state.apply(FoldedVersion(resource["resourceType"], resource["id"], version, resource, 0, None, None))
        differences = state_drift(state, capture[1])
        if differences:
            diverged(Divergence(-1, capture[0], "the final state", [d["ref"] for d in differences], differences))
    return report


@dataclass(frozen=True)
class RecordedTask:
    """What the harness needs of a task variation, read from the log instead of the task suite."""

    prompt: str
    now: datetime
    seed_bundle: dict[str, Any]
    gold_plan: Any = None
    kept_task: bytes | None = None
    """The original run's task as its log keeps it (``fae.tasks.judged``): the replay keeps the same."""


@dataclass(frozen=True)
class LlmRecording:
    """Everything an LLM re-drive needs from the original log, read while the log is open."""

    run_id: str
    log: str
    task_id: str
    variation: int
    agent: str
    repeat: int
    agent_config: dict[str, Any]
    task: RecordedTask
    calls: list[RecordedCall]
    created_ids: list[str]
    transcript: Transcript


def agent_kind(run: RunLog) -> str | None:
    """The ``kind`` of the agent that played the run, from its ``RunStarted``."""
    started = run.first(ev.RunStarted)
    return started.event.agent_config.get("kind") if started and isinstance(started.event, ev.RunStarted) else None


def _kept_task(run: RunLog) -> bytes | None:
    kept = run.first(ev.TaskRendered)
    return run.body(kept.event.task_blob) if kept is not None and isinstance(kept.event, ev.TaskRendered) else None


def read_llm_recording(run: RunLog, log: str) -> LlmRecording:
    """The cassette, seed, prompt, agent configuration and transcript of a recorded LLM-agent run."""
    started = run.first(ev.RunStarted)
    seeded = run.first(ev.SandboxSeeded)
    if started is None or not isinstance(started.event, ev.RunStarted):
        raise ReplayDrift("the run has no RunStarted event to take its agent from", run_id=run.run_id)
    if seeded is None or not isinstance(seeded.event, ev.SandboxSeeded) or not seeded.event.seed_blob:
        raise ReplayDrift("the run has no recorded seed to replay from", run_id=run.run_id)
    seed = parse_json(run.body(seeded.event.seed_blob))
    if not isinstance(seed, dict):
        raise ReplayDrift("the run's recorded seed cannot be read", run_id=run.run_id, seq=seeded.seq)
    prompt = started.event.prompt
    for recorded in run.events:  # the agent saw the harness's accepted rewording, when there was one
        event = recorded.event
        if isinstance(event, ev.PromptParaphrased) and event.accepted:
            prompt = event.prompt
    if prompt is None or started.event.task_now is None:
        from fae.harness.worklist import render_task

        rendered = render_task(run.task_id, run.variation)
        prompt, now = prompt or rendered.prompt, rendered.now
    else:
        now = datetime.fromisoformat(started.event.task_now)
    calls = recorded_calls(run)
    if not calls:
        raise ReplayDrift("the run has no recorded LLM calls of the agent to replay", run_id=run.run_id)
    return LlmRecording(
        run_id=run.run_id,
        log=log,
        task_id=run.task_id,
        variation=run.variation,
        agent=run.agent,
        repeat=run.repeat,
        agent_config=dict(started.event.agent_config),
        task=RecordedTask(prompt, now, seed, kept_task=_kept_task(run)),
        calls=calls,
        created_ids=created_ids(run),
        transcript=fold_transcript(run),
    )


LOG_NAMED = {"command": "runs the program", "a2a": "sends the task to the A2A server"}
"""Agent kinds whose stored configuration names something outside fae to start or contact: a replay rebuilds
them from the log only when the user says so (``replay_agent``), never because a log says so."""


def _named(config: Mapping[str, Any]) -> str:
    """What a stored command or A2A configuration names, as one short line (the log may be anyone's)."""
    named = config.get("command") if config.get("kind") == "command" else config.get("url")
    text = json.dumps(named if isinstance(named, str) else config, default=str)
    return text if len(text) <= 120 else text[:119] + "…"


def replay_agent(config: dict[str, Any], name: str, *, agent: str | None = None, trust_log: bool = False) -> Agent:
    """The agent a replay re-drives: rebuilt from the run's stored ``config``, except that a program or an A2A
    server (``LOG_NAMED``) is run or contacted only when the user names the agent again (``agent``, a spec as
    ``fae record --agent`` takes it, of the recorded kind) or trusts the log (``trust_log``). A log from
    someone else must not be able to make ``fae replay`` start a program or send a task to a URL of its choosing.
    """
    kind = config.get("kind")
    if agent is not None:
        model = config.get("model")
        chosen = build_agent(agent, model=model if isinstance(model, str) else None)
        if chosen.config().get("kind") != kind:
            raise PlanError(
                f"run was played by a {kind or 'unknown'} agent; --agent {agent!r} is a "
                f"{chosen.config().get('kind')} agent: name one of the recorded kind"
            )
        return chosen
    if kind in LOG_NAMED and not trust_log:
        what = "cmd:COMMAND" if kind == "command" else "a2a:URL"
        raise PlanError(
            f"the run's agent {LOG_NAMED[kind]} its log names ({_named(config)}); fae replay does not start a "
            f"program or contact a server because a log says so: name it again with --agent '{what}', or pass "
            "--trust-log-agent if you trust whoever wrote this log"
        )
    return agent_from_config(config, name)


def agent_from_config(config: dict[str, Any], name: str = "") -> Agent:
    """The agent a stored ``agent_config`` describes, rebuilt from this code (LangChain and program agents)."""
    if config.get("kind") == "command":
        return command_agent_from_config(name, config)
    if config.get("kind") == "a2a":
        return a2a_agent_from_config(name, config)
    if config.get("kind") != "langchain":
        raise ReplayDrift(
            f"fae replay re-drives scripted, langchain, cmd and a2a runs, not {config.get('kind') or 'unknown'} agents"
        )
    from fae.agents.langchain_agent import OMIT, PREFIX, build_langchain_agent

    agent = build_langchain_agent(
        f"{PREFIX}{config.get('configuration')}@{config.get('model')}",
        api_key="fae-replay",
        timeout_s=config.get("timeout_s"),
        max_retries=config.get("max_retries"),
        tool_choice=str(config.get("tool_choice", OMIT)),  # a run recorded before tool_choice was sent sent none
    )
    if isinstance(config.get("max_iterations"), int):
        agent.max_iterations = config["max_iterations"]
    return agent


class ReplayedAgent:
    """An agent re-driven from a recording: its own configuration plus where it was replayed from."""

    def __init__(self, agent: Agent, replay_of: dict[str, Any]) -> None:
        self.agent = agent
        self.name = agent.name
        self.replay_of = replay_of
        self.required_mcp: tuple[str, ...] = tuple(getattr(agent, "required_mcp", ()))
        self.upstreams: dict[str, str] = dict(getattr(agent, "upstreams", {}))

    def config(self) -> dict[str, Any]:
        return {**self.agent.config(), "replay_of": self.replay_of}

    async def run(self, ctx: AgentContext) -> AgentResult:
        return await self.agent.run(ctx)


def _missing_stores(agent: ReplayedAgent, memory_stores: Mapping[str, Path]) -> list[str]:
    return [
        server.removeprefix("memory:")
        for server in agent.required_mcp
        if server.startswith("memory:") and server.removeprefix("memory:") not in memory_stores
    ]


def _next_replay_id(stack: Any, run_id: str) -> str:
    _, rows = stack.log.query("SELECT count(*) FROM runs WHERE starts_with(run_id, ?)", [f"{run_id}.replay"])
    return f"{run_id}.replay{rows[0][0] + 1}"


async def replay_llm(
    recording: LlmRecording,
    out: str | Path,
    *,
    strict: bool = True,
    warn: Callable[[Divergence], None] | None = None,
    memory_stores: Mapping[str, Path] | None = None,
    on_stage: Callable[[str], None] | None = None,
    agent: str | None = None,
    trust_log: bool = False,
) -> ReplayReport:
    """Re-drive an LLM-agent run through the recording stack into ``out``, its model answered by the cassette;
    ``on_stage`` is told ``re-driving`` once the stack is up and ``comparing`` once the run is recorded;
    ``agent`` and ``trust_log`` as ``replay_agent`` takes them."""
    stage = on_stage or (lambda name: None)
    from fae.fhir.engine import FhirEngine
    from fae.harness.run import RunSpec, execute_run
    from fae.harness.stack import open_stack
    from fae.replay.source import load_run

    policy = Policy.STOP if strict else Policy.PLAY_NEXT
    report = ReplayReport(recording.run_id, out=str(out), llm_calls=len(recording.calls))

    def missed(miss: Miss) -> None:
        if not strict and warn:
            warn(_miss_divergence(miss))

    cassette = Cassette(recording.calls, policy, on_miss=missed)
    config = {k: v for k, v in recording.agent_config.items() if k != "replay_of"}
    replayed_agent = ReplayedAgent(
        replay_agent(config, recording.agent, agent=agent, trust_log=trust_log),
        {
            "run_id": recording.run_id,
            "log": recording.log,
            "policy": policy.value,
            "request_key": "fae.replay.cassette.request_key",
        },
    )
    stores = dict(memory_stores or {})
    missing = _missing_stores(replayed_agent, stores)
    if missing:
        raise ReplayDrift(
            f"agent {replayed_agent.name} needs the memory store(s) {', '.join(missing)}: "
            f"give them as --memory {missing[0]}=DIR",
            run_id=recording.run_id,
        )
    engine = FhirEngine(id_factory=recorded_id_factory(recording.created_ids))
    # the cassette is the stack's own LLM: like its FHIR and MCP servers it answers only the proxy
    async with open_stack(
        out,
        StackConfig(memory_stores=stores),
        llm_app=cassette.app(),
        fhir_engine=engine,
        agent_upstreams=declared_upstreams([replayed_agent]),  # an A2A agent's server, reached through the proxy again
    ) as stack:
        replay_id = _next_replay_id(stack, recording.run_id)
        stage("re-driving")
        spec = RunSpec(
            run_id=replay_id,
            task_id=recording.task_id,
            variation=recording.variation,
            agent=recording.agent,
            repeat=recording.repeat,
        )
        await execute_run(stack, spec, recording.task, replayed_agent)
        await stack.writer.flush()
        stage("comparing")
        replayed = fold_transcript(load_run(stack.log, replay_id))
    report.replay_run_id = replay_id
    report.llm_played = len(recording.calls) - len(cassette.unplayed())
    report.answer = replayed.answer
    found = [_miss_divergence(m) for m in cassette.misses]
    found += _compare_calls(recording.transcript, replayed, report)
    if replayed.answer != recording.transcript.answer:
        found.append(Divergence(-1, None, "the answer", recording.transcript.answer, replayed.answer))
    if not cassette.misses:
        found += [
            Divergence(c.index, c.seq, "a recorded LLM call nobody asked for", {"path": c.path}, None, unit="LLM call")
            for c in cassette.unplayed()
        ]
    report.divergences = found
    if strict and found:
        raise ReplayDrift(
            f"replay diverged at {found[0].describe()} (replayed as {replay_id} in {out})",
            run_id=recording.run_id,
            seq=found[0].seq,
        )
    if warn:
        for divergence in found[len(cassette.misses) :]:
            warn(divergence)
    return report


def _miss_divergence(miss: Miss) -> Divergence:
    if miss.expected is None:
        return Divergence(
            miss.request,
            None,
            "an extra request (the recording has no more calls)",
            None,
            miss.replayed,
            unit="LLM call",
        )
    return Divergence(
        miss.request, miss.expected.seq, f"the request at {miss.where}", miss.recorded, miss.replayed, unit="LLM call"
    )


def _compare_calls(recorded: Transcript, replayed: Transcript, report: ReplayReport) -> list[Divergence]:
    """The tool calls of both plays, matched in order by ``call_key``."""
    found: list[Divergence] = []
    report.calls = len(replayed.tool_calls)
    for index in range(max(len(recorded.tool_calls), len(replayed.tool_calls))):
        was = recorded.tool_calls[index] if index < len(recorded.tool_calls) else None
        now = replayed.tool_calls[index] if index < len(replayed.tool_calls) else None
        if was is None and now is not None:
            found.append(Divergence(index, None, "an extra call", None, {"tool": now.tool, "arguments": now.arguments}))
        elif now is None and was is not None:
            found.append(
                Divergence(index, was.seq, "a missing call", {"tool": was.tool, "arguments": was.arguments}, None)
            )
        elif was is not None and now is not None:
            if call_key(was.tool, was.arguments) != call_key(now.tool, now.arguments):
                found.append(
                    Divergence(
                        index,
                        was.seq,
                        "the call",
                        {"tool": was.tool, "arguments": was.arguments},
                        {"tool": now.tool, "arguments": now.arguments},
                    )
                )
            else:
                report.matched += 1
    return found
