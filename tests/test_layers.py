"""Data flows one way: no fae package imports a package above it, not even inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import fae

# Lowest first; packages on one line may import each other. docs/architecture.md draws the same stack.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "plan", "util"),
    ("store",),
    ("fhir", "tasks"),
    ("recorder", "proxy", "replay"),
    ("judge",),
    ("agents", "llm", "mcp", "memory"),
    ("harness",),
    ("report",),
    ("cli", "api"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
ROOT = Path(fae.__file__).parent


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every ``fae.*`` module a file imports, at module level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names if node.module == "fae"]
    return [(line, name) for line, name in found if name.startswith("fae.")]


def _layer_of(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return relative.parts[0] if len(relative.parts) > 1 else relative.parts[0]


def layering_violations() -> list[str]:
    """``file:line: package -> module`` for each import of a higher layer (and each unplaced package)."""
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "__main__.py" or path.parent == ROOT and path.name == "__init__.py":
            continue  # entry points and the public API sit on top of everything
        own = _layer_of(path)
        if own not in RANK:
            problems.append(f"{path}: package {own!r} has no layer in tests/test_layers.py")
            continue
        for line, module in _imports(path):
            target = module.split(".")[1]
            if target not in RANK:
                problems.append(f"{path}:{line}: imports {module}, whose package has no layer")
            elif RANK[target] > RANK[own]:
                problems.append(f"{path}:{line}: {own} (layer {RANK[own]}) imports {module} (layer {RANK[target]})")
    return problems


def test_no_package_imports_a_layer_above_it():
    problems = layering_violations()
    assert not problems, "backward imports:\n" + "\n".join(problems)


def test_the_check_sees_an_import_hidden_inside_a_function(tmp_path, monkeypatch):
    """A backward import inside a function body is caught, so the test cannot pass by hiding one."""
    package = tmp_path / "fae"
    (package / "store").mkdir(parents=True)
    (package / "store" / "__init__.py").write_text("")
    (package / "store" / "bad.py").write_text("def f():\n    from fae.harness.stack import open_stack\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", package)
    problems = layering_violations()
    assert len(problems) == 1 and "store (layer 1) imports fae.harness.stack (layer 6)" in problems[0], problems
