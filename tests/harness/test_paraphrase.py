"""Fixed paraphrases: each variation's paraphrase is asked for once, through the recording proxy (so it is in the
log), before the runs start, and every trial and configuration plays it; a paraphrase file replays them elsewhere.

The local scripted LLM server plays the paraphraser (``scripted:paraphrase``) and the agent (``scripted:gold``,
the gold plan matched on a line of the task's body, which the scripted paraphrase keeps).
"""

from __future__ import annotations

import json

import anyio
import pytest
from typer.testing import CliRunner

from fae.cli.guard import user_error
from fae.cli.main import app
from fae.errors import RecordError
from fae.harness.config import Execution, RecordConfig, StackConfig
from fae.harness.paraphrases import Paraphrase, export_paraphrases
from fae.harness.recording import record
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import render_task, suite_specs
from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.plan import plan_to_dict
from fae.store.log import EventLog
from fae.store.merge import merge_logs
from fae.tasks import judged
from fae.tasks.paraphrase_file import digest_of, dump_paraphrases, fix, load_paraphrase_file
from tests.run_report import live_against_rejudge, why_not_finished

pytestmark = pytest.mark.timeout(900)  # several recordings and a sharded one on a loaded 2-core machine
TASK = "rec-create-patient"
VARIATIONS = (0, 1)
AGENTS = ["gold", "langchain:baseline@scripted:gold"]
MODEL = "scripted:paraphrase"


def _registry() -> PlanRegistry:
    registry = PlanRegistry()
    for variation in VARIATIONS:
        rendered = render_task(TASK, variation)
        line = rendered.prompt.split("\n\n", 1)[1].strip().splitlines()[0]
        registry.add(entry_from_dict({"match": line, "plan": plan_to_dict(rendered.gold_plan)}))
    return registry


def _record(log, llm_url, repeats, paraphrase, *, resume=False):
    specs = suite_specs([TASK], list(VARIATIONS), AGENTS, repeats)
    return anyio.run(
        lambda: record_suite(
            log,
            specs,
            RecordConfig(stack=StackConfig(llm_url=llm_url), concurrency=8, resume=resume, paraphrase=paraphrase),
        )
    )


def _query(log, sql, params=None):
    with EventLog(log, read_only=True) as opened:
        return opened.query(sql, params)[1]


def _played(log):
    """(run_id, variation, payload of its PromptParaphrased) of every run."""
    rows = _query(
        log,
        "SELECT r.run_id, r.variation, e.payload FROM runs r JOIN events e USING (run_id)"
        " WHERE e.kind = 'PromptParaphrased' ORDER BY r.run_id",
    )
    return [(run_id, variation, json.loads(payload)) for run_id, variation, payload in rows]


def _requests(log):
    """The paraphrase requests in the log: (id they are kept under, exchange id)."""
    return _query(
        log,
        "SELECT run_id, payload->>'$.exchange_id' FROM events WHERE kind = 'LlmCalled' AND actor = 'harness'"
        " AND payload->>'$.model' = ? ORDER BY run_id",
        [MODEL],
    )


def _refused(record) -> str:
    """The one line a recording refused with (a RecordError, inside the stack's task groups)."""
    with pytest.raises((RecordError, BaseExceptionGroup)) as caught:
        record()
    found = user_error(caught.value)
    assert isinstance(found, RecordError), caught.value
    return str(found)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("paraphrase")
    log, other, exported = folder / "p.duckdb", folder / "other.duckdb", folder / "paraphrases.yaml"
    with LlmServer(create_app(_registry())) as llm:
        first = _record(log, llm.base_url, 2, Paraphrase(MODEL, 7))  # 8 runs at once, 2 variations
        assert first.statuses == {"finished": 8}, why_not_finished(log)
        requests_after_first = _requests(log)
        more = _record(log, llm.base_url, 3, Paraphrase(MODEL, 7), resume=True)  # a third trial of each
        assert more.statuses == {"finished": 4}, why_not_finished(log)
        count = export_paraphrases(log, exported)
        elsewhere = CliRunner().invoke(
            app,
            ["record", "--log", str(other), "--task", TASK, "--variations", "0,1", "--llm-url", llm.base_url]
            + [word for agent in AGENTS for word in ("--agent", agent)]
            + ["--paraphrases", str(exported)],
        )
        assert elsewhere.exit_code == 0, elsewhere.output + why_not_finished(other)
    return log, other, exported, count, requests_after_first


