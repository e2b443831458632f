"""A run's live verdicts are written with its finish, in one batch: a run that never finished has none.

Found under load: an actor killed after a run's judging and before its close left the run interrupted in
its shard with verdicts of its own, which the merge kept beside the retry's. The window is the sandbox's
deletion, a few milliseconds wide; the test stops the run there for certain by standing in for that
deletion with a step that cancels the run's scope, the way a stop request's cancellation reaches a run.
"""

from __future__ import annotations

import anyio
import pytest

import fae.harness.run as run_module
from fae.agents.scripted_agent import ScriptedAgent
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.judge.judging import judges_to_run
from fae.store.log import EventLog
from fae.tasks import load_suite
from tests.run_report import why_not_finished

TASK = "sched-book-appointment"


def _record(log, *, stop_at_drop: bool) -> tuple[str | None, bool]:
    """One gold run; with ``stop_at_drop`` it is cancelled as its sandbox is deleted, after its judging."""
    rendered = load_suite()[TASK].render(1)
    agent = ScriptedAgent(name="scripted:gold", plan=None)
    spec = RunSpec(f"{TASK}.v1.gold", TASK, 1, agent.name, 0)
    status: list[str] = []
    cancelled: list[bool] = []

    async def main() -> None:
        async with open_stack(log) as stack:
            with anyio.CancelScope() as scope:
                if stop_at_drop:

                    async def stopped_while_dropping(*_: object) -> None:
                        scope.cancel()
                        await anyio.sleep(30)  # the cancellation lands at this checkpoint

                    with pytest.MonkeyPatch.context() as patch:
                        patch.setattr(run_module, "_drop_sandbox", stopped_while_dropping)
                        status.append(await execute_run(stack, spec, rendered, agent))
                else:
                    status.append(await execute_run(stack, spec, rendered, agent))
            cancelled.append(scope.cancelled_caught)

    anyio.run(main)
    return (status[0] if status else None), cancelled[0]


def _verdicts_and_status(log) -> tuple[int, str]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT count(*) FROM verdicts WHERE run_id = ?", [f"{TASK}.v1.gold"])
        _, runs = opened.query("SELECT status FROM runs WHERE run_id = ?", [f"{TASK}.v1.gold"])
    return rows[0][0], runs[0][0]


def test_a_run_stopped_after_its_judging_has_no_verdict(tmp_path):
    log = tmp_path / "stopped.duckdb"
    status, cancelled = _record(log, stop_at_drop=True)
    assert status is None and cancelled  # execute_run did not return: the stop reached it
    verdicts, stored = _verdicts_and_status(log)
    assert stored == "interrupted", why_not_finished(log)
    assert verdicts == 0  # its judging had run: the verdicts were held for a finish that never came


def test_a_finished_run_has_its_live_verdicts(tmp_path):
    log = tmp_path / "finished.duckdb"
    status, cancelled = _record(log, stop_at_drop=False)
    assert status == "finished" and not cancelled, why_not_finished(log)
    verdicts, stored = _verdicts_and_status(log)
    assert stored == "finished" and verdicts == len(judges_to_run())  # one per judge of the default plan
