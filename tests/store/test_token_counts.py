"""A run's tokens are one number in every view: 0 with no LLM call, the sum of what the answers reported, and
unknown (NULL) — never a part-sum or a zero — when a call may have spent tokens fae cannot see.

Each run is written through the real store API with the LlmCalled events the recorder makes of such calls;
tests/agents/test_langchain_agent.py checks the same on calls recorded through the proxy (timeouts, 429, 500).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fae.report.cost import cost
from fae.report.distributions import all_distributions
from fae.report.prices import Price, PriceTable
from fae.report.scope import Scope
from fae.report.study import Study
from fae.report.tables import tokens
from fae.store import events as ev
from fae.store.log import Batch, EventLog, EventRow, RunRow, RunUpdate

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _usage(prompt: int, completion: int, total: int | None = None) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


ANSWERED = {"status": 200, **_usage(90, 10, 100)}
TIMED_OUT = {"status": None, "error": "Client disconnected."}  # no answer: the model may have worked on it
REFUSED = {"status": 429, "error": "HTTP 429: rate limited"}  # refused: nothing spent, no usage
NO_USAGE = {"status": 200}  # a stream sent without usage: tokens were spent, fae cannot count them
# run -> (its agent calls, expected prompt, completion and total tokens, calls of unknown tokens)
RUNS: dict[str, tuple[list[dict], tuple[int | None, int | None, int | None], int]] = {
    "no-call": ([], (0, 0, 0), 0),
    "answered": ([ANSWERED, {"status": 200, **_usage(5, 2)}], (95, 12, 107), 0),  # no total: prompt + completion
    "refused": ([REFUSED, REFUSED], (0, 0, 0), 0),
    "refused-then-answered": ([REFUSED, ANSWERED], (90, 10, 100), 0),
    "listed-models": ([{"status": 200, "api": "models"}, ANSWERED], (90, 10, 100), 0),
    "counted-tokens": ([{"status": 200, "api": "count_tokens"}, ANSWERED], (90, 10, 100), 0),
    "other-api": ([ANSWERED, {"status": 200, "api": "other", **_usage(1, 1, 2)}], (None, None, None), 1),
    "timed-out": ([TIMED_OUT, TIMED_OUT], (None, None, None), 2),
    "answered-then-timed-out": ([ANSWERED, TIMED_OUT], (None, None, None), 1),
    "no-usage": ([ANSWERED, NO_USAGE], (None, None, None), 1),
    "total-only": ([{"status": 200, "total_tokens": 40}], (0, 0, 40), 0),
}


def _call(run_id: str, seq: int, fields: dict, actor: str = "agent") -> EventRow:
    event = ev.LlmCalled(exchange_id=f"{run_id}-{seq}", **{"api": "chat", "model": "m", **fields})
    return EventRow(run_id, seq, "LlmCalled", T0 + timedelta(seconds=seq), seq, actor, "llm", ev.encode(event))


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    batch = Batch()
    for n, (run_id, (calls, _, _)) in enumerate(RUNS.items()):
        batch.runs.append(RunRow(run_id, "t", n, "a", 0, started_at=T0))
        status = "errored" if run_id in ("no-call", "timed-out", "refused") else "finished"
        batch.updates.append(RunUpdate(run_id, status, ended_at=T0 + timedelta(minutes=1)))
        batch.events += [_call(run_id, seq, fields) for seq, fields in enumerate(calls, 1)]
        # a call by the harness (a paraphraser, a judge) is never the agent's, known or not
        batch.events.append(_call(run_id, 99, TIMED_OUT if n % 2 else ANSWERED, actor="harness"))
    path = tmp_path_factory.mktemp("tokens") / "tokens.duckdb"
    with EventLog(path) as opened:
        opened.write_batch(batch)
    with EventLog(path, read_only=True) as opened:
        yield opened


def test_every_view_gives_a_run_the_same_tokens(log):
    _, summary = log.query("SELECT run_id, llm_calls, total_tokens FROM run_summary")
    _, results = log.query(
        "SELECT run_id, llm_calls, prompt_tokens, completion_tokens, total_tokens, unknown_token_calls FROM run_results"
    )
    _, calls = log.query(
        "SELECT run_id, CASE WHEN bool_and(tokens_known) IS NOT FALSE THEN coalesce(sum(coalesce(total_tokens, "
        "prompt_tokens + completion_tokens, 0)), 0) END, count(*) FILTER (WHERE NOT tokens_known) "
        "FROM runs LEFT JOIN (SELECT * FROM llm_calls WHERE actor = 'agent') USING (run_id) GROUP BY run_id"
    )
    summary_of = {run_id: (count, total) for run_id, count, total in summary}
    results_of = {run_id: rest for run_id, *rest in results}
    calls_of = {run_id: (total, unknown) for run_id, total, unknown in calls}
    for run_id, (made, (prompt, completion, total), unknown) in RUNS.items():
        assert results_of[run_id] == [len(made), prompt, completion, total, unknown], run_id
        assert summary_of[run_id] == (len(made), total), run_id
        assert calls_of[run_id] == (total, unknown), run_id  # llm_calls.tokens_known says which calls


def test_the_tokens_table_and_cost_say_unknown_instead_of_counting_a_part(log):
    found = {r["slice"]: r for r in tokens(log, Scope()).dicts()}["all"]
    known = [t for _, (_, (_, _, t), _) in RUNS.items() if t is not None]
    assert found["runs"] == len(RUNS) and found["unknown_runs"] == len(RUNS) - len(known)
    # a mean or a total over the known runs alone would read as the group's
    assert (found["mean_tokens"], found["total_tokens"]) == (None, None)
    spreads = all_distributions(log, Study(Scope()))["fig-tokens"].spreads  # the known runs only, never as 0
    assert sum(s.runs for s in spreads) == len(known)
    priced = cost(log, Scope(), PriceTable(models={"m": Price(1.0, 2.0)})).dicts()[0]
    unknown = sum(u for _, _, u in RUNS.values())
    assert priced["usd"] is None and priced["price"] == f"unknown tokens: {unknown} call{'s' * (unknown != 1)}"
