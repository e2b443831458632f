"""Where tasks come from: the packaged suite, user directories and installed plugins.

A task directory holds one folder per family with a YAML file per task, and
beside each folder an optional ``<family>.py`` defining the family's
``SCENARIOS`` (and ``EXTRA_CHECKS``). A family without its own module must be
one of fae's (records, insurance, scheduling, orders), whose scenarios it uses.

Directories are found, in this order: fae's packaged suite; each directory in
``FAE_TASKS_PATH`` (``os.pathsep``-separated); each one passed to
``add_task_dir`` (``--tasks-dir``); each one an installed package names in the
``fae.tasks`` entry-point group (the entry point loads a path, or a callable
returning one).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from fae.errors import TaskError, first_line
from fae.util.data_files import read_yaml

PACKAGED = Path(__file__).parent / "data"
BUILTIN_FAMILIES = ("records", "insurance", "scheduling", "orders")
ENTRY_POINT_GROUP = "fae.tasks"

_added: list[Path] = []


def read_task_file(path: Path) -> Any:
    """A task or scenario file's YAML value, or one line saying why the file cannot give one (the suite and
    the scenario files read each file this way)."""
    try:
        return read_yaml(path)
    except OSError as exc:
        raise TaskError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise TaskError(f"{path}: not valid YAML: {first_line(exc)}") from None


def add_task_dir(path: str | Path) -> Path:
    """Load tasks from ``path`` too, after the packaged suite and ``FAE_TASKS_PATH``."""
    directory = Path(path).expanduser().resolve()
    if not directory.is_dir():
        raise TaskError(f"task directory {path} does not exist")
    if directory not in _added:
        _added.append(directory)
    return directory


@lru_cache(maxsize=1)
def _from_entry_points() -> tuple[Path, ...]:
    """The installed plugins' task directories, found once per process (a scan of every installed package)."""
    found = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            target = point.load()
            named: Any = target() if callable(target) else target
            directory = Path(named)
        except Exception as exc:  # a broken plugin is named, never a traceback
            raise TaskError(f"task plugin {point.name!r} ({point.value}) failed to load: {exc}") from None
        if not directory.is_dir():
            raise TaskError(f"task plugin {point.name!r} names {directory}, which is not a directory")
        found.append(directory.resolve())
    return tuple(found)


def task_dirs() -> tuple[Path, ...]:
    """Every task directory, packaged suite first, each once."""
    env = [Path(p).expanduser().resolve() for p in os.environ.get("FAE_TASKS_PATH", "").split(os.pathsep) if p]
    for directory in env:
        if not directory.is_dir():
            raise TaskError(f"FAE_TASKS_PATH names {directory}, which is not a directory")
    ordered: list[Path] = []
    for directory in [PACKAGED, *env, *_added, *_from_entry_points()]:
        if directory not in ordered:
            ordered.append(directory)
    return tuple(ordered)


def families(directory: Path) -> list[str]:
    """The family folders of a task directory, fae's in their usual order, others sorted."""
    if directory == PACKAGED:
        return list(BUILTIN_FAMILIES)
    return sorted(p.name for p in directory.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def family_module(family: str, directory: Path) -> ModuleType:
    """The module holding a family's scenarios: ``DIR/<family>.py`` or fae's own."""
    own = directory / f"{family}.py"
    if directory != PACKAGED and own.is_file():
        name = f"fae_user_tasks_{hashlib.sha256(str(own).encode()).hexdigest()[:10]}_{family}"
        spec = importlib.util.spec_from_file_location(name, own)
        if spec is None or spec.loader is None:
            raise TaskError(f"{own}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise TaskError(f"{own}: failed to import: {type(exc).__name__}: {exc}") from None
        return module
    if family in BUILTIN_FAMILIES:
        return importlib.import_module(f"fae.tasks.{family}")
    raise TaskError(
        f"{directory / family}: family {family!r} has no {family}.py beside it "
        f"and is not one of fae's ({', '.join(BUILTIN_FAMILIES)})"
    )
