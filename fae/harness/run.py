"""One recorded run: seed a sandbox, let the agent work, capture the state, close the run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx

from fae.agents.base import Agent, AgentContext, AgentError, AgentResult, Record
from fae.errors import FaeError, PlanError
from fae.fhir.audit import IDENTITY_HEADER
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import Paraphrases, play_paraphrase
from fae.harness.settle import default_settle_s, settle
from fae.harness.stack import Stack, sandbox_id
from fae.harness.world import World
from fae.mcp.fhir_links import link_url, rebase_link, server_base_path
from fae.plan import HTTP_ACTORS
from fae.store import events as ev
from fae.store.log import FactsRow, RunRow, RunUpdate, VerdictRow, blob_hash
from fae.store.writer import Stamped
from fae.tasks import judged
from fae.tasks.model import seed_body
from fae.tasks.scenarios import scenario_faults
from fae.util.tls import client_tls

CAPTURE_PAGE = 500
CAPTURE_MAX_PAGES = 200
# Records the server makes about the run, not state anyone wrote: read apart (read_audit_trail).
SERVER_RECORDS = ("AuditEvent",)


@dataclass(frozen=True)
class RunSpec:
    """One planned run: a task variation played by an agent, the n-th time."""

    run_id: str
    task_id: str
    variation: int
    agent: str
    repeat: int
    suite: str | None = None
    experiment: str | None = None
    phase: str | None = None


def _now() -> datetime:
    return datetime.now(UTC)


async def _seed(stack: Stack, client: httpx.AsyncClient, spec: RunSpec, bundle: dict[str, Any]) -> None:
    body = seed_body(bundle)
    if stack.embedded:
        sid = sandbox_id(spec.run_id)
        url = stack.fhir_root(spec.run_id, "setup") + f"sandbox?id={sid}"
        reply = await client.post(url, content=body, headers={"content-type": "application/json"})
        if reply.status_code == 409:  # a retried run reuses its id: start it clean
            await client.delete(stack.fhir_root(spec.run_id, "setup") + f"sandbox/{sid}")
            reply = await client.post(url, content=body, headers={"content-type": "application/json"})
    else:
        await reset_external(stack, client, spec.run_id)
        reply = await client.post(
            stack.fhir_base(spec.run_id, "setup"),
            content=body,
            headers={"content-type": "application/fhir+json", **_identity(stack, "setup")},
        )
    if reply.status_code >= 300:
        raise FaeError(
            f"seeding the sandbox failed with HTTP {reply.status_code}: {reply.text[:300]}", run_id=spec.run_id
        )
    count = len(bundle.get("entry") or [])
    digest = blob_hash(body)
    await stack.writer.write(
        events=[
            Stamped(
                spec.run_id,
                ev.SandboxSeeded(
                    sandbox=sandbox_id(spec.run_id) if stack.embedded else "external",
                    fhir_base=stack.fhir_base(spec.run_id, "agent"),
                    resource_count=count,
                    seed_blob=digest,
                ),
                actor="harness",
            )
        ],
        blobs={digest: body},
    )


RESET_MAX_PASSES = 10


async def reset_external(stack: Stack, client: httpx.AsyncClient, run_id: str) -> None:
    """Empty an external server through the proxy, as the setup actor, before a run is seeded.

    Runs on an external server are serialised (one sandbox). Deletes that a server refuses
    because another resource still refers to the target succeed on a later pass.
    """
    base = stack.fhir_base(run_id, "setup").rstrip("/")
    for _ in range(RESET_MAX_PASSES):
        remaining = await capture_state(stack, client, run_id, actor="setup")
        if not remaining:
            return
        deleted = 0
        for resource in remaining:
            reply = await client.delete(f"{base}/{resource['resourceType']}/{resource['id']}")
            deleted += reply.status_code < 300
        if not deleted:
            break
    left = await capture_state(stack, client, run_id, actor="setup")
    if left:
        raise FaeError(
            f"could not empty the external FHIR server: {len(left)} resources remain "
            f"(e.g. {left[0]['resourceType']}/{left[0]['id']})",
            run_id=run_id,
        )


def _identity(stack: Stack, actor: str) -> dict[str, str]:
    """The identity header the harness and setup present where the server keeps a trail, so the
    trail names them and the judge can leave their own reads out."""
    return {IDENTITY_HEADER: actor} if stack.audit_events else {}


async def _search_pages(
    stack: Stack, client: httpx.AsyncClient, run_id: str, actor: str, query: str, what: str
) -> list[dict[str, Any]]:
    """The resources of a search through the proxy, page by page, as ``actor``."""
    base = stack.fhir_base(run_id, actor)
    url: str | None = base.rstrip("/") + query
    headers = {"accept": "application/fhir+json", **_identity(stack, actor)}
    resources: list[dict[str, Any]] = []
    search_path = query.lstrip("/").partition("?")[0]  # a resource type, or "" for a system search
    server_base: str | None = None
    for page in range(CAPTURE_MAX_PAGES):
        if url is None:
            break
        reply = await client.get(url, headers=headers)
        if reply.status_code != 200:
            raise FaeError(f"{what} failed with HTTP {reply.status_code}: {reply.text[:300]}", run_id=run_id)
        bundle = reply.json()
        resources.extend(e["resource"] for e in bundle.get("entry") or [] if isinstance(e.get("resource"), dict))
        if page == 0:
            self_link = link_url(bundle, "self")
            if search_path:
                server_base = server_base_path(self_link, reply.url, search_path)
            elif self_link:  # a system search's self link is the server's base itself
                server_base = reply.url.join(self_link).path.rstrip("/")
        nxt = link_url(bundle, "next")
        url = (
            str(
                rebase_link(
                    nxt,
                    client_base=httpx.URL(base),
                    request_url=reply.url,
                    # a system search has no type segment to find in a foreign link
                    search_path=search_path or "_",
                    server_base_path=server_base,
                )
            )
            if nxt
            else None
        )
    return resources


async def capture_state(
    stack: Stack, client: httpx.AsyncClient, run_id: str, actor: str = "harness"
) -> list[dict[str, Any]]:
    """Every current resource in the run's sandbox, read through the proxy (as the harness by default).

    Where the server keeps an AuditEvent trail, its AuditEvents are left out: they are the
    server's record of the run, read apart by ``read_audit_trail``, and no task writes them.
    """
    found = await _search_pages(stack, client, run_id, actor, f"?_count={CAPTURE_PAGE}", "state capture")
    resources = [r for r in found if not (stack.audit_events and r.get("resourceType") in SERVER_RECORDS)]
    resources.sort(key=lambda r: (r.get("resourceType", ""), r.get("id", "")))
    return resources


async def read_audit_trail(stack: Stack, client: httpx.AsyncClient, run_id: str, since: datetime) -> int:
    """Read the server's AuditEvent trail through the proxy as the harness, so the log holds it.

    The reads are the record (``fae.judge.trail.recorded_audit_events`` finds them). An external
    server is shared by the runs one after another, so only events from the run's start are asked for.
    """
    query = f"AuditEvent?_count={CAPTURE_PAGE}"
    if not stack.embedded:
        query += "&date=ge" + since.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return len(await _search_pages(stack, client, run_id, "harness", "/" + query, "reading the AuditEvent trail"))


async def _judge_live(stack: Stack, run_id: str) -> tuple[list[VerdictRow], list[FactsRow]]:
    """The run's verdicts against its live capture with the default rules; same code as `fae rejudge`.

    They are written with the run's close (``_close_run``), in the same batch as its final status, so a run
    killed or stopped between its judging and its close has no verdict in the log, and a judged one has its own.
    """
    import anyio.to_thread

    from fae.judge.rejudge import live_verdicts

    await stack.writer.flush()  # the judge reads the run back from DuckDB
    try:
        rows = await anyio.to_thread.run_sync(lambda: live_verdicts(stack.log, run_id, judged_at=_now()))
    except FaeError:
        raise
    except Exception as exc:  # a judge bug must show on the run, not pass silently
        raise FaeError(f"live judging failed: {_describe(exc)}", run_id=run_id) from None
    return rows


@dataclass
class _Outcome:
    """How a run is ending, and who ended it if it did not finish."""

    status: str = "finished"
    stop_reason: str | None = "answered"
    error: str | None = None
    cause: str | None = None
    verdicts: list[VerdictRow] = field(default_factory=list)  # the live verdicts, written with the run's close
    facts: list[FactsRow] = field(default_factory=list)  # and what the judges found of the run (fae.judge.facts)

    def fail(self, status: str, error: str, cause: str) -> None:
        self.status, self.error, self.cause = status, error, cause


async def _blame(stack: Stack) -> str:
    """Who a harness-side failure belongs to: the stack if a part of it stopped answering, else the harness."""
    return "stack" if await stack.unreachable() else "harness"


async def _agent_failed(stack: Stack, outcome: _Outcome, error: str) -> None:
    """The agent raised: its own fault while the stack answers; the stack's when a part of it is down."""
    broken = await stack.unreachable()
    if broken is None:
        outcome.fail("errored", error, "agent")
    else:
        outcome.fail("failed", f"{broken} stopped answering; the agent then failed: {error}", "stack")


