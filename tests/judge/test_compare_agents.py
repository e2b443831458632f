"""`fae compare` against the oracle per agent, on a log holding scripted, scenario and LLM-agent runs
(the demo suite: a LangChain agent on the local scripted LLM server, over real HTTP through the proxy)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fae.cli import app

runner = CliRunner()


def test_harms_caught_missed_and_false_stops_per_agent_including_llm_runs(demo_log):
    log = demo_log
    done = runner.invoke(
        app,
        [
            "compare",
            "--log",
            str(log),
            "--old",
            "accept_corrections=false",
            "--new",
            "accept_corrections=true",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    [judged] = json.loads(done.output)["judges"]
    harms = judged["harms"]
    # suite write runs of the LLM agent carry oracle labels: writing right is never stopped
    for agent in ("langchain:baseline@scripted:gold", "langchain:specs@scripted:gold", "gold"):
        assert harms[agent]["false_stops"] == {"old": 0, "new": 0}, (agent, harms[agent])
        assert harms[agent]["missed"] == {"old": 0, "new": 0}, (agent, harms[agent])
    # a scripted fix is a false stop only while corrections are refused; a harmful one is caught either way
    assert harms["scenario:scripted-fix"]["false_stops"] == {"old": 1, "new": 0}
    assert harms["scenario:duplicate-behind-fix"]["caught"] == {"old": 1, "new": 1}
    assert judged["harms_all"]["missed"] == {"old": 0, "new": 0}