def test_one_paraphrase_request_per_variation_not_per_run(recorded):
    log, _, _, _, requests_after_first = recorded
    requests = _requests(log)
    assert len(requests) == len(VARIATIONS) == len(requests_after_first), requests  # 12 runs, 2 requests
    assert all(where.startswith(f"paraphrase.{TASK}.v") for where, _ in requests)
    assert _query(log, "SELECT count(*) FROM runs WHERE run_id LIKE 'paraphrase.%'") == [(0,)]  # not runs
    made = _query(log, "SELECT run_id, payload FROM events WHERE kind = 'ParaphraseMade' ORDER BY run_id")
    assert [(where, json.loads(p)["exchange_id"]) for where, p in made] == requests
    assert {json.loads(p)["origin"] for _, p in made} == {"generated"}


def test_every_trial_and_configuration_of_a_variation_plays_the_same_paraphrase(recorded):
    log, _, _, _, _ = recorded
    played = _played(log)
    assert len(played) == 12 and all(event["accepted"] for _, _, event in played)
    made = {
        json.loads(p)["variation"]: json.loads(p)
        for (p,) in _query(log, "SELECT payload FROM events WHERE kind = 'ParaphraseMade'")
    }
    for run_id, variation, event in played:
        original = render_task(TASK, variation).prompt
        assert event["digest"] == made[variation]["digest"] == digest_of(event["prompt"]), run_id
        assert event["original"] == digest_of(original) and event["prompt"] != original, run_id
        assert event["exchange_id"] == made[variation]["exchange_id"] and event["seed"] == 7, run_id
    assert len({event["digest"] for _, _, event in played}) == len(VARIATIONS)


def test_the_agent_saw_the_paraphrase_the_run_keeps_the_original_and_judging_passes(recorded):
    log, _, _, _, _ = recorded
    prompts = {run_id: event["prompt"] for run_id, _, event in _played(log)}
    rows = _query(
        log,
        "SELECT e.run_id, e.payload->'$.messages', s.payload->>'$.prompt', r.variation FROM events e"
        " JOIN events s ON s.run_id = e.run_id AND s.kind = 'RunStarted' JOIN runs r ON r.run_id = e.run_id"
        " WHERE e.kind = 'LlmCalled' AND e.actor = 'agent' QUALIFY row_number() OVER (PARTITION BY e.run_id"
        " ORDER BY e.seq) = 1",
    )
    assert len(rows) == 6  # the langchain runs; the gold agent asks no model
    for run_id, messages, started_with, variation in rows:
        first_user = next(m for m in json.loads(messages) if m["role"] == "user")
        assert first_user["content"].strip() == prompts[run_id].strip(), run_id
        assert started_with == render_task(TASK, variation).prompt, run_id  # the task as rendered
    assert _query(log, "SELECT DISTINCT outcome FROM verdicts WHERE judge = 'task'") == [("pass",)]
    assert _query(log, "SELECT count(DISTINCT paraphrase), bool_and(paraphrased) FROM run_results") == [(2, True)]
    # the task the log keeps for its judges is the one rendered, not the paraphrase: judging is unaffected
    kept = _query(
        log,
        "SELECT r.variation, b.data FROM events e JOIN runs r USING (run_id) JOIN blobs b"
        " ON b.hash = e.payload->>'$.task_blob' WHERE e.kind = 'TaskRendered'",
    )
    assert len(kept) == 12
    assert all(judged.decode(bytes(body)).played.prompt == render_task(TASK, v).prompt for v, body in kept)


