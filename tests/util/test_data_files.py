"""Every YAML and JSON file fae reads is parsed within limits: a billion-laughs file, a deeply nested one or a
huge one is refused in one line naming it, through every command that reads that kind of file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.errors import FileRefused
from fae.fhir.engine import MAX_BODY
from fae.tasks import scenarios
from fae.util import data_files
from fae.util.data_files import MAX_ALIASES, MAX_BYTES, MAX_DEPTH, MAX_VALUES, read_json, read_yaml

runner = CliRunner()


def laughs(levels: int = 9) -> str:
    """Nine levels of nine aliases each: 354 bytes that stand for 387 million values."""
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        name, below = chr(ord("a") + level), chr(ord("a") + level - 1)
        lines.append(f"{name}: &{name} [{', '.join(['*' + below] * 9)}]")
    lines.append(f"steps: *{chr(ord('a') + levels - 1)}")
    return "\n".join(lines) + "\n"


def nested(depth: int) -> str:
    """Valid YAML and valid JSON: a list in a list ``depth`` deep."""
    return "[" * depth + "]" * depth


def huge(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no disk (sparse)."""
    with open(path, "wb") as handle:
        handle.truncate(size)


def test_billion_laughs_is_refused_before_anything_walks_it(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs())
    assert path.stat().st_size < 1024
    with pytest.raises(FileRefused, match=rf"^{path} is refused: its aliases expand to more than"):
        read_yaml(path)


def test_many_aliases_and_an_alias_inside_its_own_anchor_are_refused(tmp_path):
    many = tmp_path / "many.yaml"
    many.write_text("a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n")
    with pytest.raises(FileRefused, match="more than 1,000 aliases"):
        read_yaml(many)
    loop = tmp_path / "loop.yaml"
    loop.write_text("a: &a [1, *a]\n")
    with pytest.raises(FileRefused, match="alias \\*a refers to a node that contains it"):
        read_yaml(loop)


def test_anchors_within_the_limits_are_read_as_yaml_reads_them(tmp_path):
    """fae's own scenario files use anchors; a file expanding to just under the limit still loads."""
    shipped = Path(scenarios.BUILTIN_DIR) / "register-patient.yaml"
    assert "&right" in shipped.read_text() and read_yaml(shipped)["scenarios"]
    path = tmp_path / "wide.yaml"
    path.write_text(laughs(levels=5))  # 9^5 = 59,049 values, far under MAX_VALUES
    loaded = read_yaml(path)
    assert len(loaded["e"]) == 9 and loaded["e"][0][0][0][0] == ["lol"] * 9


@pytest.mark.parametrize("reader", [read_yaml, read_json])
def test_nesting_past_the_limit_is_refused_and_up_to_it_is_read(tmp_path, reader):
    path = tmp_path / "deep.json"
    path.write_text(nested(MAX_DEPTH))
    value = reader(path)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []
    path.write_text(nested(MAX_DEPTH + 1))
    with pytest.raises(FileRefused, match=rf"^{path} is refused: it nests more than {MAX_DEPTH} levels deep"):
        reader(path)
    path.write_text(nested(200_000))  # past Python's recursion limit too
    with pytest.raises(FileRefused, match="nests more than"):
        reader(path)


@pytest.mark.parametrize("reader", [read_yaml, read_json])
def test_a_file_past_its_size_is_refused_without_reading_it_whole(tmp_path, reader):
    path = tmp_path / "huge.yaml"
    huge(path, MAX_BYTES + 1)
    with pytest.raises(FileRefused, match=rf"^{path} is refused: it is larger than 8,388,608 bytes"):
        reader(path)
    path.write_text("[1, 2]")
    assert reader(path, max_bytes=6) == [1, 2]
    with pytest.raises(FileRefused):
        reader(path, max_bytes=5)
    with pytest.raises(FileRefused):  # a device that never ends is read only up to the limit
        reader(Path("/dev/zero"))


def test_the_limits_hold_for_the_size_of_the_expansion_not_only_the_alias_count(tmp_path, monkeypatch):
    """Few aliases can stand for many values: the values they expand to are counted, not the aliases."""
    monkeypatch.setattr(data_files, "MAX_VALUES", 9**4)
    path = tmp_path / "four.yaml"
    path.write_text(laughs(levels=5))  # 45 aliases, 59,049 values
    with pytest.raises(FileRefused, match="expand to more than 6,561 values"):
        read_yaml(path)
    assert MAX_VALUES > 9**5


# -- through the command line: each kind of file, each way of being too much ------------------------------


