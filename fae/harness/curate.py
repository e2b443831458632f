"""The soft validator: an LLM judge that checks the deterministic validator, for task curation.

It reads the task definition, the run's tool calls and answer, and the strict
validator's verdict, and labels the pair ``agreement``, ``validator_too_strict``
(the agent did the task, the validator failed it) or ``validator_too_loose``
(the validator passed a run that did not do the task). The call goes through
the recording proxy as the run's ``verifier``, so it is in the log; the label
is a verdict row (judge ``soft``) whose evidence names the recorded exchange
and the prompt's hash. Curating again finds that verdict, reads the recorded
reply from the log and appends a new row without calling the model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec

from fae.errors import FaeError, JudgeError, StoreError
from fae.harness.config import StackConfig
from fae.judge.context import RunContext
from fae.memory.reflexion import RunView, chat, parse_json_reply, trajectory_text
from fae.recorder.llm import llm_in_full
from fae.store import events as ev
from fae.store.log import Batch, EventLog, VerdictRow

JUDGE_NAME = "soft"
LABELS = ("agreement", "validator_too_strict", "validator_too_loose")
PROMPT_VERSION = 1
CODE_VERSION = "curate-1"
ACTOR = "verifier"
RECORD_WAIT_S = 10.0
SYSTEM = (
    "You audit a deterministic validator of a FHIR agent benchmark. Given the task definition, "
    "what the agent did and the validator's verdict, decide whether the verdict is right. Reply "
    'with JSON only: {"label": "agreement" | "validator_too_strict" | "validator_too_loose", '
    '"reason": "..."}.'
)


@dataclass(frozen=True)
class Pending:
    """One run to label: its prompt, the deterministic verdict, and an earlier recorded reply if any."""

    run_id: str
    prompt: str
    prompt_hash: str
    strict_passed: bool | None
    recorded: tuple[str, str] | None  # (exchange_id, reply content) from an earlier curation


@dataclass
class CurateResult:
    rows: list[VerdictRow] = field(default_factory=list)
    called: int = 0
    reused: int = 0
    task_changed: list[str] = field(default_factory=list)  # runs not labelled: they played another task rendering


def task_definition(task_id: str, variation: int) -> dict[str, Any]:
    """The task as the judge sees it: its description, this variation's prompt and check spec."""
    from fae.judge.context import rendered_task

    found = rendered_task(task_id, variation)
    if found is None:
        return {"task_id": task_id, "variation": variation, "note": "not in the task suite"}
    task, rendered = found
    return {
        **task.describe(),
        "variation": variation,
        "prompt": rendered.prompt,
        "check": msgspec.to_builtins(rendered.check_spec),
    }


def judge_prompt(definition: dict[str, Any], trajectory: str) -> str:
    return (
        "TASK DEFINITION:\n"
        + json.dumps(definition, sort_keys=True, ensure_ascii=False, default=str)
        + "\n\nRUN:\n"
        + trajectory
    )


def prompt_hash(model: str, prompt: str) -> str:
    return hashlib.sha256(json.dumps([PROMPT_VERSION, model, SYSTEM, prompt]).encode()).hexdigest()


def rule_set(model: str) -> dict[str, Any]:
    return {"model": model, "prompt_version": PROMPT_VERSION}


def _rule_set_hash(rules: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(rules, sort_keys=True).encode()).hexdigest()[:16]


def _recorded_reply(log: Any, run_id: str, digest: str) -> tuple[str, str] | None:
    """The exchange and reply of an earlier soft verdict with this prompt hash, read from the log."""
    _, rows = log.query(
        "SELECT evidence FROM verdicts WHERE run_id = ? AND judge = ? ORDER BY judged_at DESC", [run_id, JUDGE_NAME]
    )
    for (evidence,) in rows:
        data = json.loads(evidence) if isinstance(evidence, str) else evidence
        if data.get("prompt_hash") != digest or not data.get("exchange_id"):
            continue
        content = _llm_content(log, run_id, data["exchange_id"])
        if content is not None:
            return data["exchange_id"], content
    return None


