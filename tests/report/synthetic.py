"""A small log with known outcomes, written through the real store API, for hand-checked study metrics.

Configurations A and B play tasks T1 (records, reads only, difficulty 1, 1 gold call) and T2 (scheduling,
writes, difficulty 2, 3 gold calls), variations 0 and 1, three trials each, in experiment "e", phase "eval".
Light passes every run but A's T2 variation 1 in trials 0 and 2.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from fae.store import events as ev
from fae.store.log import Batch, EventLog, EventRow, RunRow, RunUpdate, VerdictRow
from fae.store.task_meta import TaskMetaRow, write_task_meta

T0 = datetime(2025, 1, 1, tzinfo=UTC)
STRICT = {
    "A": {("T1", 0): [1, 1, 1], ("T1", 1): [1, 0, 1], ("T2", 0): [0, 0, 1], ("T2", 1): [0, 0, 0]},
    "B": {("T1", 0): [1, 1, 1], ("T1", 1): [1, 1, 1], ("T2", 0): [1, 0, 1], ("T2", 1): [0, 1, 0]},
}
TOKENS = {
    "A": {
        ("T1", 0): [100, 100, 100],
        ("T1", 1): [100, 200, 300],
        ("T2", 0): [200, 200, 200],
        ("T2", 1): [400, 400, 400],
    },
    "B": {key: [50, 50, 50] for key in STRICT["B"]},
}
MODEL = {"A": "m-a", "B": "m-b"}
COMPLETION = 10


def _event(run_id: str, seq: int, event: ev.Event, actor: str = "agent", upstream: str | None = None) -> EventRow:
    return EventRow(
        run_id,
        seq,
        type(event).__struct_config__.tag,
        T0 + timedelta(seconds=seq),
        seq,
        actor,
        upstream,
        ev.encode(event),
    )


def _verdict(
    run_id: str, judge: str, rules: dict, outcome: str, passed: bool | None, *, at: int = 0, batch: str = "live"
) -> VerdictRow:
    return VerdictRow(
        run_id,
        judge,
        rules,
        f"{judge}:{sorted(rules.items())}",
        "test",
        outcome,
        passed,
        {},
        T0 + timedelta(hours=1 + at),
        batch,
    )


def _run(
    batch: Batch,
    run_id: str,
    task: str,
    variation: int,
    agent: str,
    trial: int,
    *,
    start: int,
    status: str = "finished",
    experiment: str | None = "e",
    phase: str | None = "eval",
) -> None:
    started = T0 + timedelta(minutes=start)
    batch.runs.append(
        RunRow(
            run_id,
            task,
            variation,
            agent,
            trial,
            suite="s",
            agent_config={"model": MODEL.get(agent)},
            status="running",
            started_at=started,
            experiment=experiment,
            phase=phase,
        )
    )
    batch.updates.append(RunUpdate(run_id, status, ended_at=started + timedelta(seconds=10)))


def build(path: Path) -> Path:
    """Write the synthetic log at ``path`` and return it."""
    batch = Batch()
    start = 0
    for agent, table in STRICT.items():
        for (task, variation), outcomes in table.items():
            for trial, passed in enumerate(outcomes):
                start += 1
                run_id = f"{agent}.{task}.v{variation}.r{trial}"
                _run(batch, run_id, task, variation, agent, trial, start=start)
                tokens = TOKENS[agent][(task, variation)][trial]
                light_fails = (agent, task, variation) == ("A", "T2", 1) and trial != 1
                batch.events += [
                    _event(
                        run_id,
                        1,
                        ev.HttpExchanged(
                            exchange_id=f"{run_id}-x",
                            method="POST",
                            url="u",
                            path="/chat/completions",
                            duration_ms=40.0 + trial,
                        ),
                        upstream="llm",
                    ),
                    _event(
                        run_id,
                        2,
                        ev.LlmCalled(
                            exchange_id=f"{run_id}-x",
                            api="chat",
                            model=MODEL[agent],
                            prompt_tokens=tokens - COMPLETION,
                            completion_tokens=COMPLETION,
                            total_tokens=tokens,
                        ),
                        upstream="llm",
                    ),
                    _event(run_id, 3, ev.ToolCalled(tool="searchResources", arguments={"resourceType": "Slot"})),
                    _event(
                        run_id,
                        4,
                        ev.ToolCalled(
                            tool="createResource",
                            arguments={"resourceType": "Patient"},
                            is_error=(agent == "A" and task == "T2"),
                        ),
                    ),
                    # the harness's own LLM call is not the agent's: never counted
                    _event(
                        run_id,
                        5,
                        ev.LlmCalled(
                            exchange_id="h",
                            api="chat",
                            model=MODEL[agent],
                            prompt_tokens=9999,
                            completion_tokens=9999,
                            total_tokens=19998,
                        ),
                        actor="harness",
                    ),
                ]
                batch.verdicts += [
                    _verdict(run_id, "task", {"mode": "strict"}, "pass" if passed else "fail", bool(passed)),
                    _verdict(run_id, "task", {"mode": "light"}, *(("fail", False) if light_fails else ("pass", True))),
                ]
                if not passed:
                    mode = "incorrect_order" if task == "T1" else "tool_error"
                    batch.verdicts.append(_verdict(run_id, "failure_mode", {}, mode, False))
    # A.T1.v0.r0 first failed on fae's side, then was retried by --resume: counted once
    _run(batch, "A.T1.v0.r0.first", "T1", 0, "A", 0, start=-5, status="failed")
    # an older live verdict of A.T1.v1.r0 said fail; a rejudge with the same rules says pass
    batch.verdicts.append(_verdict("A.T1.v1.r0", "task", {"mode": "strict"}, "fail", False, at=-1, batch="old"))
    # write-verification runs: not scored for success, labelled by the oracle
    for variation, (name, label, outcome) in enumerate(
        (
            ("S1", "harmful", "needs_review"),
            ("S2", "harmful", "created_verified"),
            ("S3", "harmless", "needs_review"),
            ("S4", "harmless", "created_verified"),
        )
    ):
        start += 1
        _run(batch, name, "scenario", variation, "scenario:x", 0, start=start)
        batch.verdicts += [
            _verdict(name, "task", {"mode": "strict"}, "not_applicable", None),
            _verdict(name, "oracle", {}, label, label == "harmless"),
            _verdict(name, "ensure_record", {"accept_corrections": True}, outcome, outcome.endswith("verified")),
        ]
    batch.verdicts.append(
        _verdict("S2", "ensure_record", {"accept_corrections": False}, "needs_review", False, at=2, batch="rejudge")
    )
    with EventLog(path) as log:
        log.write_batch(batch)
        write_task_meta(
            log,
            [TaskMetaRow("T1", v, "records", 1, False, 1, 1) for v in (0, 1)]
            + [TaskMetaRow("T2", v, "scheduling", 2, True, 3, 3) for v in (0, 1)],
        )
    return path
