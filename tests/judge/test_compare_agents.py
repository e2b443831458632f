"""`fae compare` against the oracle per agent, on a log holding scripted, scenario and LLM-agent runs
(the demo suite: a LangChain agent on the local scripted LLM server, over real HTTP through the proxy)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fae.cli import app
from fae.judge.compare import case_set

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


def test_a_case_run_is_grouped_by_its_id_where_no_scenario_file_names_it():
    """A log recorded with a colleague's scenario files is compared here, without them: its case runs
    (TASK--CASE) stay in their case set and a scripted scenario's run in its scenarios, not in "suite"."""
    assert case_set("their-task--their-case", "langchain:baseline@m") == "their-task cases"
    assert case_set("their-task", "scenario:their-scenario") == "their-task scenarios"
    assert case_set("builtin-create-patient", "gold") == "suite"
    # where the files are here, they decide, as before
    assert case_set("wv-register-patient--create-acknowledged-lost", "gold") == "wv-register-patient cases"
    assert case_set("wv-register-patient", "gold") == "wv-register-patient task"