def _plan(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    path = body.rename(tmp_path / "plan.yaml")
    log = tmp_path / "l.duckdb"
    return ["record", "--log", str(log), "--task", "builtin-create-patient", "--agent", f"plan:{path}"], path


def _task_dir(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    (tmp_path / "tasks" / "records").mkdir(parents=True)
    path = body.rename(tmp_path / "tasks" / "records" / "bad-task.yaml")
    return ["tasks", "check", str(tmp_path / "tasks")], path


def _scenario_dir(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    (tmp_path / "scenarios").mkdir()
    path = body.rename(tmp_path / "scenarios" / "bad.yaml")
    log = tmp_path / "l.duckdb"
    args = ["record", "--log", str(log), "--task", "t", "--agent", "scenario:x"]
    return [*args, "--scenarios-dir", str(tmp_path / "scenarios")], path


def _experiment(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    path = body.rename(tmp_path / "experiment.yaml")
    return ["experiment", "run", str(path), "--dry-run", "--log", str(tmp_path / "l.duckdb")], path


def _llm_plans(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    (tmp_path / "plans").mkdir()
    path = body.rename(tmp_path / "plans" / "bad.yaml")
    return ["llm", "serve", "--plans", str(tmp_path / "plans"), "--port", "0", "--no-suite"], path


def _retrieval_set(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    path = body.rename(tmp_path / "retrieval.yaml")
    return ["memory", "recall", str(path)], path


def _memory_manifest(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    (tmp_path / "store").mkdir()
    path = body.rename(tmp_path / "store" / "manifest.json")
    return ["memory", "show", "--store", str(tmp_path / "store")], path


def _seed_bundle(tmp_path: Path, body: Path) -> tuple[list[str], Path]:
    path = body.rename(tmp_path / "seed.json")
    return ["fhir", "serve", "--seed", str(path), "--port", "0"], path


Kind = Callable[[Path, Path], tuple[list[str], Path]]
YAML_KINDS: dict[str, Kind] = {
    "plan file": _plan,
    "task directory": _task_dir,
    "scenario directory": _scenario_dir,
    "experiment file": _experiment,
    "LLM plans directory": _llm_plans,
    "retrieval set": _retrieval_set,
}
JSON_KINDS: dict[str, tuple[Kind, int]] = {
    "memory manifest": (_memory_manifest, MAX_BYTES),
    "seed bundle": (_seed_bundle, MAX_BODY),
}
CASES = [
    *((kind, make, "billion laughs", MAX_BYTES) for kind, make in YAML_KINDS.items()),
    *((kind, make, "deep", MAX_BYTES) for kind, make in YAML_KINDS.items()),
    *((kind, make, "huge", MAX_BYTES) for kind, make in YAML_KINDS.items()),
    *((kind, make, "deep", limit) for kind, (make, limit) in JSON_KINDS.items()),
    *((kind, make, "huge", limit) for kind, (make, limit) in JSON_KINDS.items()),
]


@pytest.fixture
def fresh_registry(monkeypatch):
    """No scenario directory added by an earlier command of this process (``--scenarios-dir`` adds for good)."""
    monkeypatch.setattr(scenarios, "_added", [])
    monkeypatch.delenv(scenarios.PATH_VARIABLE, raising=False)


@pytest.mark.parametrize(("kind", "make", "case", "limit"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_the_command_refuses_the_file_in_one_line_naming_it(tmp_path, fresh_registry, kind, make, case, limit):
    body = tmp_path / "body"
    if case == "billion laughs":
        body.write_text(laughs())
    elif case == "deep":
        body.write_text(nested(MAX_DEPTH + 50))
    else:
        huge(body, limit + 1)
    args, path = make(tmp_path, body)
    result = runner.invoke(app, args)
    assert result.exit_code == 1, f"{kind}: exit {result.exit_code}\n{result.output}"
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {path} is refused: "), result.output


# the four kinds whose files are read by one function each (fae.plan.read_plan_file, fae.tasks.sources.read_task_file)
NOT_YAML_KINDS = ("plan file", "task directory", "scenario directory", "LLM plans directory")


@pytest.mark.parametrize("kind", NOT_YAML_KINDS)
def test_a_file_that_is_not_yaml_is_one_line_naming_it(tmp_path, fresh_registry, kind):
    body = tmp_path / "body"
    body.write_text("steps: [\n  - a\n")  # PyYAML words this fault over several lines
    args, path = YAML_KINDS[kind](tmp_path, body)
    result = runner.invoke(app, args)
    assert result.exit_code == 1, f"{kind}: exit {result.exit_code}\n{result.output}"
    assert "Traceback" not in result.output
    said = result.output[result.output.index("error:") :].rstrip("\n")
    assert str(path) in said and "not valid YAML" in said and "\n" not in said, result.output
