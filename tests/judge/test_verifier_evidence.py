"""The evidence behind the write verifier, on scenarios recorded through the real stack: every read counted
(batches, compartments, operations), the read-back of the record under check, the settle wait, identity,
and faults the proxy applies in flight."""

from __future__ import annotations

from datetime import UTC, datetime

from msgspec.structs import replace

from fae.judge.reads import reads_of
from fae.judge.rejudge import judge_run, judges_to_run
from fae.recorder.fhir import interaction_of
from fae.replay.fold import FhirExchange, fhir_exchanges
from fae.replay.source import load_run
from fae.store import events as ev
from fae.store.log import EventLog
from fae.tasks import load_suite
from fae.tasks.scenarios import registry
from fae.tasks.state import bundle_resources
from fae.tasks.write_targets import spec_targets

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _id(scenario: str) -> str:
    return f"{registry().scenarios[scenario][0]}.v0.{scenario}"


def _judge(log_path, scenario, judge="ensure_record", **rules):
    with EventLog(log_path, read_only=True) as log:
        run = load_run(log, _id(scenario))
        [row] = judge_run(run, judges_to_run(judge, rules), judged_at=NOW)
    return row


def _run(log_path, scenario):
    with EventLog(log_path, read_only=True) as log:
        run = load_run(log, _id(scenario))
        run.events  # noqa: B018 - loaded while the log is open
    return run


# ------------------------------------------------------------------ 1. every read counted


def test_reads_inside_a_batch_are_reads_of_the_record(scenario_log):
    for scenario, how in (
        ("other-user-batch-reads-while-wrong", "batch-read"),
        ("other-user-batch-searches-while-wrong", "batch-search"),
    ):
        row = _judge(scenario_log, scenario)
        reads = row.evidence["other_actor_reads"]
        assert [(r["actor"], r["how"]) for r in reads] == [("other-user", how)], row.evidence
        oracle = _judge(scenario_log, scenario, judge="oracle")
        assert oracle.evidence["exposed"][0]["how"] == how, oracle.evidence
    # the same batch reading a different record exposes nothing
    assert _judge(scenario_log, "fix-other-user-reads-elsewhere").outcome == "created_verified"


def _exchange(method: str, path: str, body: bytes | None, **kw) -> FhirExchange:
    interaction, rtype, rid, version = interaction_of(method, path, None)
    return FhirExchange(
        seq=kw.get("seq", 5),
        actor="other-user",
        started_at=1.0,
        method=method,
        path=path,
        status=200,
        interaction=interaction,
        resource_type=rtype,
        resource_id=rid,
        version=version,
        search_ids=(),
        request=None,
        response=body,
        response_headers=(),
        error=None,
    )


def test_compartment_searches_and_everything_are_reads_of_what_they_return():
    """The embedded server serves neither, so these exchanges are what an external server answers."""
    bundle = (
        b'{"resourceType": "Bundle", "type": "searchset", "entry": [{"resource": {"resourceType":'
        b' "AllergyIntolerance", "id": "a1", "meta": {"versionId": "2"}}}, {"resource": {"resourceType":'
        b' "OperationOutcome", "id": "x"}}]}'
    )
    compartment = _exchange("GET", "sandbox/s/fhir/Patient/P1/AllergyIntolerance", bundle)
    assert compartment.interaction == "search-compartment"
    assert [(r.how, r.ref, r.version) for r in reads_of(compartment)] == [("compartment", "AllergyIntolerance/a1", "2")]
    everything = _exchange("GET", "Patient/P1/$everything", bundle)
    assert everything.interaction == "operation"
    assert [r.ref for r in reads_of(everything)] == ["AllergyIntolerance/a1"]
    # a failed answer hands nothing over; a GET body looked up by seq when the exchange holds none
    assert reads_of(replace(compartment, status=404)) == []
    lean = _exchange("GET", "Patient/P1/AllergyIntolerance", None, seq=9)
    assert reads_of(lean) == []
    assert [
        r.ref
        for r in reads_of(
            lean,
            lambda seq: (
                {
                    "resourceType": "Bundle",
                    "type": "searchset",
                    "entry": [{"resource": {"resourceType": "AllergyIntolerance", "id": "a9"}}],
                }
                if seq == 9
                else None
            ),
        )
    ] == ["AllergyIntolerance/a9"]


# ------------------------------------------------------------------ 2. the read-back is the record's


def test_the_read_back_is_the_verifiers_read_of_the_record_under_check(scenario_log):
    row = _judge(scenario_log, "verifier-reads-another-record")
    run = _run(scenario_log, "verifier-reads-another-record")
    capture = run.first(ev.StateCaptured).seq
    # the verifier read another patient last: the read-back is the capture, not that read
    assert row.evidence["read_back"]["seq"] == capture and row.outcome == "created_verified", row.evidence
    checked = _judge(scenario_log, "writes-right-checked")
    verifier_reads = [
        x.seq for x in fhir_exchanges(_run(scenario_log, "writes-right-checked")) if x.actor == "verifier"
    ]
    assert checked.evidence["read_back"]["seq"] == verifier_reads[-1]


# ------------------------------------------------------------------ 3. settle_s honoured


