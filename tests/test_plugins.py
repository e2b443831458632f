"""A plugin package installed for real adds a task family, an agent and a judge that fae records and rejudges.

The package (tests/plugin_demo) is built and installed with uv into a temporary
target directory put on PYTHONPATH, so its entry points are found exactly as
those of a package installed into the environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).parent / "plugin_demo"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory) -> dict[str, str]:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH, so the plugin package cannot be installed")
    target = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--python",
            sys.executable,
            "--target",
            str(target),
            str(PLUGIN),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, f"installing the plugin failed:\n{built.stdout}\n{built.stderr}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    env.pop("FAE_TASKS_PATH", None)
    return env


def fae(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", *args], env=env, capture_output=True, text=True, timeout=300
    )
    if check:
        assert done.returncode == 0, f"fae {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_a_plugin_task_agent_and_judge_record_judge_and_rejudge(plugin_env, tmp_path):
    listed = fae(plugin_env, "tasks", "list").stdout
    assert "demo-desk-lookup" in listed and "rec-find-patient" in listed

    log = tmp_path / "plugin.duckdb"
    fae(
        plugin_env,
        "record",
        "--log",
        str(log),
        "--task",
        "demo-desk-lookup",
        "--variations",
        "0-1",
        "--agent",
        "desk",
        "--agent",
        "gold",
    )
    strict = fae(
        plugin_env,
        "sql",
        "--json",
        "--log",
        str(log),
        "SELECT r.agent, r.status, v.outcome FROM runs r JOIN verdicts v USING (run_id)"
        " WHERE v.judge = 'task' AND v.rule_set->>'$.mode' = 'strict' ORDER BY r.agent, r.run_id",
    ).stdout
    rows = [json.loads(line) for line in strict.splitlines()]
    assert [(r["agent"], r["status"], r["outcome"]) for r in rows] == [("desk", "finished", "pass")] * 2 + [
        ("gold", "finished", "pass")
    ] * 2, rows

    fae(plugin_env, "rejudge", "--log", str(log), "--judge", "answer_length", "--rule", "max_chars=10")
    fae(plugin_env, "rejudge", "--log", str(log), "--judge", "answer_length")
    verdicts = fae(
        plugin_env,
        "sql",
        "--json",
        "--log",
        str(log),
        "SELECT rule_set->>'$.max_chars' AS max_chars, outcome, count(*) AS runs FROM verdicts"
        " WHERE judge = 'answer_length' GROUP BY ALL ORDER BY max_chars",
    ).stdout
    found = [json.loads(line) for line in verdicts.splitlines()]
    assert found == [
        {"max_chars": "10", "outcome": "too_long", "runs": 4},
        {"max_chars": "200", "outcome": "short", "runs": 4},
    ], found


def test_without_the_plugin_its_names_are_unknown(tmp_path):
    env = {**os.environ}
    env.pop("FAE_TASKS_PATH", None)
    done = fae(env, "record", "--log", str(tmp_path / "x.duckdb"), "--task", "demo-desk-lookup", check=False)
    assert done.returncode == 1 and "demo-desk-lookup" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_task_directory_on_the_command_line_and_in_the_environment(tmp_path):
    tasks = PLUGIN / "fae_plugin_demo" / "tasks"
    env = {**os.environ}
    env.pop("FAE_TASKS_PATH", None)
    assert "demo-desk-lookup" in fae(env, "--tasks-dir", str(tasks), "tasks", "list").stdout
    assert "demo-desk-lookup" in fae({**env, "FAE_TASKS_PATH": str(tasks)}, "tasks", "list").stdout
    missing = fae(env, "--tasks-dir", str(tmp_path / "nowhere"), "tasks", "list", check=False)
    assert missing.returncode == 1 and "does not exist" in missing.stdout + missing.stderr
