"""Scenario files as public data: a user's scenario recorded from a temporary directory through the real
stack, and each schema mistake reported as one line naming the file and the field."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.errors import TaskError
from fae.judge.rejudge import judge_run, judges_to_run
from fae.replay.source import load_run
from fae.store import events as ev
from fae.store.log import EventLog
from fae.tasks import scenarios
from fae.tasks.scenario_files import load_file

runner = CliRunner()
NOW = datetime(2025, 1, 1, tzinfo=UTC)

USER_FILE = """\
task:
  id: user-register-carer
  prompt: "Register {given} {family}, born {birth}, phone {phone}."
  options:
    - {given: Noor, family: Haddad, birth: "1990-03-04", phone: "555-3100", wrong: "555-3999"}
  seed:
    - {resourceType: Patient, id: user-seed-0, name: [{family: Haddad, given: [Sami]}], birthDate: "1988-01-01"}
  target:
    type: Patient
    identity: {name.family: "{family}", name.given: "{given}", birthDate: "{birth}"}
    expected: {telecom.value: "{phone}"}
scenarios:
  user-fix:
    about: the proxy garbles the phone; the agent reads back and fixes it
    faults: [{write: 1, set: {path: telecom.0.value, value: "{wrong}"}}]
    steps:
      - {call: createResource, save: c, args: {resourceType: Patient, body_json: {resourceType: Patient,
          name: [{family: "{family}", given: ["{given}"]}], birthDate: "{birth}",
          telecom: [{system: phone, value: "{phone}"}]}}}
      - {call: getResourceById, save: r, args: {resourceType: Patient, resourceId: "${c.id}"}}
      - {call: updateResource, args: {resourceType: Patient, resourceId: "${c.id}",
          body_json: {$merge: ["${r}", {telecom: [{system: phone, value: "{phone}"}]}]}}}
      - {answer: "${c.id}"}
  user-peek:
    about: another user reads the garbled record before the fix
    faults: [{write: 1, set: {path: telecom.0.value, value: "{wrong}"}}]
    oracle: [exposed_while_wrong]
    steps:
      - {call: createResource, save: c, args: {resourceType: Patient, body_json: {resourceType: Patient,
          name: [{family: "{family}", given: ["{given}"]}], birthDate: "{birth}",
          telecom: [{system: phone, value: "{phone}"}]}}}
      - {http: {method: POST, path: "", body: {resourceType: Bundle, type: batch, entry: [
          {request: {method: GET, url: "Patient/${c.id}"}}]}}, actor: other-user}
      - {call: getResourceById, save: r, args: {resourceType: Patient, resourceId: "${c.id}"}}
      - {call: updateResource, args: {resourceType: Patient, resourceId: "${c.id}",
          body_json: {$merge: ["${r}", {telecom: [{system: phone, value: "{phone}"}]}]}}}
      - {answer: "${c.id}"}
"""


@pytest.fixture
def fresh_registry(monkeypatch):
    """No directories added by earlier tests; the environment's path unset."""
    monkeypatch.setattr(scenarios, "_added", [])
    monkeypatch.delenv(scenarios.PATH_VARIABLE, raising=False)


def test_a_users_scenario_is_recorded_from_a_directory(tmp_path, fresh_registry, monkeypatch):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "carer.yaml").write_text(USER_FILE)
    log = tmp_path / "user.duckdb"
    done = runner.invoke(
        app,
        [
            "record",
            "--log",
            str(log),
            "--task",
            "user-register-carer",
            "--scenarios-dir",
            str(folder),
            "--agent",
            "scenario:user-fix",
            "--agent",
            "scenario:user-peek",
            "--settle",
            "1.5",
        ],
    )
    assert done.exit_code == 0, done.output
    with EventLog(log, read_only=True) as opened:
        fixed = load_run(opened, "user-register-carer.v0.scenario-user-fix.r0")
        peeked = load_run(opened, "user-register-carer.v0.scenario-user-peek.r0")
        assert fixed.status == "finished", fixed
        assert fixed.first(ev.RunStarted).event.settle_s == 1.5
        verdicts = {
            row.judge: row
            for row in judge_run(fixed, judges_to_run("ensure_record") + judges_to_run("oracle"), judged_at=NOW)
        }
        peek = {
            row.judge: row
            for row in judge_run(peeked, judges_to_run("ensure_record") + judges_to_run("oracle"), judged_at=NOW)
        }
        _, touched = opened.query(
            "SELECT r.agent, e.payload->>'$.method', e.payload->>'$.fault' FROM events e JOIN runs r USING (run_id)"
            " WHERE e.kind = 'HttpExchanged' AND e.payload->>'$.fault' IS NOT NULL ORDER BY r.agent"
        )
    # the log says which exchange the proxy changed: each run's first write, and nothing else
    assert touched == [
        (agent, "POST", 'write 1: set telecom.0.value="555-3999" in the request the server got')
        for agent in ("scenario:user-fix", "scenario:user-peek")
    ], touched
    # the fault garbled the create; the agent's fix made it right and nobody saw it wrong
    assert verdicts["ensure_record"].outcome == "created_verified", verdicts["ensure_record"].evidence
    assert verdicts["ensure_record"].evidence["corrected"] is True
    assert verdicts["ensure_record"].evidence["settled_s"] >= 1.5
    assert verdicts["oracle"].outcome == "harmless", verdicts["oracle"].evidence
    assert peek["ensure_record"].evidence["problems"] == ["read_by_other_actor"]
    assert (peek["oracle"].outcome, peek["oracle"].evidence["harms"]) == ("harmful", ["exposed_while_wrong"])
    # the same files through FAE_SCENARIOS_PATH, as a rejudge would find them
    monkeypatch.setattr(scenarios, "_added", [])
    assert "user-fix" not in scenarios.scenario_names()
    monkeypatch.setenv(scenarios.PATH_VARIABLE, str(folder))
    assert scenarios.scenario_names("user-register-carer") == ["user-fix", "user-peek"]


