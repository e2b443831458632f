"""An ``openai:MODEL`` embedder in a training phase: its calls go through the recording proxy.

The local scripted LLM server answers ``/v1/embeddings`` deterministically (hashed bag of words), so
this stays offline; the log must hold each embedding exchange under the run it served, as actor
``harness``, with its model and token usage, and the store must be built from those vectors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fae.harness.training import train
from fae.llm import LlmServer, PlanRegistry, create_app
from fae.llm.embeddings import embed
from fae.memory.embeddings import normalise
from fae.memory.reflection_store import MemoryStore
from fae.store.log import EventLog

TASK = "rec-record-condition"
MODEL = "text-embedding-3-small"
pytestmark = pytest.mark.anyio


def _rows(log_path: Path, sql: str) -> list[tuple]:
    with EventLog(log_path, read_only=True) as log:
        return log.query(sql)[1]


async def test_a_training_phase_records_its_embedding_requests(tmp_path):
    store_dir, log_path = tmp_path / "memory", tmp_path / "fae.duckdb"
    with LlmServer(create_app(PlanRegistry())) as llm:
        result = await train(
            log_path,
            [TASK],
            store_dir=store_dir,
            llm_url=llm.base_url,
            agent="gold",
            variations=[0, 1],
            embedder_spec=f"openai:{MODEL}",
            experiment="expE",
            phase="train-nospec",
            run_prefix="expE.train-nospec.",
        )
    assert [r.status for r in result.runs] == ["finished", "finished"], result.runs
    first, second = (r.run_id for r in result.runs)
    calls = _rows(
        log_path,
        "SELECT run_id, actor, payload->>'$.model', CAST(payload->>'$.prompt_tokens' AS INTEGER) FROM events "
        "WHERE kind = 'LlmCalled' AND payload->>'$.api' = 'embeddings' ORDER BY seq",
    )
    # the dimension probe and the first run's macro reflection under the first run, the second's under the second:
    # each as the harness
    assert sorted((r, a, m) for r, a, m, _ in calls) == sorted(
        [(first, "harness", MODEL)] * 2 + [(second, "harness", MODEL)]
    ), calls
    assert all(tokens and tokens > 0 for *_, tokens in calls), calls
    exchanges = _rows(
        log_path,
        "SELECT count(*) FROM events WHERE kind = 'HttpExchanged' AND actor = 'harness' "
        "AND payload->>'$.path' LIKE '%/embeddings' AND CAST(payload->>'$.status' AS INTEGER) = 200",
    )
    assert exchanges == [(3,)]
    store = MemoryStore.open(store_dir)
    assert (store.embedding_name, store.dimension) == (f"openai:{MODEL}", 384)
    macro = store.macro()
    stored = np.fromfile(store_dir / "macro.f32", dtype="<f4").reshape(-1, 384)
    assert len(macro) == len(stored) == 2
    for index, reflection in enumerate(macro):
        assert np.allclose(stored[index], normalise(np.array([embed(reflection.embedding_text(), 384)]))[0], atol=1e-6)


async def test_the_offline_embedder_asks_no_endpoint(tmp_path):
    log_path = tmp_path / "fae.duckdb"
    with LlmServer(create_app(PlanRegistry())) as llm:
        await train(log_path, [TASK], store_dir=tmp_path / "memory", llm_url=llm.base_url, agent="gold", variations=[0])
    assert _rows(log_path, "SELECT count(*) FROM events WHERE actor = 'harness' AND kind = 'LlmCalled'") == [(0,)]
    assert MemoryStore.open(tmp_path / "memory").embedding_name.startswith("static")


async def test_an_evaluation_run_s_memory_query_is_embedded_through_the_proxy_under_that_run(tmp_path):
    """The memory server of an ``openai:`` store embeds each query through the proxy as the run that asked, so the
    evaluation's embedding calls are in the log too (they went to OPENAI_BASE_URL, unrecorded, before)."""
    from fae import api
    from fae.harness.config import RecordConfig, StackConfig
    from fae.harness.suite_runner import record_suite
    from fae.harness.worklist import render_task
    from fae.llm.plan_registry import entry_from_dict
    from fae.plan import plan_to_dict

    store_dir, log_path = tmp_path / "memory", tmp_path / "fae.duckdb"
    rendered = render_task(TASK, 0)
    gold = plan_to_dict(rendered.gold_plan)
    asks = {"call": "search_macro_reflections", "save": "m", "args": {"query": "record a condition for a patient"}}
    registry = PlanRegistry()
    registry.add(entry_from_dict({"match": rendered.prompt, "plan": {**gold, "steps": [asks, *gold["steps"]]}}))
    with LlmServer(create_app(registry)) as llm:
        await train(
            log_path,
            [TASK],
            store_dir=store_dir,
            llm_url=llm.base_url,
            agent="gold",
            variations=[0],
            embedder_spec=f"openai:{MODEL}",
        )
        specs = api.run_specs([TASK], agents=["langchain:memory-nospec@scripted:gold"])
        config = RecordConfig(stack=StackConfig(llm_url=llm.base_url, memory_stores={"nospec": store_dir}))
        result = await record_suite(log_path, specs, config)
    run_id = specs[0].run_id
    assert result.statuses == {"finished": 1}, result
    calls = _rows(
        log_path,
        f"SELECT actor, upstream, payload->>'$.model' FROM events WHERE run_id = '{run_id}' AND kind = 'LlmCalled'"
        " AND payload->>'$.api' = 'embeddings'",
    )
    assert calls == [("agent", "llm", MODEL)], calls  # the query's embedding, for the run whose agent searched
    [(answer,)] = _rows(
        log_path,
        f"SELECT CAST(payload->'$.result' AS VARCHAR) FROM events WHERE run_id = '{run_id}' AND kind = 'ToolCalled'"
        " AND payload->>'$.tool' = 'search_macro_reflections'",
    )
    assert answer and "results" in answer and "EmbeddingError" not in answer, (answer or "")[:300]
