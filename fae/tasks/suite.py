"""Loading the task suite: YAML files in data/<family>/ joined with their family's scenario code."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from fae.errors import FaeError, TaskError
from fae.tasks.check_shape import check_problems
from fae.tasks.model import Task
from fae.tasks.sources import BUILTIN_FAMILIES, PACKAGED, families, family_module, task_dirs
from fae.util.data_files import read_yaml

DATA = PACKAGED
FAMILIES = BUILTIN_FAMILIES
TOOLS = ("createResource", "searchResources", "getResourceById", "updateResource", "deleteResource")

_FIELDS = {
    "id",
    "title",
    "difficulty",
    "writes",
    "scenario",
    "options",
    "prompt",
    "answer_tags",
    "gold_plan",
    "check",
    "required_resources",
    "required_tools",
    "prohibited_tools",
    "min_tool_calls",
    "extra_check",
    "derived",
    "fhir_access",
}
FHIR_ACCESS = ("mcp", "direct")


class Suite(Mapping[str, Task]):
    """Tasks by id, in family then file order."""

    def __init__(self, tasks: list[Task]):
        self._tasks: dict[str, Task] = {}
        for task in tasks:
            if task.id in self._tasks:
                raise TaskError(f"task id {task.id!r} is defined twice ({task.source})")
            self._tasks[task.id] = task

    def __getitem__(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise TaskError(f"no task {task_id!r}; `fae tasks list` shows the ids") from None

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def __iter__(self) -> Iterator[str]:
        return iter(self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)

    def family(self, name: str) -> list[Task]:
        """The tasks of one family."""
        return [t for t in self._tasks.values() if t.family == name]


def _tools(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or any(t not in TOOLS for t in raw):
        raise TaskError(f"{where}: expected a list of tool names from {TOOLS}, got {raw!r}")
    return tuple(raw)


def task_from_dict(raw: Mapping[str, Any], family: str, *, source: str = "", module: Any = None) -> Task:
    """Build a Task from one parsed YAML file, checking its shape (``module``: the family's scenarios)."""
    where = source or str(raw.get("id", "?"))
    if not isinstance(raw, Mapping):
        raise TaskError(f"{where}: a task file holds a mapping")
    unknown = set(raw) - _FIELDS
    missing = {
        "id",
        "title",
        "difficulty",
        "writes",
        "scenario",
        "prompt",
        "gold_plan",
        "check",
    } - set(raw)
    if unknown or missing:
        raise TaskError(f"{where}: unknown fields {sorted(unknown)}, missing fields {sorted(missing)}")
    if module is None:
        module = family_module(family, PACKAGED)
    scenario = getattr(module, "SCENARIOS", {}).get(raw["scenario"])
    if scenario is None:
        raise TaskError(f"{where}: family {family} has no scenario {raw['scenario']!r}")
    extra = None
    if raw.get("extra_check"):
        extra = getattr(module, "EXTRA_CHECKS", {}).get(raw["extra_check"])
        if extra is None:
            raise TaskError(f"{where}: family {family} has no extra check {raw['extra_check']!r}")
    difficulty = raw["difficulty"]
    if difficulty not in (1, 2, 3):
        raise TaskError(f"{where}: difficulty is 1, 2 or 3")
    templates = raw.get("required_tools") or []
    tags = tuple(raw.get("answer_tags") or ())
    if not tags:
        raise TaskError(f"{where}: a task needs at least one answer tag")
    derived = tuple(raw.get("derived") or ())
    fhir_access = raw.get("fhir_access", "mcp")
    if fhir_access not in FHIR_ACCESS:
        raise TaskError(f"{where}: fhir_access is mcp or direct, got {fhir_access!r}")
    shape = check_problems(raw["check"])
    if shape:
        raise TaskError(f"{where}: {shape[0]}")
    task = Task(
        id=str(raw["id"]),
        family=family,
        title=str(raw["title"]),
        difficulty=difficulty,
        writes=bool(raw["writes"]),
        prompt=str(raw["prompt"]),
        answer_tags=tags,
        gold_plan=list(raw["gold_plan"]),
        check=dict(raw["check"]),
        options=tuple(raw.get("options") or ()),
        scenario=scenario,
        required_resources=tuple(raw.get("required_resources") or ()),
        required_tools=tuple(_tools(t, where) for t in templates),
        prohibited_tools=_tools(raw.get("prohibited_tools") or [], where),
        min_tool_calls=int(raw.get("min_tool_calls", 1)),
        extra_check=extra,
        extra_check_name=str(raw["extra_check"]) if extra is not None else None,
        source=source,
        derived=derived,
        fhir_access=fhir_access,
    )
    return task


def _load_dir(root: Path) -> list[Task]:
    tasks = []
    for family in families(root):
        paths = sorted((root / family).glob("*.yaml"))
        module = family_module(family, root) if paths else None
        for path in paths:
            try:
                raw = read_yaml(path)
            except OSError as exc:
                raise TaskError(f"{path}: cannot read: {exc.strerror or exc}") from None
            except yaml.YAMLError as exc:
                raise TaskError(f"{path}: not valid YAML: {exc}") from None
            source = str(path.relative_to(root)) if root == PACKAGED else str(path)
            tasks.append(task_from_dict(raw, family, source=source, module=module))
    return tasks


@lru_cache(maxsize=8)
def _load(roots: tuple[Path, ...]) -> Suite:
    return Suite([task for root in roots for task in _load_dir(root)])


def load_task_dir(root: str | Path) -> Suite:
    """The tasks of one directory, read now (not cached: a task being written is read as it is)."""
    return Suite(_load_dir(Path(root).resolve()))


def clashes(directory: str | Path, tasks: Mapping[str, Task]) -> list[str]:
    """For each of ``tasks`` (read from ``directory``) whose id a task directory fae already reads defines (its
    own suite first), one line naming both files: ``--tasks-dir`` refuses such a directory."""
    root = Path(directory).resolve()
    found = []
    for other in task_dirs():
        if other == root:
            continue
        known = load_suite(other)
        found += [
            f"{task_id}: task id already defined in {other / known[task_id].source} (a task directory cannot "
            "redefine it)"
            for task_id in tasks
            if task_id in known
        ]
    return found


def load_suite(root: str | Path | None = None) -> Suite:
    """The tasks under ``root``; by default fae's suite and every registered task directory."""
    return _load((Path(root).resolve(),) if root else task_dirs())


@lru_cache(maxsize=1024)
def rendered_task(task_id: str, variation: int) -> tuple[Any, Any] | None:
    """(task, rendered variation) from the task suite, or None when the suite has no such task."""
    try:
        suite = load_suite()
        if task_id not in suite:
            return None
        task = suite[task_id]
        return task, task.render(variation)
    except FaeError:
        return None
