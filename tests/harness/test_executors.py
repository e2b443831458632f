"""The in-process and worker-process executors keep one contract (tests/harness/executor_contract.py)."""

from __future__ import annotations

import anyio
import pytest

from fae import api
from fae.errors import FaeError
from fae.harness.config import Execution, RecordConfig, StackConfig
from fae.harness.local_workers import LocalWorkers
from fae.harness.recording import InProcess, choose_executor, record
from fae.harness.suite_runner import record_worklist
from fae.harness.worklist import SuiteResult, Worklist
from fae.store.live import live_file
from tests.harness.executor_contract import (
    CONFIG,
    contract_runs,
    keeps_the_contract,
    outcomes,
    stops_before_any_run,
)

pytestmark = pytest.mark.timeout(900)  # worker processes start slowly on a loaded 2-core machine


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The contract's runs recorded in this process (the in-process executor's own contract run), the way fae
    record records them by default."""
    folder = tmp_path_factory.mktemp("baseline")
    log = folder / "contract.duckdb"
    result = api.record(log, contract_runs(folder), CONFIG)
    assert result.statuses == {"finished": 4, "errored": 2}, result
    found = outcomes(log)
    kinds = {kind: status for (_, kind), (status, _, _) in found.items()}
    assert kinds == {"gold": "finished", "plan": "finished", "cmd": "errored"}, found
    passed = {kind: {o for j, o in verdicts if j == "task"} for (_, kind), (_, _, verdicts) in found.items()}
    assert passed["gold"] == {"pass"} and "pass" not in passed["plan"], found  # the contract tells a pass from a fail
    return found, folder


def test_the_in_process_executor_keeps_the_contract(baseline):
    """The baseline is the in-process recording: its resume records nothing again."""
    found, folder = baseline
    again = record(
        folder / "contract.duckdb", contract_runs(folder), api.RecordConfig(resume=True), executor=InProcess()
    )
    assert again.skipped == 6 and again.runs == [] and outcomes(folder / "contract.duckdb") == found, again


class _Unstartable:
    """An executor that must not start. A stand-in, not a mock of fae: what is under test is that ``record``
    calls no executor at all when nothing is left, which a real executor could only show by being slower."""

    def record(self, *args: object) -> SuiteResult:
        raise AssertionError("an executor was started with nothing left to record")


def test_a_resume_with_nothing_left_starts_no_executor(baseline):
    """...and still settles what a killed recording left: its live-query file (a stack's would have replaced it)."""
    found, folder = baseline
    stale = live_file(folder / "contract.duckdb")
    stale.write_text('{"pid": 1, "port": 9, "token": "dead"}')
    again = record(
        folder / "contract.duckdb", contract_runs(folder), api.RecordConfig(resume=True), executor=_Unstartable()
    )
    assert again.skipped == 6 and again.runs == [] and not again.statuses, again
    assert outcomes(folder / "contract.duckdb") == found
    assert not stale.exists()


def test_an_empty_worklist_opens_no_stack(tmp_path):
    """The in-process recorder (and the experiment runner through it) opens no stack for nothing: a stack that
    could not open (its memory store is not a directory) is never tried."""
    work = Worklist(planned=3, todo=[], skipped=3, marked=0, agents=("gold",))
    unopenable = RecordConfig(stack=StackConfig(memory_stores={"notes": tmp_path / "missing"}))
    result = anyio.run(lambda: record_worklist(tmp_path / "log.duckdb", work, {}, unopenable))
    assert (result.planned, result.skipped, result.runs) == (3, 3, [])
    assert not (tmp_path / "log.duckdb").exists()


def test_two_worker_processes_keep_the_contract(tmp_path, baseline):
    keeps_the_contract(tmp_path, LocalWorkers(2), baseline[0])


@pytest.mark.parametrize("executor", [InProcess(), LocalWorkers(2)], ids=["in-process", "workers"])
def test_a_stop_before_the_first_run_starts_none_and_resume_records_them(tmp_path, executor):
    stops_before_any_run(tmp_path, executor)


def test_the_configuration_chooses_the_executor():
    plan = Worklist(planned=2, todo=[], skipped=0, marked=0, agents=("gold",))
    assert isinstance(choose_executor(plan, RecordConfig()), InProcess)
    assert choose_executor(plan, RecordConfig(execution=Execution(workers=3))) == LocalWorkers(3)
    ray = choose_executor(plan, RecordConfig(execution=Execution(ray="auto", ray_actors=2)))
    assert (type(ray).__name__, ray.address, ray.actors) == ("RayActors", "auto", 2)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: StackConfig(processes=3), "1 or 2 processes, not 3"),
        (lambda: RecordConfig(concurrency=0), "concurrency must be at least 1"),
        (lambda: RecordConfig(execution=Execution(workers=0)), "--workers must be at least 1"),
        (lambda: RecordConfig(execution=Execution(ray="auto", ray_actors=0)), "--ray-actors must be at least 1"),
        (
            lambda: RecordConfig(
                stack=StackConfig(fhir_url="http://127.0.0.1:9/fhir"), execution=Execution(ray="auto")
            ),
            "--ray records on the embedded FHIR server only",
        ),
    ],
)
def test_a_setting_no_recording_could_honour_is_refused_when_the_value_is_made(make, said):
    with pytest.raises(FaeError, match=said):
        make()
