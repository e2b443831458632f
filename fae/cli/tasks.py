"""`fae tasks`: list the suite, show one task, render a variation."""

from __future__ import annotations

import json
from typing import Annotated

import msgspec
import typer

from fae.plan import plan_to_dict
from fae.errors import FaeError
from fae.tasks.suite import load_suite

app = typer.Typer(
    help="The task suite: list tasks, show one, render a variation.", no_args_is_help=True
)


def _fail(exc: FaeError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


@app.command("list")
def list_tasks(
    family: Annotated[str | None, typer.Option(help="Only this family.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """One line per task: id, family, difficulty, writes, title."""
    suite = load_suite()
    for task in suite.values():
        if family and task.family != family:
            continue
        if as_json:
            typer.echo(json.dumps(task.describe()))
        else:
            kind = "write" if task.writes else "read"
            typer.echo(f"{task.id:34} {task.family:10} d{task.difficulty} {kind:5} {task.title}")


@app.command("show")
def show(
    task_id: Annotated[str, typer.Argument(help="Task id, e.g. sched-book-appointment.")],
) -> None:
    """A task's definition: metadata, prompt template and check spec."""
    try:
        task = load_suite()[task_id]
    except FaeError as exc:
        _fail(exc)
    typer.echo(
        json.dumps(
            {**task.describe(), "source": task.source, "prompt": task.prompt, "check": task.check},
            indent=2,
        )
    )


@app.command("render")
def render(
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    variation: Annotated[
        int, typer.Option("--variation", "-v", help="Variation number (>= 0).")
    ] = 0,
    part: Annotated[str, typer.Option(help="all | prompt | seed | plan | check")] = "all",
) -> None:
    """One variation: prompt, fixed now, parameters, gold plan, check spec and seed bundle."""
    try:
        rendered = load_suite()[task_id].render(variation)
    except FaeError as exc:
        _fail(exc)
    parts = {
        "prompt": rendered.prompt,
        "seed": rendered.seed_bundle,
        "plan": plan_to_dict(rendered.gold_plan),
        "check": rendered.check_spec,
    }
    if part == "prompt":
        typer.echo(rendered.prompt, nl=False)
        return
    if part in parts:
        typer.echo(json.dumps(parts[part], indent=2))
        return
    if part != "all":
        typer.echo(f"error: --part is one of all, {', '.join(parts)}", err=True)
        raise typer.Exit(1)
    typer.echo(
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
