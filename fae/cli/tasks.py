"""`fae tasks`: list the suite, show one task, render a variation, check a task directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import msgspec
import typer

from fae.cli.console import echo, error_line, out
from fae.errors import FaeError
from fae.plan import plan_to_dict

if TYPE_CHECKING:
    from fae.tasks.suite import Suite

app = typer.Typer(help="The task suite: list tasks, show one, render a variation.", no_args_is_help=True)


def _suite() -> Suite:
    """The task suite, loaded only by the commands that use it (with fhirpathpy: a second of start-up)."""
    from fae.tasks.suite import load_suite

    return load_suite()


def _fail(exc: FaeError) -> NoReturn:
    error_line(exc)
    raise typer.Exit(1)


@app.command("list")
def list_tasks(
    family: Annotated[str | None, typer.Option(help="Only this family.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """One line per task: id, family, difficulty, writes, title."""
    suite = _suite()
    for task in suite.values():
        if family and task.family != family:
            continue
        if as_json:
            echo(json.dumps(task.describe()))
        else:
            kind = "write" if task.writes else "read"
            echo(f"{task.id:34} {task.family:10} d{task.difficulty} {kind:5} {task.title}")


@app.command("show")
def show(
    task_id: Annotated[str, typer.Argument(help="Task id, e.g. sched-book-appointment.")],
) -> None:
    """A task's definition: metadata, prompt template and check spec."""
    try:
        task = _suite()[task_id]
    except FaeError as exc:
        _fail(exc)
    echo(
        json.dumps(
            {**task.describe(), "source": task.source, "prompt": task.prompt, "check": msgspec.to_builtins(task.check)},
            indent=2,
        )
    )


@app.command("render")
def render(
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    variation: Annotated[int, typer.Option("--variation", "-v", help="Variation number (>= 0).")] = 0,
    part: Annotated[str, typer.Option(help="all | prompt | seed | plan | check")] = "all",
) -> None:
    """One variation: prompt, fixed now, parameters, gold plan, check spec and seed bundle."""
    try:
        rendered = _suite()[task_id].render(variation)
    except FaeError as exc:
        _fail(exc)
    parts = {
        "prompt": rendered.prompt,
        "seed": rendered.seed_bundle,
        "plan": plan_to_dict(rendered.gold_plan),
        "check": msgspec.to_builtins(rendered.check_spec),
    }
    if part == "prompt":
        echo(rendered.prompt, end="")
        return
    if part in parts:
        echo(json.dumps(parts[part], indent=2))
        return
    if part != "all":
        error_line(f"--part is one of all, {', '.join(parts)}")
        raise typer.Exit(1)
    echo(
        json.dumps(
            {
                "task": rendered.task_id,
                "variation": rendered.variation,
                "now": rendered.now.isoformat(),
                "meta": msgspec.to_builtins(rendered.meta),
                "params": rendered.params,
                "answer_tags": list(rendered.answer_tags),
                **parts,
            },
            indent=2,
        )
    )


@app.command("check")
def check(
    directory: Annotated[Path, typer.Argument(help="A task directory: one folder per family, a YAML file per task.")],
    variations: Annotated[str, typer.Option(help="Variations whose gold plans are played, e.g. 0-2.")] = "0-2",
) -> None:
    """Check a task directory as fae checks its own suite: schema, gold plans (fair, passing), mutants."""
    import anyio

    from fae.harness.task_check import check_tasks
    from fae.tasks.suite import clashes, load_task_dir

    try:
        lo, _, hi = variations.partition("-")
        chosen = list(range(int(lo), int(hi or lo) + 1))
        if not chosen:
            raise ValueError
    except ValueError:
        _fail(FaeError(f"--variations {variations!r} is not a range like 0-2"))
    if not directory.is_dir():
        _fail(FaeError(f"task directory {directory} does not exist"))
    try:
        tasks = list(load_task_dir(directory).values())
    except FaeError as exc:
        _fail(exc)
    if not tasks:
        _fail(FaeError(f"{directory} holds no tasks (one folder per family, a YAML file per task)"))
    try:
        clashing = clashes(directory, {task.id: task for task in tasks})
    except FaeError as exc:
        _fail(exc)
    for problem in clashing:
        out.print(problem, soft_wrap=True)

    def show(report: Any) -> None:
        killed = sum(report.mutants.values())
        status = "ok" if not report.problems else f"{len(report.problems)} problems"
        out.print(f"{report.task_id}: {status}; mutants judged right {killed}/{sum(report.applied.values())}")
        for problem in report.problems:
            out.print(f"  {problem}", soft_wrap=True)

    reports = anyio.run(lambda: check_tasks(tasks, chosen, on_task=show))
    bad = list(
        dict.fromkeys([problem.split(":", 1)[0] for problem in clashing] + [r.task_id for r in reports if r.problems])
    )
    out.print(
        f"{len(reports)} tasks checked on variations {variations}: "
        + ("all pass" if not bad else f"{len(bad)} with problems: {', '.join(bad)}"),
    )
    if bad:
        raise typer.Exit(1)