BROKEN = {
    "missing-steps": ("scenarios:\n  x: {about: nothing}\n", "scenarios.x: Object missing required field `steps`"),
    "wrong-type": (
        "scenarios:\n  x: {steps: [{answer: a}], faults: [{write: first, drop_reply: true}]}\n",
        "scenarios.x.faults[0].write: Expected `int`",
    ),
    "two-faults-in-one": (
        "scenarios:\n  x: {steps: [{answer: a}], faults: [{write: 1, drop_reply: true, delay_s: 1}]}\n",
        "scenarios.x.faults[0]: names a write",
    ),
    "lose-and-another": (
        "scenarios:\n  x: {steps: [{answer: a}], faults: [{write: 1, lose: true, delay_s: 1}]}\n",
        "scenarios.x.faults[0]: names a write (1 = the first) and exactly one of set, drop_reply, delay_s, lose",
    ),
    "unknown-harm": (
        "scenarios:\n  x: {steps: [{answer: a}], oracle: [bad_vibes]}\n",
        "scenarios.x.oracle: unknown harm 'bad_vibes'",
    ),
    "bad-step": (
        "scenarios:\n  x: {steps: [{wait: 1}, {answer: a}, {wait: 2}]}\n",
        "scenarios.x.steps: step 2: the answer must be the last step",
    ),
    "unknown-field": (
        "scenarios:\n  x: {steps: [{answer: a}], colour: red}\n",
        "scenarios.x: Object contains unknown field `colour`",
    ),
    "case-bad-moment": (
        "cases:\n  x: {world: [{after: later, steps: [{wait: 1}]}]}\n",
        "cases.x.world[0].after: start, answer, or the agent's N-th write",
    ),
    "case-write-zero": (
        "cases:\n  x: {world: [{after: 0, steps: [{wait: 1}]}]}\n",
        "cases.x.world[0].after: start, answer, or the agent's N-th write",
    ),
    "case-plays-the-agent": (
        "cases:\n  x: {world: [{after: start, steps: [{call: createResource, args: {}}]}]}\n",
        "cases.x.world[0].steps: the world takes http and wait steps only",
    ),
    "case-answers": (
        "cases:\n  x: {world: [{after: start, steps: [{answer: done}]}]}\n",
        "cases.x.world[0].steps:",
    ),
    "case-bad-fault": (
        "cases:\n  x: {faults: [{write: 1}]}\n",
        "cases.x.faults[0]: names a write",
    ),
    "case-fault-bad-method": (
        "cases:\n  x: {faults: [{write: 1, method: GET, delay_s: 1}]}\n",
        "cases.x.faults[0].method: one of POST, PUT, PATCH, DELETE",
    ),
    "case-fault-bad-resource": (
        "cases:\n  x: {faults: [{write: 1, resource: patient, delay_s: 1}]}\n",
        "cases.x.faults[0].resource: a resource type",
    ),
    "case-unknown-field": ("cases:\n  x: {wolrd: []}\n", "cases.x: Object contains unknown field `wolrd`"),
    "case-bad-name": ("cases:\n  X_1: {}\n", "cases.X_1: a case name is lower-case letters"),
    "case-kind-without-a-write": (
        "cases:\n  x: {world: [{after: start, method: POST, steps: [{wait: 1}]}]}\n",
        "cases.x.world[0]: method and resource name which write: they go with after: N",
    ),
    "case-bad-world-method": (
        "cases:\n  x: {world: [{after: 1, method: GET, steps: [{wait: 1}]}]}\n",
        "cases.x.world[0].method: one of POST, PUT, PATCH, DELETE",
    ),
}
TASK = "task: {id: t, prompt: p, options: [{a: 1}], target: {type: Patient, identity: {birthDate: '1'}}}\n"


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_schema_mistake_is_one_line_naming_the_file_and_field(tmp_path, case):
    body, wanted = BROKEN[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(TASK + body)
    with pytest.raises(TaskError) as caught:
        load_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and wanted in message and "\n" not in message, message


def test_the_cli_reports_a_broken_scenario_file_without_a_traceback(tmp_path, fresh_registry):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "x.yaml").write_text(TASK + "scenarios:\n  x: {about: nothing}\n")
    (folder / "twice.yaml").write_text(textwrap.dedent(TASK.replace("id: t", "id: t2")) + "scenarios: {}\n")
    done = runner.invoke(
        app,
        [
            "record",
            "--log",
            str(tmp_path / "l.duckdb"),
            "--task",
            "t",
            "--scenarios-dir",
            str(folder),
            "--agent",
            "scenario:x",
        ],
    )
    assert done.exit_code != 0
    assert "Traceback" not in done.output and f"{folder / 'x.yaml'}: scenarios.x" in done.output, done.output
    missing = runner.invoke(
        app,
        [
            "record",
            "--log",
            str(tmp_path / "l.duckdb"),
            "--task",
            "t",
            "--scenarios-dir",
            str(tmp_path / "nowhere"),
            "--agent",
            "scenario:x",
        ],
    )
    assert missing.exit_code != 0 and "does not exist" in missing.output, missing.output