async def _play(
    stack: Stack,
    client: httpx.AsyncClient,
    spec: RunSpec,
    rendered: Any,
    agent: Agent,
    paraphrase: Paraphrases | None,
    started: datetime,
    outcome: _Outcome,
    settle_s: float,
) -> None:
    """Seed, let the agent work, wait for the writes to settle, capture the state, judge live."""
    writer = stack.writer
    await _seed(stack, client, spec, rendered.seed_bundle)
    world = World(stack, spec.run_id, spec.task_id, spec.variation)
    stack.proxy.faults.arm(spec.run_id, scenario_faults(spec.agent, spec.variation, spec.task_id), world.after_writes())
    await world.at("start")
    if paraphrase is not None:
        rendered = await play_paraphrase(stack, spec.run_id, rendered, paraphrase)
    ctx = agent_context(stack, spec, rendered, agent)
    try:
        result = await agent.run(ctx)
    except (AgentError, PlanError) as exc:
        result = AgentResult(answer=None, stop_reason="errored")
        await _agent_failed(stack, outcome, str(exc))
    except Exception as exc:  # an agent's own failure ends its run, never the suite
        result = AgentResult(answer=None, stop_reason="errored")
        await _agent_failed(stack, outcome, f"agent failed: {_describe(exc)}")
    outcome.stop_reason = result.stop_reason
    await writer.write(
        events=[Stamped(spec.run_id, ev.AnswerGiven(text=result.answer, stop_reason=result.stop_reason), actor="agent")]
    )
    await world.at("answer")
    stack.proxy.faults.disarm(spec.run_id)
    if world.errors and outcome.status == "finished":
        outcome.fail("failed", f"the case's world could not act: {world.errors[0]}", "harness")
    await settle(stack, spec.run_id, settle_s)
    resources = await capture_state(stack, client, spec.run_id)
    body = json.dumps(resources, sort_keys=True).encode()
    digest = blob_hash(body)
    await writer.write(
        events=[
            Stamped(spec.run_id, ev.StateCaptured(resource_count=len(resources), state_blob=digest), actor="harness")
        ],
        blobs={digest: body},
    )
    if stack.audit_events:
        await read_audit_trail(stack, client, spec.run_id, started)
    outcome.verdicts, outcome.facts = await _judge_live(stack, spec.run_id)