def _llm_content(log: Any, run_id: str, exchange_id: str) -> str | None:
    _, rows = log.query("SELECT payload FROM events WHERE run_id = ? AND kind = 'LlmCalled' ORDER BY seq", [run_id])
    for (payload,) in rows:
        event = ev.decode(payload)
        if isinstance(event, ev.LlmCalled) and event.exchange_id == exchange_id:
            return llm_in_full(event, log.blob).content
    return None


def _verifier_calls(log: Any, run_id: str) -> list[tuple[int, bytes | str]]:
    _, rows = log.query(
        "SELECT seq, payload FROM events WHERE run_id = ? AND kind = 'LlmCalled' AND actor = ? ORDER BY seq",
        [run_id, ACTOR],
    )
    return rows


async def _recorded_call(log: Any, run_id: str, after_seq: int) -> tuple[str, str | None]:
    """The judge call just sent, once the recorder has committed it (it may land just after the reply)."""
    import anyio

    with anyio.move_on_after(RECORD_WAIT_S):
        while True:
            newer = [(seq, payload) for seq, payload in _verifier_calls(log, run_id) if seq > after_seq]
            if newer:
                event = ev.decode(newer[0][1])
                assert isinstance(event, ev.LlmCalled)
                return event.exchange_id, llm_in_full(event, log.blob).content
            await anyio.sleep(0.02)
    raise StoreError("the judge's LLM call is not in the log: did it bypass the recording proxy?", run_id=run_id)


def prepare(log: Any, run_ids: list[str], model: str, task_changed: list[str] | None = None) -> list[Pending]:
    """Build each run's judge prompt and find replies recorded by an earlier curation.

    A run that played another rendering of its task than fae renders now has no strict verdict to audit, and
    today's task definition is not what it was asked: it is left out, its id added to ``task_changed``.
    """
    from fae.judge.rejudge import judge_run, judges_to_run
    from fae.replay.source import load_runs
    from fae.replay.transcript import fold_transcript

    plan = judges_to_run("task", {"mode": "strict"})
    pending = []
    for run in load_runs(log, run_ids):
        verdict = judge_run(run, plan, judged_at=datetime(1970, 1, 1, tzinfo=UTC))[0]
        try:
            kept = RunContext(run).kept
        except FaeError:  # an unreadable kept task: its strict verdict already says so
            kept = None
        if verdict.outcome == "task_changed":
            if task_changed is not None:
                task_changed.append(run.run_id)
            continue
        transcript = fold_transcript(run)
        started = next((r.event for r in run.events if isinstance(r.event, ev.RunStarted)), None)
        view = RunView(
            run_id=run.run_id,
            task_id=run.task_id,
            prompt=(started.prompt if started else "") or "",
            tool_calls=tuple((c.tool, c.arguments, c.result, c.is_error) for c in transcript.tool_calls),
            answer=transcript.answer,
            stop_reason=transcript.stop_reason,
            passed=verdict.passed,
            reasons=tuple(str(r) for r in (verdict.evidence or {}).get("reasons", [])),
        )
        definition = (
            {
                **kept.describe(),
                "variation": run.variation,
                "prompt": kept.played.prompt,
                "check": msgspec.to_builtins(kept.check_spec),
            }
            if kept is not None and kept.meta is not None
            else task_definition(run.task_id, run.variation)
        )
        text = judge_prompt(definition, trajectory_text(view))
        digest = prompt_hash(model, text)
        pending.append(Pending(run.run_id, text, digest, verdict.passed, _recorded_reply(log, run.run_id, digest)))
    return pending


