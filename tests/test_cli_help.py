"""``--help`` reads like other tools': no Python type labels, upper-case placeholders, 100 columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

COMMANDS = [
    [],
    ["record"],
    ["show"],
    ["rejudge"],
    ["compare"],
    ["sql"],
    ["runs"],
    ["replay"],
    ["tasks", "list"],
    ["fhir", "serve"],
    ["mcp", "fhir"],
    ["llm", "serve"],
    ["memory", "serve"],
]


def _help(words: list[str], columns: int = 100) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", *words, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": str(columns), "TERM": "dumb"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "fae")
def test_help_has_no_python_type_labels_and_fits_100_columns(words):
    text = _help(words)
    for label in ("<bool>", "<str>", "<int>", "<list[", "<path>", "{run_id}", "{log}"):
        assert label not in text, f"`fae {' '.join(words)} --help` shows {label!r}:\n{text}"
    too_wide = [line for line in text.splitlines() if len(line) > 100]
    assert not too_wide, too_wide


@pytest.mark.parametrize("words", [["record"], ["rejudge"], ["compare"], ["experiment", "run"]], ids=" ".join)
def test_help_at_80_columns_shows_every_option_name_whole(words):
    """Option names are never cut (Typer's boxed tables cut --paraphrase-model and --no-retry-errored)."""
    from fae.cli.main import build_cli

    command = build_cli()
    for word in words:
        command = command.commands[word]
    text = _help(words, columns=80)
    names = [name for param in command.params for name in (*param.opts, *param.secondary_opts) if name.startswith("--")]
    assert names
    cut = [name for name in names if not re.search(rf"(^|[\s,/]){re.escape(name)}([\s,/]|$)", text, re.M)]
    assert not cut, f"option names not shown whole at 80 columns: {cut}\n{text}"
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text


def test_arguments_and_values_get_conventional_placeholders():
    assert "Usage: fae show [OPTIONS] RUN_ID" in _help(["show"])
    record = _help(["record"])
    assert "--log" in record and "PATH" in record and "TEXT (repeatable)" in record


def test_starting_the_cli_loads_none_of_the_heavy_parts():
    # numpy, httpx, starlette and fhirpathpy load in the commands that use them, not for `fae stats` or --help
    script = (
        "import json, sys; from typer.testing import CliRunner; from fae.cli.main import app; "
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0; "
        "print(json.dumps([m for m in ('numpy', 'httpx', 'starlette', 'fhirpathpy') if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