def agent_context(stack: Stack, spec: RunSpec, rendered: Any, agent: Agent) -> AgentContext:
    """What the agent of one run is handed: its own run's endpoints, as the ``agent`` actor, and nothing else.

    Only an agent that plays the other actors of a write-verification scenario (``plays_other_actors``, fae's
    scripted agents) is also given their proxied FHIR bases and the run's base on the server itself with the
    stack key: those reach past the agent's wall, so no program or model-driven agent gets them.
    """
    scenario = bool(getattr(agent, "plays_other_actors", False))
    direct = stack.direct_fhir(spec.run_id) if scenario else None
    return AgentContext(
        run_id=spec.run_id,
        prompt=rendered.prompt,
        now=rendered.now,
        mcp_url=stack.mcp_url(spec.run_id),
        llm_base_url=stack.llm_base(spec.run_id),
        gold_plan=getattr(rendered, "gold_plan", None),
        extra_mcp=stack.extra_mcp(spec.run_id),
        fhir_bases={a: stack.fhir_base(spec.run_id, a) for a in HTTP_ACTORS} if scenario else {},
        fhir_direct=direct[0] if direct else None,
        fhir_direct_headers=direct[1] if direct else {},
        variation=spec.variation,
        upstreams=stack.agent_upstreams(spec.run_id, getattr(agent, "upstreams", {})),
        fhir_base=stack.fhir_base(spec.run_id, "agent")
        if getattr(rendered, "fhir_access", "mcp") == "direct"
        else None,
        record=_agent_record(stack, spec.run_id),
    )


def _agent_record(stack: Stack, run_id: str) -> Record:
    """How the agent adds an event of its own to its run's log: as the ``agent`` actor, through the one writer
    (which scrubs every secret the recording has seen from it)."""

    async def record(event: ev.Event, blobs: dict[str, bytes]) -> None:
        await stack.writer.write(events=[Stamped(run_id, event, actor="agent")], blobs=blobs)

    return record


async def _drop_sandbox(stack: Stack, client: httpx.AsyncClient, spec: RunSpec) -> None:
    """Delete the run's sandbox on the embedded server, whatever became of the run."""
    if stack.embedded:
        try:
            await client.delete(stack.fhir_root(spec.run_id, "harness") + f"sandbox/{sandbox_id(spec.run_id)}")
        except httpx.HTTPError:
            pass  # the stack is going or gone; its sandboxes go with it


