"""A log whose agent-written and log-written values are a given hostile string, on top of the synthetic study log.

``base(path)`` writes the synthetic log of tests/report/synthetic.py once; ``with_values(base, path, text)``
copies it and adds two runs whose every value that an agent, an upstream or a log's author controls is
``text`` behind a one-letter tag (so a test can say which value it finds where):

- ``run`` + text, finished: task ``t``, agent (configuration) ``a``, model ``m``, the LLM's reply ``c``, a
  failed tool call whose arguments hold resource type ``r`` and a note ``g`` and whose result is ``o``, the
  answer ``x``, failure mode ``f``; stored ensure_record verdicts, under the default rules ``v`` and under
  accept_corrections=false ``needs_review``, and an oracle label ``harmful`` (so ``fae compare`` shows the
  run as flipped and the agent in its harms table);
- ``err`` + text, failed with error ``e`` and stop reason ``s``.
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

from fae.judge.judging import judges_to_run
from fae.judge.registry import CODE_VERSION
from fae.store import events as ev
from fae.store.log import Batch, EventLog, RunRow, RunUpdate, VerdictRow
from fae.store.task_meta import TaskMetaRow, write_task_meta
from tests.report.synthetic import T0, _event, _verdict, build

TAGS = {
    "run": "run id",
    "t": "task id",
    "a": "agent",
    "m": "model",
    "c": "LLM reply",
    "r": "resource type",
    "g": "tool argument",
    "o": "tool result",
    "x": "answer",
    "f": "failure mode",
    "v": "stored verdict outcome",
    "err": "run id (failed run)",
    "e": "error text",
    "s": "stop reason",
}


def base(path: Path) -> Path:
    """The synthetic study log (28 runs of two configurations, four write-verification runs)."""
    return build(path)


def _stored(run_id: str, judge: str, overrides: dict, outcome: str, passed: bool | None) -> VerdictRow:
    """A verdict as live judging stores it for this code version, so `fae compare` reads it and judges nothing."""
    judging = judges_to_run(judge, overrides)[0]
    return VerdictRow(
        run_id,
        judge,
        judging.rules,
        judging.rules_hash,
        CODE_VERSION,
        outcome,
        passed,
        {},
        T0 + timedelta(hours=2),
        batch="live",
    )


def with_values(base_log: Path, path: Path, text: str) -> dict[str, str]:
    """Copy ``base_log`` to ``path`` with the two hostile runs added; the stored value behind each tag."""
    shutil.copyfile(base_log, path)
    values = {tag: tag + text for tag in TAGS}
    run_id, failed = values["run"], values["err"]
    batch = Batch()
    batch.runs += [
        RunRow(
            run_id,
            values["t"],
            0,
            values["a"],
            0,
            suite="s",
            agent_config={"model": values["m"]},
            started_at=T0 + timedelta(hours=1),
            experiment="e",
            phase="eval",
        ),
        RunRow(failed, values["t"], 0, values["a"], 1, suite="s", started_at=T0 + timedelta(hours=1, minutes=1)),
    ]
    batch.updates += [
        RunUpdate(run_id, "finished", ended_at=T0 + timedelta(hours=1, seconds=9), stop_reason="answered"),
        RunUpdate(
            failed,
            "failed",
            ended_at=T0 + timedelta(hours=1, minutes=2),
            stop_reason=values["s"],
            error=values["e"],
        ),
    ]
    batch.events += [
        _event(
            run_id,
            1,
            ev.LlmCalled(
                exchange_id="h-x",
                api="chat",
                model=values["m"],
                content=values["c"],
                prompt_tokens=90,
                completion_tokens=10,
                total_tokens=100,
            ),
            upstream="llm",
        ),
        _event(
            run_id,
            2,
            ev.ToolCalled(
                tool="createResource",
                arguments={"resourceType": values["r"], "note": values["g"]},
                result=values["o"],
                is_error=True,
            ),
        ),
        _event(run_id, 3, ev.AnswerGiven(text=values["x"])),
    ]
    batch.verdicts += [
        _verdict(run_id, "task", {"mode": "strict"}, "fail", False),
        _verdict(run_id, "task", {"mode": "light"}, "pass", True),
        _verdict(run_id, "failure_mode", {}, values["f"], False),
        _stored(run_id, "ensure_record", {}, values["v"], True),
        _stored(run_id, "ensure_record", {"accept_corrections": False}, "needs_review", False),
        _stored(run_id, "oracle", {}, "harmful", False),
    ]
    with EventLog(path) as log:
        log.write_batch(batch)
        write_task_meta(log, [TaskMetaRow(values["t"], 0, "records", 1, True, 1, 1)])
    return values
