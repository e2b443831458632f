"""``fae llm serve``: a user mistake is one line and exit 1; a real run serves a plans directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from fae.cli.llm import app

runner = CliRunner()


def test_missing_plans_dir_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--plans", str(tmp_path / "absent")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: plans directory {tmp_path / 'absent'} does not exist or is not a directory"
    ]
    assert "Traceback" not in result.output


def test_malformed_plan_is_one_line_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("match: x\nsteps:\n  - answer: 1\n")
    result = runner.invoke(app, ["serve", "--plans", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "bad.yaml" in lines[0] and "step 1.answer: Expected `str`, got `int`" in lines[0]


def test_fault_delay_out_of_bounds_is_refused() -> None:
    result = runner.invoke(app, ["serve", "--fault-delay", "9999"])
    assert result.exit_code == 1
    assert "--fault-delay" in result.output


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_answers_with_the_plans_of_its_directory(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text("match: say hello\nsteps:\n  - answer: hello from the plan\n")
    port = _free_port()
    command = [
        sys.executable,
        "-c",
        "from fae.cli.llm import app; app()",
        "serve",
        "--port",
        str(port),
        "--plans",
        str(tmp_path),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
    try:
        deadline = time.monotonic() + 120  # a loaded machine starts a process slowly; ready ends the wait
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={
                "model": "scripted:gold",
                "messages": [{"role": "user", "content": "please say hello"}],
            },
        )
        assert reply.json()["choices"][0]["message"]["content"] == "hello from the plan"
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_port_in_use_is_one_line_and_exit_1() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["serve", "--port", str(port)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith(f"error: cannot listen on 127.0.0.1:{port}")