def test_a_paraphrase_file_plays_the_same_prompts_in_another_log_without_asking(recorded):
    log, other, exported, count, _ = recorded
    assert count == len(VARIATIONS) and len(load_paraphrase_file(exported)) == 2
    assert _requests(other) == []
    origins = _query(other, "SELECT DISTINCT payload->>'$.origin' FROM events WHERE kind = 'ParaphraseMade'")
    assert origins == [(exported.name,)]
    digests = {(v, e["digest"]) for _, v, e in _played(log)}
    assert {(v, e["digest"]) for _, v, e in _played(other)} == digests


def test_a_file_that_disagrees_with_the_log_is_refused_before_any_run(recorded, tmp_path):
    log, _, _, _, _ = recorded
    rendered = render_task(TASK, 0)
    changed = tmp_path / "changed.yaml"
    other_text = "Hello: " + rendered.prompt.partition("\n\n")[2]
    dump_paraphrases([fix(rendered, model=MODEL, seed=7, text=other_text).entry()], changed)
    before = _query(log, "SELECT count(*) FROM runs")
    said = _refused(lambda: _record(log, "http://127.0.0.1:9/v1", 4, Paraphrase(MODEL, 7, str(changed)), resume=True))
    assert "differs from the one the log's runs played" in said
    assert _query(log, "SELECT count(*) FROM runs") == before


def test_paraphrase_needs_an_llm_endpoint_and_says_so_before_any_run(tmp_path):
    log = tmp_path / "q.duckdb"
    said = _refused(
        lambda: anyio.run(
            lambda: record_suite(log, suite_specs([TASK], [0], ["gold"], 1), RecordConfig(paraphrase=Paraphrase(MODEL)))
        )
    )
    assert "--paraphrase-model needs an LLM endpoint (--llm-url)" in said
    assert _query(log, "SELECT count(*) FROM runs") == [(0,)]


def test_a_sharded_recording_asks_once_per_variation_before_its_workers_start(tmp_path):
    log = tmp_path / "sharded.duckdb"
    with LlmServer(create_app(_registry())) as llm:
        result = record(
            log,
            suite_specs([TASK], [0], ["gold"], 4),
            RecordConfig(
                stack=StackConfig(llm_url=llm.base_url, processes=1),
                execution=Execution(workers=2),
                concurrency=4,
                paraphrase=Paraphrase(MODEL, 7),
            ),
        )
    assert result.statuses == {"finished": 4}, why_not_finished(log)
    assert len(_requests(log)) == 1
    assert len({e["digest"] for _, _, e in _played(log)}) == 1 and len(_played(log)) == 4


def test_paraphrase_export_writes_json_and_says_in_one_line_when_there_is_nothing(recorded, tmp_path):
    log, _, _, _, _ = recorded
    out = tmp_path / "p.json"
    result = CliRunner().invoke(app, ["paraphrase", "export", "--log", str(log), "-o", str(out)])
    assert result.exit_code == 0 and "wrote 2 paraphrases" in result.output, result.output
    assert [e.variation for e in load_paraphrase_file(out)] == list(VARIATIONS)
    result = CliRunner().invoke(app, ["paraphrase", "export", "--log", str(log), "-o", str(out), "-e", "nope"])
    assert result.exit_code == 1 and result.output.strip().endswith("holds no fixed paraphrases of experiment nope")


def test_a_rejudge_from_the_log_alone_gives_the_live_verdicts_of_paraphrased_runs(recorded, tmp_path):
    log, _, _, _, _ = recorded
    copy = tmp_path / "rejudged.duckdb"
    copy.write_bytes(log.read_bytes())
    live, here = live_against_rejudge(copy)
    assert live == here and {outcome for _, judge, outcome, _ in here if judge == "task"} == {"pass"}, here


def test_a_merged_log_keeps_the_paraphrase_requests_once(recorded, tmp_path):
    log, _, _, _, _ = recorded
    into = tmp_path / "merged.duckdb"
    merge_logs([log], into)
    merge_logs([log], into)  # idempotent: nothing twice
    assert _requests(into) == _requests(log) and len(_requests(into)) == len(VARIATIONS)
    made = "SELECT count(*) FROM events WHERE kind = 'ParaphraseMade'"
    assert _query(into, made) == _query(log, made) == [(len(VARIATIONS),)]
