import json

from typer.testing import CliRunner

from fae.cli import app
from fae.memory.reflection_store import MacroReflection, MemoryStore, MicroReflection
from tests.memory.conftest import NOW

runner = CliRunner()


def make(tmp_path, embedder):
    store = MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    store.add_micro(
        [
            MicroReflection(
                resource="Coverage",
                operation="update",
                tip="set status cancelled, never delete",
                success=True,
                task_id="ins-cancel-coverage",
                created_at=NOW,
            )
        ]
    )
    store.add_macro(
        [
            MacroReflection(
                text="t",
                macro_summary="Cancel coverage with an update",
                heuristic="h",
                success=True,
                task_id="ins-cancel-coverage",
                created_at=NOW,
            )
        ]
    )
    return tmp_path / "m"


def test_show_and_search(tmp_path, embedder):
    path = make(tmp_path, embedder)
    shown = runner.invoke(app, ["memory", "show", "--store", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "1 micro, 1 macro" in shown.output and "set status cancelled" in shown.output
    found = runner.invoke(app, ["memory", "search", "--store", str(path), "cancel the insurance"])
    assert found.exit_code == 0 and json.loads(found.output.splitlines()[0])["task_id"] == "ins-cancel-coverage"
    tips = runner.invoke(
        app, ["memory", "search", "--store", str(path), "--resource", "Coverage", "--operation", "update"]
    )
    assert "never delete" in tips.output


def test_user_mistakes_are_one_line(tmp_path, embedder):
    path = make(tmp_path, embedder)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["format_version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["memory", "show", "--store", str(path)])
    assert result.exit_code == 1 and "format version 99" in result.output and "Traceback" not in result.output
    missing = runner.invoke(app, ["memory", "search", "--store", str(tmp_path / "none"), "x"])
    assert missing.exit_code == 1 and "no memory store" in missing.output


def test_recall_command(tmp_path):
    from pathlib import Path

    data = Path(__file__).parent / "data" / "retrieval.yaml"
    result = runner.invoke(app, ["memory", "recall", str(data), "--embedder", "hashed-bow"])
    assert result.exit_code == 0 and "0.487" in result.output