async def _close_run(stack: Stack, spec: RunSpec, outcome: _Outcome) -> None:
    from fae.judge.judging import JUDGED_STATUSES

    ended = _now()
    final: ev.Event
    if outcome.status == "finished":
        final = ev.RunFinished(stop_reason=outcome.stop_reason or "answered")
    else:
        final = ev.RunFailed(status=outcome.status, reason=outcome.error or "unknown", cause=outcome.cause)
    await stack.writer.write(
        events=[Stamped(spec.run_id, final, actor="harness", wall_time=ended)],
        updates=[
            RunUpdate(
                run_id=spec.run_id,
                status=outcome.status,
                ended_at=ended,
                stop_reason=outcome.stop_reason,
                error=outcome.error,
                cause=outcome.cause,
            )
        ],
        verdicts=outcome.verdicts if outcome.status in JUDGED_STATUSES else [],
        facts=outcome.facts if outcome.status in JUDGED_STATUSES else [],
    )  # a run stopped or failed: none


async def execute_run(
    stack: Stack,
    spec: RunSpec,
    rendered: Any,
    agent: Agent,
    paraphrase: Paraphrases | None = None,
    stop: StopRequest | None = None,
    settle_s: float | None = None,
) -> str:
    """Record one run from start to close; returns its final status.

    Before its state capture the harness waits ``settle_s`` (default: ensure_record's) after the
    run's last write, so the verifier's read-back lands after the correction window. ``paraphrase``: the
    recording's fixed paraphrases (``fae.harness.paraphrases``); the agent gets its variation's.

    A run that does not finish names its ``cause``: ``agent`` (its own upstream fault; status
    errored), ``harness`` or ``stack`` (status failed), ``signal`` (cancelled by ``stop``; status
    interrupted). Its sandbox is deleted whatever the outcome, and once it has closed every URL it
    was given stops working (``Stack.revoke``).
    """
    started = _now()
    settle_s = default_settle_s() if settle_s is None else settle_s
    task_body = judged.kept_body(rendered, spec.agent)
    kept = (
        []
        if task_body is None
        else [Stamped(spec.run_id, ev.TaskRendered(task_blob=blob_hash(task_body)), actor="harness", wall_time=started)]
    )
    await stack.writer.write(
        runs=[
            RunRow(
                run_id=spec.run_id,
                task_id=spec.task_id,
                variation=spec.variation,
                agent=spec.agent,
                repeat=spec.repeat,
                suite=spec.suite,
                agent_config=agent.config(),
                started_at=started,
                experiment=spec.experiment,
                phase=spec.phase,
            )
        ],
        events=[
            Stamped(
                spec.run_id,
                ev.RunStarted(
                    task_id=spec.task_id,
                    variation=spec.variation,
                    agent=spec.agent,
                    repeat=spec.repeat,
                    agent_config=agent.config(),
                    task_now=rendered.now.isoformat(),
                    prompt=rendered.prompt,
                    settle_s=settle_s,
                    experiment=spec.experiment,
                    phase=spec.phase,
                ),
                actor="harness",
                wall_time=started,
            ),
            *kept,
        ],
        blobs={} if task_body is None else {blob_hash(task_body): task_body},
    )
    outcome = _Outcome()
    try:
        await _play_and_close(stack, spec, rendered, agent, paraphrase, stop, settle_s, started, outcome)
    finally:
        stack.revoke(spec.run_id)
    return outcome.status


async def _play_and_close(
    stack: Stack,
    spec: RunSpec,
    rendered: Any,
    agent: Agent,
    paraphrase: Paraphrases | None,
    stop: StopRequest | None,
    settle_s: float,
    started: datetime,
    outcome: _Outcome,
) -> None:
    try:
        async with httpx.AsyncClient(timeout=60, verify=client_tls()) as client:
            try:
                await _play(stack, client, spec, rendered, agent, paraphrase, started, outcome, settle_s)
            except FaeError as exc:
                outcome.fail("failed", str(exc), await _blame(stack))
            except httpx.HTTPError as exc:
                outcome.fail("failed", f"harness HTTP error: {exc!r}", await _blame(stack))
            await _drop_sandbox(stack, client, spec)
    except anyio.get_cancelled_exc_class():
        reason = stop.reason if stop is not None and stop.requested else "the run was cancelled"
        outcome.fail("interrupted", reason, "signal")
        outcome.stop_reason = None
        with anyio.CancelScope(shield=True):
            await _close_run(stack, spec, outcome)
        raise
    await _close_run(stack, spec, outcome)


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]
