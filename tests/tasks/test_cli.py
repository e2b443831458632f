"""`fae tasks list | show | render`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fae.cli.tasks import app

runner = CliRunner()


def test_list_shows_every_task(suite):
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    assert len(result.output.splitlines()) == len(suite)
    assert "sched-book-appointment" in result.output
    only = runner.invoke(app, ["list", "--family", "orders", "--json"])
    rows = [json.loads(line) for line in only.output.splitlines()]
    assert rows and all(r["family"] == "orders" for r in rows)


def test_show_and_render(suite):
    shown = json.loads(runner.invoke(app, ["show", "sched-book-appointment"]).output)
    assert shown["id"] == "sched-book-appointment" and shown["writes"] is True
    rendered = runner.invoke(app, ["render", "sched-book-appointment", "--variation", "2"])
    assert rendered.exit_code == 0
    data = json.loads(rendered.output)
    assert data["prompt"] == suite["sched-book-appointment"].render(2).prompt
    assert data["seed"]["type"] == "transaction" and data["plan"]["steps"]
    prompt = runner.invoke(app, ["render", "sched-book-appointment", "-v", "2", "--part", "prompt"])
    assert prompt.output == data["prompt"]


def test_user_mistakes_are_one_line_errors():
    for args in (
        ["show", "nope"],
        ["render", "nope"],
        ["render", "rec-find-patient", "-v", "-1"],
        ["render", "rec-find-patient", "--part", "xml"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert result.output.startswith("error:") and "Traceback" not in result.output