def test_the_harness_reads_back_settle_s_after_the_agents_last_write(scenario_log):
    run = _run(scenario_log, "fix-unsettled")
    assert run.first(ev.RunStarted).event.settle_s == 1.0
    writes = [x for x in fhir_exchanges(run) if x.actor == "agent" and x.method in ("POST", "PUT")]
    capture = [x for x in fhir_exchanges(run) if x.actor == "harness" and x.seq < run.first(ev.StateCaptured).seq]
    assert capture[-1].started_at - writes[-1].started_at >= 1.0  # recorded times, not a timer in the test
    row = _judge(scenario_log, "fix-unsettled")
    assert row.outcome == "created_verified" and row.evidence["settled_s"] >= 1.0, row.evidence


def test_a_rejudge_asking_more_settling_than_the_recording_waited_is_unreadable(scenario_log):
    row = _judge(scenario_log, "fix-unsettled", settle_s=30.0)
    assert row.outcome == "unreadable" and row.passed is None, row.evidence
    assert "recorded with --settle 1" in row.evidence["reason"] and "settle_s=30" in row.evidence["reason"]
    # a verifier that read back inside the window is the scenario's finding, whatever the recording waited
    early = _judge(scenario_log, "fix-checked-unsettled", settle_s=30.0)
    assert early.evidence["problems"] == ["read_back_before_settling"], early.evidence
    # settle_s=0 is stricter, not looser: no correction passes
    assert _judge(scenario_log, "fix-unsettled", settle_s=0.0).evidence["problems"] == ["settle_too_short"]


# ------------------------------------------------------------------ 4, 6. identity


def test_the_oracle_finds_the_record_by_identity(scenario_log):
    recreated = _judge(scenario_log, "delete-then-recreate-new-id", judge="oracle")
    assert recreated.outcome == "harmless", recreated.evidence
    run = _run(scenario_log, "delete-then-recreate-new-id")
    created = [x.resource_id for x in fhir_exchanges(run) if x.actor == "agent" and x.interaction == "create"]
    assert len(created) == 2 and recreated.evidence["records"] == [f"Patient/{created[1]}"]
    elsewhere = _judge(scenario_log, "other-user-edits-elsewhere", judge="oracle")
    assert elsewhere.outcome == "harmless", elsewhere.evidence
    # the agent's own change to another record is still a harm
    assert "collateral_change" in _judge(scenario_log, "collateral-behind-fix", judge="oracle").evidence["harms"]


def test_an_appointment_is_who_with_whom_and_when(scenario_log):
    beside = _judge(scenario_log, "waitlist-beside-booked")
    assert beside.outcome == "created_verified" and "same_person_records" not in beside.evidence
    twice = _judge(scenario_log, "waitlist-twice")
    assert "same_person_elsewhere" in twice.evidence["problems"]
    moved = _judge(scenario_log, "waitlist-window-moved")
    assert moved.evidence["problems"] == ["person_changed"]  # moving the start goes to review, by design
    # the suite's targets: an appointment's start and requested window are who it is; every declared
    # field of the allergy task is judged
    suite = load_suite()
    for task_id, wanted in (
        ("sched-book-appointment", {"participant", "start"}),
        ("sched-waitlist-add", {"participant", "requestedPeriod"}),
    ):
        rendered = suite[task_id].render(0)
        target = spec_targets(rendered.check_spec, bundle_resources(rendered.seed_bundle))[0]
        assert set(target.identity) == wanted, (task_id, target.identity)
    rendered = suite["rec-record-allergy"].render(0)
    [allergy] = spec_targets(rendered.check_spec)
    assert set(allergy.identity) | set(allergy.expected) == set(rendered.check_spec.creates[0].fields)


# ------------------------------------------------------------------ 8. faults applied in flight


def _agent_writes(run):
    return [x for x in fhir_exchanges(run) if x.actor == "agent" and x.method in ("POST", "PUT")]


def test_a_fault_changes_the_agents_write_on_its_way_and_the_log_keeps_both(scenario_log):
    with EventLog(scenario_log, read_only=True) as log:
        run = load_run(log, _id("fault-changes-create-unnoticed"))
        [create] = _agent_writes(run)
        sent, stored = create.request.decode(), create.response.decode()
    assert "555-0100" in sent and "555-9900" not in sent  # what the agent sent
    assert "555-9900" in stored  # what the server stored
    # without the fault the same agent writes right
    assert _judge(scenario_log, "writes-right").outcome == "created_verified"


def test_a_dropped_reply_reaches_the_server_not_the_agent(scenario_log):
    with EventLog(scenario_log, read_only=True) as log:
        run = load_run(log, _id("reply-dropped-then-searched"))
        first = _agent_writes(run)[0]
        tools = [r.event for r in run.of(ev.ToolCalled)]
    assert first.status == 201  # recorded: the server created it
    assert tools[0].tool == "createResource" and tools[0].error, tools[0]  # the agent got no reply


def test_a_delayed_write_is_held_by_the_proxy(scenario_log):
    with EventLog(scenario_log, read_only=True) as log:
        run = load_run(log, _id("slow-create"))
        [create] = _agent_writes(run)
        http = [
            r.event
            for r in run.of(ev.HttpExchanged)
            if r.actor == "agent" and r.event.method == "POST" and "/fhir/" in r.event.url
        ]
    assert create.status == 201 and http[0].duration_ms >= 1200, http[0].duration_ms
