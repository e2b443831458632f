"""Loading the task suite: YAML files in data/<family>/ joined with their family's scenario code."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import msgspec

from fae.errors import FaeError, TaskError
from fae.tasks.check_spec import CheckSpec, check_problems
from fae.tasks.model import Rendered, Task
from fae.tasks.sources import PACKAGED, families, family_module, read_task_file, task_dirs
from fae.util.data_files import field_error

Tool = Literal["createResource", "searchResources", "getResourceById", "updateResource", "deleteResource"]
TOOLS: tuple[str, ...] = get_args(Tool)


class TaskFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One task file as written (docs/tasks.md, "Writing a task"); a key it does not know is refused."""

    id: str
    title: str
    difficulty: Literal[1, 2, 3]
    writes: bool
    scenario: str
    prompt: str
    answer_tags: Annotated[list[str], msgspec.Meta(min_length=1)]
    gold_plan: list[Any]
    check: CheckSpec
    options: list[dict[str, Any]] = []
    required_resources: list[str] = []
    required_tools: list[list[Tool]] = []  # alternatives, each an ordered tool sequence
    prohibited_tools: list[Tool] = []
    min_tool_calls: int = 1
    extra_check: str | None = None  # the name of one of the family's EXTRA_CHECKS
    derived: list[str] = []
    fhir_access: Literal["mcp", "direct"] = "mcp"


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


def task_from_dict(raw: Any, family: str, *, source: str = "", module: Any = None) -> Task:
    """Build a Task from one parsed YAML file, checking its shape (``module``: the family's scenarios)."""
    where = source or str(raw.get("id", "?") if isinstance(raw, Mapping) else "?")
    try:
        found = msgspec.convert(raw, TaskFile)
    except msgspec.ValidationError as exc:
        raise TaskError(f"{where}: {field_error(exc, kind=TaskFile, raw=raw)}") from None
    if module is None:
        module = family_module(family, PACKAGED)
    scenario = getattr(module, "SCENARIOS", {}).get(found.scenario)
    if scenario is None:
        raise TaskError(f"{where}: scenario: family {family} has no scenario {found.scenario!r}")
    extra = None
    if found.extra_check:
        extra = getattr(module, "EXTRA_CHECKS", {}).get(found.extra_check)
        if extra is None:
            raise TaskError(f"{where}: extra_check: family {family} has no extra check {found.extra_check!r}")
    shape = check_problems(found.check)
    if shape:
        raise TaskError(f"{where}: {shape[0]}")
    return Task(
        id=found.id,
        family=family,
        title=found.title,
        difficulty=found.difficulty,
        writes=found.writes,
        prompt=found.prompt,
        answer_tags=tuple(found.answer_tags),
        gold_plan=found.gold_plan,
        check=found.check,
        options=tuple(found.options),
        scenario=scenario,
        required_resources=tuple(found.required_resources),
        required_tools=tuple(map(tuple, found.required_tools)),
        prohibited_tools=tuple(found.prohibited_tools),
        min_tool_calls=found.min_tool_calls,
        extra_check=extra,
        extra_check_name=found.extra_check if extra is not None else None,
        source=source,
        derived=tuple(found.derived),
        fhir_access=found.fhir_access,
    )


def _load_dir(root: Path) -> list[Task]:
    tasks = []
    for family in families(root):
        paths = sorted((root / family).glob("*.yaml"))
        module = family_module(family, root) if paths else None
        for path in paths:
            raw = read_task_file(path)
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
def rendered_task(task_id: str, variation: int) -> tuple[Task, Rendered] | None:
    """(task, rendered variation) from the task suite, or None when the suite has no such task."""
    try:
        suite = load_suite()
        if task_id not in suite:
            return None
        task = suite[task_id]
        return task, task.render(variation)
    except FaeError:
        return None