def label_row(
    item: Pending, model: str, exchange_id: str, content: str | None, *, reused: bool, judged_at: datetime
) -> VerdictRow:
    """The soft verdict for one run from the judge's reply (an unreadable reply is outcome ``error``)."""
    rules = rule_set(model)
    evidence: dict[str, Any] = {
        "exchange_id": exchange_id,
        "prompt_hash": item.prompt_hash,
        "strict_passed": item.strict_passed,
        "reused": reused,
    }
    try:
        data = parse_json_reply(content)
        label = data.get("label")
        if label not in LABELS:
            raise ValueError(f"label {label!r} is not one of {', '.join(LABELS)}")
        outcome, evidence["reason"] = label, str(data.get("reason", ""))
    except ValueError as exc:
        outcome, evidence["error"] = "error", str(exc)
    return VerdictRow(
        run_id=item.run_id,
        judge=JUDGE_NAME,
        rule_set=rules,
        rule_set_hash=_rule_set_hash(rules),
        code_version=CODE_VERSION,
        outcome=outcome,
        passed=None if outcome == "error" else outcome == "agreement",
        evidence=evidence,
        judged_at=judged_at,
    )


async def curate_log(
    log_path: str | Path,
    *,
    runs: str | None = None,
    llm_url: str | None = None,
    model: str = "scripted:judge",
    api_key: str | None = None,
    clock: Callable[[], datetime] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> CurateResult:
    """Label every finished run of a log that matches ``runs``; returns the verdict rows written.

    ``on_progress(done, total)`` is called as runs are labelled.
    """
    from fae.replay.source import run_ids as find_runs

    path = Path(log_path)
    if not path.exists():
        raise StoreError(f"no log at {path}")
    now = (clock or (lambda: datetime.now(UTC)))()
    result = CurateResult()
    with EventLog(path) as log:
        ids = find_runs(log, runs, statuses=("finished", "errored"))
        if not ids:
            raise JudgeError(f"no finished runs in {path}" + (f" match {runs!r}" if runs else ""))
        pending = prepare(log, ids, model, result.task_changed)
        if not pending:
            raise JudgeError(
                f"no run to label in {path}: each of the {len(ids)} played another rendering of its "
                "task than this fae renders (task_changed, docs/judging.md)"
            )
        for item in pending:
            if item.recorded is not None:
                result.rows.append(label_row(item, model, *item.recorded, reused=True, judged_at=now))
                result.reused += 1
        fresh = [item for item in pending if item.recorded is None]
        if on_progress is not None:
            on_progress(result.reused, len(pending))
        if not fresh:
            log.write_batch(Batch(verdicts=result.rows))
            return result
        if not llm_url:
            raise JudgeError(f"{len(fresh)} runs have no recorded soft verdict: give --llm-url to ask the judge")
        log.write_batch(Batch(verdicts=result.rows))
    await _ask(
        path,
        fresh,
        llm_url=llm_url,
        model=model,
        api_key=api_key,
        now=now,
        result=result,
        on_progress=(lambda done: on_progress(result.reused + done, len(pending))) if on_progress else None,
    )
    return result


async def _ask(
    path: Path,
    fresh: list[Pending],
    *,
    llm_url: str,
    model: str,
    api_key: str | None,
    now: datetime,
    result: CurateResult,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Ask the judge through the recording proxy, one run at a time, and write each label."""
    from fae.harness.stack import open_stack

    async with open_stack(path, StackConfig(llm_url=llm_url)) as stack, httpx.AsyncClient(timeout=120) as client:
        for item in fresh:
            base = stack.llm_base(item.run_id, ACTOR)
            if base is None:
                raise JudgeError("the soft judge needs an LLM URL to ask", run_id=item.run_id)
            before = max((seq for seq, _ in _verifier_calls(stack.log, item.run_id)), default=0)
            try:
                await chat(client, base, model, SYSTEM, item.prompt, api_key=api_key)
            except (FaeError, httpx.HTTPError) as exc:
                raise JudgeError(f"the soft judge could not be asked: {exc}", run_id=item.run_id) from None
            exchange_id, content = await _recorded_call(stack.log, item.run_id, before)
            row = label_row(item, model, exchange_id, content, reused=False, judged_at=now)
            await stack.writer.write(verdicts=[row])
            result.rows.append(row)
            result.called += 1
            if on_progress is not None:
                on_progress(result.called)


def as_dict(row: VerdictRow) -> dict[str, Any]:
    return {"run_id": row.run_id, "outcome": row.outcome, **msgspec.to_builtins(row.evidence)}
