"""Re-drive a recorded scripted run against a fresh sandbox and stop (or warn) where it diverges.

The sandbox is an embedded FHIR engine seeded from the recorded seed, in
process, with no network: the agent's plan is played through the same FHIR
tool functions the MCP server exposes, and each call is matched against the
recorded one by ``call_key``. New resources get the ids the recording gave
them, in order, so later calls that name them match. Strict (the default)
raises ``ReplayDrift`` at the first divergence; lenient records it and goes on.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from fae.agents.plan import Plan
from fae.agents.scripted import PlanRun, ToolOutcome, run_plan
from fae.errors import PlanError, ReplayDrift
from fae.replay.drift import captured_resources, state_drift
from fae.replay.fold import fhir_exchanges, parse_json
from fae.replay.source import RunLog
from fae.replay.transcript import fold_transcript
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


@dataclass(frozen=True)
class Divergence:
    """Where the replay left the recording: which call (or the answer, or the state), and how."""

    index: int
    seq: int | None
    what: str
    recorded: Any
    replayed: Any

    def describe(self) -> str:
        where = f"call {self.index + 1}" + (f" (event {self.seq})" if self.seq else "") if self.index >= 0 else self.what
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


async def replay_scripted(run: RunLog, plan: Plan, *, strict: bool = True,
                          warn: Callable[[Divergence], None] | None = None) -> ReplayReport:
    """Play ``plan`` again on the run's recorded seed and match every call, the answer and the final state."""
    from fae.fhir.app import create_app
    from fae.fhir.engine import FhirEngine
    from fae.mcp import fhir_tools

    seeded = run.first(ev.SandboxSeeded)
    if seeded is None or not isinstance(seeded.event, ev.SandboxSeeded) or not seeded.event.seed_blob:
        raise ReplayDrift("the run has no recorded seed to replay from", run_id=run.run_id)
    seed = parse_json(run.body(seeded.event.seed_blob))
    given_ids = iter([x.resource_id for x in fhir_exchanges(run)
                      if x.interaction == "create" and x.ok and x.resource_id])
    engine = FhirEngine(id_factory=lambda: next(given_ids, None) or str(uuid.uuid4()))
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
            if not callable(tool) or name.startswith("_"):
                raise ReplayDrift(f"tool {name!r} is not one of the FHIR tools replay can drive", run_id=run.run_id)
            result = await tool(client, **args)
            outcome = ToolOutcome(result=result, is_error=fhir_tools.is_error_result(result))
            if index >= len(recorded.tool_calls):
                diverged(Divergence(index, None, "an extra call", None, {"tool": name, "arguments": args}))
                return outcome
            was = recorded.tool_calls[index]
            if call_key(was.tool, was.arguments) != call_key(name, args):
                diverged(Divergence(index, was.seq, "the call", {"tool": was.tool, "arguments": was.arguments},
                                    {"tool": name, "arguments": args}))
            elif normalise(was.result) != normalise(result):
                diverged(Divergence(index, was.seq, "the result", was.result, result))
            else:
                report.matched += 1
            return outcome

        async def call_http(actor: str, via: str, method: str, path: str, body: Any) -> Any:
            reply = await client.request(method.upper(), path.lstrip("/"),
                                         content=json.dumps(body).encode() if body is not None else None,
                                         headers={"content-type": "application/fhir+json"})
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
        from fae.replay.fold import FoldedState, Version

        state = FoldedState(engine.resources(sid))
        for resource in engine.resources(sid):
            version = str((resource.get("meta") or {}).get("versionId", "1"))
            if version != "1":
                state.apply(Version(resource["resourceType"], resource["id"], version, resource, 0, None, None))
        differences = state_drift(state, capture[1])
        if differences:
            diverged(Divergence(-1, capture[0], "the final state", [d["ref"] for d in differences], differences))
    return report
