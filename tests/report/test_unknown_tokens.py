"""A provider fae does not read: its exchange is kept byte for byte, and its run's tokens are unknown, not zero.

Two runs recorded through the real stack (proxy, embedded FHIR and MCP
servers) against a small model server of another API (a generateContent-style
route fae does not parse) that also serves Chat Completions: one run calls only
Chat Completions, the other calls both. The views, ``fae stats`` and its cost
table must say the second run's tokens are unknown, and give the first its sum.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from typer.testing import CliRunner

from fae.agents.base import AgentContext, AgentResult
from fae.cli.main import app
from fae.harness.config import StackConfig
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.harness.worklist import render_task
from fae.store import events as ev
from fae.store.log import EventLog
from fae.util.serve import serve_asgi
from tests.run_report import why_not_finished

runner = CliRunner()
TASK = "rec-create-patient"
OTHER_PATH = "v1beta/models/other-model:generateContent"
# the other provider's answer carries usage in its own shape, which fae does not read
OTHER_REPLY = b'{"candidates": [{"content": {"parts": [{"text": "Hi"}]}}], "usageMetadata": {"totalTokenCount": 9}}'


async def _chat(request: Request) -> Response:
    usage = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    choice = {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}
    return JSONResponse({"id": "c", "object": "chat.completion", "model": "m-a", "choices": [choice], "usage": usage})


async def _other(request: Request) -> Response:
    return Response(OTHER_REPLY, media_type="application/json")


MODEL_SERVER = Starlette(
    routes=[
        Route("/v1/chat/completions", _chat, methods=["POST"]),
        Route("/v1beta/models/{name}", _other, methods=["POST"]),
    ]
)


class TwoProviders:
    """Calls Chat Completions once and, when ``other``, the API fae does not read once."""

    def __init__(self, other: bool) -> None:
        self.other = other
        self.name = "probe:other" if other else "probe:chat"

    def config(self) -> dict[str, Any]:
        return {"kind": "probe", "model": "m-a"}

    async def run(self, ctx: AgentContext) -> AgentResult:
        assert ctx.llm_base_url
        root = ctx.llm_base_url.removesuffix("/v1")
        async with httpx.AsyncClient(timeout=30) as client:
            chat = {"model": "m-a", "messages": [{"role": "user", "content": ctx.prompt}]}
            (await client.post(f"{ctx.llm_base_url}/chat/completions", json=chat)).raise_for_status()
            if self.other:
                asked = json.dumps({"model": "m-a", "contents": [{"parts": [{"text": "hi"}]}]}).encode()
                (await client.post(f"{root}/{OTHER_PATH}", content=asked)).raise_for_status()
        return AgentResult(answer="done")


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("unknown") / "runs.duckdb"
    rendered = render_task(TASK, 0)

    async def record() -> None:
        async with (
            serve_asgi(MODEL_SERVER) as port,
            open_stack(path, StackConfig(llm_url=f"http://127.0.0.1:{port}/v1")) as stack,
        ):
            for other in (False, True):
                agent = TwoProviders(other)
                spec = RunSpec(run_id=f"run-{agent.name[6:]}", task_id=TASK, variation=0, agent=agent.name, repeat=0)
                status = await execute_run(stack, spec, rendered, agent)
                assert status == "finished", why_not_finished(path)

    anyio.run(record, backend="asyncio")
    return path


def _rows(path: Any, sql: str) -> list[tuple]:
    with EventLog(path, read_only=True) as opened:
        return opened.query(sql)[1]


def test_the_unread_exchange_is_kept_byte_for_byte_and_is_a_call_of_api_other(log):
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT payload FROM events WHERE run_id = 'run-other' AND kind = 'HttpExchanged'"
            " AND payload->>'$.path' LIKE '%generateContent'"
        )
        (http,) = [ev.decode(payload) for (payload,) in rows]
        assert isinstance(http, ev.HttpExchanged) and http.status == 200
        assert opened.blob(http.response_blob or "") == OTHER_REPLY
        asked = json.loads(opened.blob(http.request_blob or "") or b"")
        assert asked == {"model": "m-a", "contents": [{"parts": [{"text": "hi"}]}]}
    calls = _rows(log, "SELECT run_id, api, total_tokens, tokens_known FROM llm_calls ORDER BY run_id, seq")
    assert calls == [
        ("run-chat", "chat", 15, True),
        ("run-other", "chat", 15, True),
        ("run-other", "other", None, False),
    ]


def test_the_views_say_the_runs_tokens_are_unknown_rather_than_zero(log):
    summary = _rows(log, "SELECT run_id, llm_calls, total_tokens FROM run_summary ORDER BY run_id")
    assert summary == [("run-chat", 1, 15), ("run-other", 2, None)]
    results = _rows(
        log,
        "SELECT run_id, prompt_tokens, completion_tokens, total_tokens, unknown_token_calls FROM run_results"
        " ORDER BY run_id",
    )
    assert results == [("run-chat", 11, 4, 15, 0), ("run-other", None, None, None, 1)]


def test_fae_stats_prints_unknown_tokens_and_no_cost(log):
    shown = runner.invoke(app, ["stats", "--log", str(log), "--table", "tokens", "--price", "m-a=1/2", "-t", "cost"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    chat_all = [line for line in lines if "probe:chat" in line and " all " in line]
    other_all = [line for line in lines if "probe:other" in line and " all " in line]
    assert chat_all and "15" in chat_all[0] and "unknown" not in chat_all[0], shown.output
    assert other_all and other_all[0].count("unknown") == 3, shown.output
    found = json.loads(
        runner.invoke(app, ["stats", "--log", str(log), "--json", "-t", "cost", "--price", "m-a=1/2"]).output
    )
    cost = {row["configuration"]: row for row in found["cost"]["rows"]}
    assert cost["probe:chat"]["usd"] == pytest.approx((11 * 1 + 4 * 2) / 1e6)
    other = cost["probe:other"]  # every call is priced: the total is unknown for its tokens alone
    assert (other["usd"], other["usd_per_run"], other["price"]) == (None, None, "unknown tokens: 1 call")
    overview = json.loads(runner.invoke(app, ["stats", "--log", str(log), "--json", "-t", "overview"]).output)
    tokens = {row["configuration"]: row["tokens"] for row in overview["overview"]["rows"]}
    assert tokens == {"probe:chat": 15, "probe:other": None}
