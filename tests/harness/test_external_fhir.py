"""Recording against an external FHIR base: runs are serialised, the server is emptied and reseeded each time."""

from __future__ import annotations

import json

import anyio
import httpx

from fae.fhir.app import DEFAULT_SANDBOX, create_app
from fae.fhir.engine import FhirEngine
from fae.harness.config import RecordConfig, StackConfig
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import suite_specs
from fae.store.log import EventLog
from fae.util.serve import serve_asgi
from tests.run_report import why_not_finished


def test_external_server_is_reset_between_serialised_runs(tmp_path):
    """The external server here is a second embedded server reached only by its base URL, as HAPI would be."""
    engine = FhirEngine()
    log = tmp_path / "ext.duckdb"

    async def main():
        async with serve_asgi(create_app(engine)) as port:
            base = f"http://127.0.0.1:{port}/fhir"
            async with httpx.AsyncClient() as client:  # leftovers from someone else's work
                await client.put(f"{base}/Patient/leftover", json={"resourceType": "Patient", "id": "leftover"})
            return await record_suite(
                log,
                suite_specs(["sched-book-appointment", "rec-create-patient"], [0, 1], ["gold"], 1),
                RecordConfig(stack=StackConfig(fhir_url=base), concurrency=4),
            )

    result = anyio.run(main)
    assert result.statuses == {"finished": 4}, why_not_finished(log)
    with EventLog(log, read_only=True) as opened:
        _, runs = opened.query("SELECT run_id, epoch_ms(started_at), epoch_ms(ended_at) FROM runs ORDER BY 2")
        for (_, _, end), (_, start, _) in zip(runs, runs[1:], strict=False):
            assert start >= end  # one at a time
        _, verdicts = opened.query("SELECT outcome FROM verdicts WHERE judge = 'task'")
        assert {v for (v,) in verdicts} == {"pass"}
        _, deletes = opened.query(
            "SELECT count(*) FROM fhir_exchanges WHERE actor = 'setup' AND interaction = 'delete'"
        )
        assert deletes[0][0] > 0
        _, captures = opened.query("SELECT payload FROM events WHERE kind = 'StateCaptured'")
        for (payload,) in captures:
            assert json.loads(payload)["resource_count"] > 0
    assert [r for r in engine.resources(DEFAULT_SANDBOX) if r["id"] == "leftover"] == []