def test_a_scenario_name_defined_twice_is_refused(tmp_path, fresh_registry):
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(
            TASK.replace("id: t", f"id: t{name}") + "scenarios:\n  same: {steps: [{answer: a}]}\n"
        )
    scenarios.add_scenario_dir(tmp_path)
    with pytest.raises(TaskError, match=r"b\.yaml: scenarios\.same: already defined in .*a\.yaml"):
        scenarios.registry()


def test_the_built_in_scenarios_are_files():
    assert len(scenarios.SCENARIOS) >= 18 and {"scripted-fix", "fault-changes-create-fixed"} <= set(scenarios.SCENARIOS)
    assert scenarios.scenario_faults("scenario:fault-changes-create-fixed", 0)[0].set.value == "555-9900"
    assert scenarios.scenario_faults("scripted:gold", 0) == []


def test_a_directory_already_searched_is_not_added_again(fresh_registry):
    """A worker (``--workers``, ``--ray``) is handed its driver's whole list, the built-in directory first:
    added again, every scenario clashed with itself and live judging's ensure_record and oracle verdicts were
    ``error`` on every run."""
    for folder in scenarios.scenario_dirs():
        scenarios.add_scenario_dir(str(folder))
    assert scenarios.scenario_dirs() == (scenarios.BUILTIN_DIR,)
    assert scenarios.is_scenario_task("wv-register-patient")


# What a run of each built-in scenario task's variations 0-5 records (seed hash, prompt, clock). A change to
# a built-in scenario file that alters it makes the runs recorded before it task_changed (docs/judging.md):
# pin the new digest only for a change meant as one.
BUILT_IN_PLAYED_DIGEST = "c151a8e45bde22c30dcc69ee74dd1e63a47336e7ed038898240a907de98e0516"


def test_the_built_in_scenario_tasks_render_what_recorded_logs_played():
    import hashlib

    digest = hashlib.sha256()
    for task_id in sorted(scenarios.builtin_registry().tasks):
        for variation in range(6):
            digest.update(repr(scenarios.render_scenario_task(task_id, variation).played).encode())
    assert digest.hexdigest() == BUILT_IN_PLAYED_DIGEST, (
        "a built-in scenario task renders another seed, prompt or clock: its runs recorded before now read "
        "task_changed; pin the new digest only if the change is meant"
    )


def test_a_fault_named_by_method_and_resource_loads(tmp_path):
    path = tmp_path / "kinds.yaml"
    path.write_text(TASK + "cases:\n  x: {faults: [{write: 2, method: post, resource: Patient, drop_reply: true}]}\n")
    (fault,) = load_file(path).cases["x"].faults
    assert (fault.write, fault.method, fault.resource) == (2, "post", "Patient")
