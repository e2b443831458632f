"""Reflexion training, ``fae train-memory``: run training tasks, judge each run, reflect, store.

For each task and variation (at most two), an agent gets at most two trials
and stops at the first that passes the task's strict validator. Every trial is
a recorded run; its evaluator and reflector calls go through the recording
proxy as the ``verifier`` actor of that run, so the log holds them too. The
reflections go to a memory store stamped with the task's fixed "now".
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from fae.errors import FaeError, RecordError
from fae.memory.embeddings import DEFAULT_SPEC, Embedder, embedder_from_spec
from fae.memory.reflexion import RunView, reflect_run, specs_grounding
from fae.memory.reflection_store import MemoryStore

MAX_VARIATIONS = 2
MAX_TRIALS = 2
RUN_PREFIX = "train."
ACTOR = "verifier"

out = Console(highlight=False, width=None if sys.stdout.isatty() else 240)
err = Console(stderr=True, highlight=False)


@dataclass
class TrainedRun:
    run_id: str
    task_id: str
    variation: int
    trial: int
    status: str
    passed: bool | None
    micro: int
    macro: int
    grounded: bool
    evaluation: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainResult:
    store: Path
    runs: list[TrainedRun]
    stats: dict[str, Any]


def _strict_verdict(log: Any, run_id: str, now: datetime) -> tuple[Any, bool | None, tuple[str, ...]]:
    """The run as the judges load it, and the task's strict verdict (the official judge)."""
    from fae.judge.rejudge import build_plan, judge_run
    from fae.replay.source import load_runs

    run = next(load_runs(log, [run_id]))
    rows = judge_run(run, build_plan("task", {"mode": "strict"}), source="capture", judged_at=now)
    verdict = rows[0]
    reasons = tuple(str(r) for r in (verdict.evidence or {}).get("reasons", []))
    return run, verdict.passed, reasons


def _view(run: Any, prompt: str, passed: bool | None, reasons: tuple[str, ...]) -> RunView:
    from fae.replay.transcript import fold_transcript

    transcript = fold_transcript(run)
    return RunView(run_id=run.run_id, task_id=run.task_id, prompt=prompt,
                   tool_calls=tuple((c.tool, c.arguments, c.result, c.is_error) for c in transcript.tool_calls),
                   answer=transcript.answer, stop_reason=transcript.stop_reason, passed=passed, reasons=reasons)


async def train(log_path: str | Path, task_ids: list[str], *, store_dir: str | Path, llm_url: str,
                agent: str = "gold", variations: list[int] | None = None, trials: int = MAX_TRIALS,
                evaluator_model: str = "scripted:evaluator", reflector_model: str = "scripted:reflector",
                embedder: Embedder | None = None, use_specs: bool = False, api_key: str | None = None,
                llm_options: dict[str, Any] | None = None, suite: str = "train-memory",
                experiment: str | None = None, phase: str | None = None, run_prefix: str = RUN_PREFIX,
                paraphrase: Any = None) -> TrainResult:
    """Train a memory store from runs of ``task_ids`` played by ``agent``; returns what happened.

    ``experiment``, ``phase`` and ``run_prefix`` name the runs of an experiment's training phase;
    ``paraphrase`` (a ``fae.harness.run.Paraphrase``) rewords each prompt the agent sees.
    """
    from fae.agents.base import build_agent
    from fae.harness.run import RunSpec, execute_run
    from fae.harness.stack import open_stack
    from fae.harness.suite_runner import base_run_id, render_task

    if not task_ids:
        raise FaeError("name at least one training task (--task)")
    chosen = list(dict.fromkeys(variations if variations is not None else range(MAX_VARIATIONS)))[:MAX_VARIATIONS]
    trials = max(1, min(trials, MAX_TRIALS))
    runner = build_agent(agent, **(llm_options or {}))
    rendered = {(t, v): render_task(t, v) for t in task_ids for v in chosen}
    first_now = min(r.now for r in rendered.values())
    store = MemoryStore.create(store_dir, embedder or embedder_from_spec(DEFAULT_SPEC),
                               created_at=first_now.isoformat())
    results: list[TrainedRun] = []
    async with open_stack(log_path, llm_url=llm_url) as stack, httpx.AsyncClient(timeout=120) as client:
        _, existing = stack.log.query("SELECT run_id FROM runs")
        taken = {run_id for (run_id,) in existing}
        for (task_id, variation), task in rendered.items():
            meta = getattr(task, "meta", None)
            tags = [meta.family] if meta is not None else []
            for trial in range(trials):
                run_id = run_prefix + base_run_id(task_id, variation, agent, trial)
                if run_id in taken:
                    raise RecordError(f"the log already holds training run {run_id}; train into a new log")
                spec = RunSpec(run_id=run_id, task_id=task_id, variation=variation, agent=agent,
                               repeat=trial, suite=suite, experiment=experiment, phase=phase)
                status = await execute_run(stack, spec, task, runner, paraphrase=paraphrase)
                run, passed, reasons = _strict_verdict(stack.log, run_id, task.now)
                grounding = None
                if use_specs:
                    specs_url = stack.extra_mcp(run_id, ACTOR).get("specs") if hasattr(stack, "extra_mcp") else None
                    if specs_url:
                        grounding = specs_grounding(specs_url)
                    else:
                        err.print("warning: no specs MCP server in this stack; reflecting without spec grounding")
                reflection = await reflect_run(
                    client, _view(run, task.prompt, passed, reasons), llm_base=stack.llm_base(run_id, ACTOR),
                    created_at=task.now.isoformat(), evaluator_model=evaluator_model,
                    reflector_model=reflector_model, tags=tags, grounding=grounding, api_key=api_key)
                store.add_micro(reflection.micro)
                store.add_macro([reflection.macro])
                results.append(TrainedRun(run_id, task_id, variation, trial, status, passed,
                                          len(reflection.micro), 1, reflection.grounded, reflection.evaluation))
                if passed:
                    break
    return TrainResult(store=Path(store_dir), runs=results, stats=store.stats())


def _ints(text: str) -> list[int]:
    values: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        values.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return values


def train_memory(
    task: Annotated[list[str], typer.Option("--task", "-t", help="Training task id (repeatable).")],
    store: Annotated[Path, typer.Option("--store", "-s", help="Memory store directory (made if new).")],
    llm_url: Annotated[str, typer.Option(help="OpenAI-compatible base URL for the evaluator and reflector "
                                              "(and an LLM agent).", envvar="OPENAI_BASE_URL")],
    log: Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log the training runs go to.",
                                      envvar="FAE_LOG")] = Path("fae.duckdb"),
    agent: Annotated[str, typer.Option("--agent", "-a", help="The acting agent: gold, plan:PATH, "
                                                              "langchain:CONFIG[@MODEL].")] = "gold",
    variations: Annotated[str, typer.Option(help="Variations, at most two are used, e.g. 0,1.")] = "0,1",
    trials: Annotated[int, typer.Option(min=1, max=MAX_TRIALS, help="Trials per variation; stops on a pass.")] = 2,
    evaluator_model: Annotated[str, typer.Option(help="Evaluator model.")] = "scripted:evaluator",
    reflector_model: Annotated[str, typer.Option(help="Reflector model.")] = "scripted:reflector",
    embedder: Annotated[str, typer.Option(help="Embedding backend: static, hashed-bow or openai:MODEL.")] = DEFAULT_SPEC,
    embeddings_url: Annotated[str | None, typer.Option(help="Base URL for an openai:MODEL embedder.")] = None,
    specs: Annotated[bool, typer.Option(help="Ground the reflector in the FHIR R4 specs server.")] = False,
    api_key: Annotated[str | None, typer.Option(help="API key for the LLM endpoint.", envvar="OPENAI_API_KEY")] = None,
) -> None:
    """Reflexion training: run tasks, judge each run, and store the reflections in a memory store."""
    import anyio

    try:
        chosen = _ints(variations)
    except ValueError:
        raise FaeError(f"--variations {variations!r} is not a list like 0,1") from None
    if len(chosen) > MAX_VARIATIONS:
        err.print(f"note: training uses at most {MAX_VARIATIONS} variations per task: {chosen[:MAX_VARIATIONS]}")
    backend = embedder_from_spec(embedder, base_url=embeddings_url, api_key=api_key)
    options = {"api_key": api_key} if api_key and agent.startswith("langchain:") else {}
    result = anyio.run(functools.partial(
        train, log, task, store_dir=store, llm_url=llm_url, agent=agent, variations=chosen, trials=trials,
        evaluator_model=evaluator_model, reflector_model=reflector_model, embedder=backend,
        use_specs=specs, api_key=api_key, llm_options=options))
    table = Table(title=f"trained {store} from {len(result.runs)} runs (log {log})")
    for column in ("run", "status", "strict", "micro", "macro", "grounded"):
        table.add_column(column)
    for run in result.runs:
        strict = "n/a" if run.passed is None else ("pass" if run.passed else "fail")
        table.add_row(run.run_id, run.status, strict, str(run.micro), str(run.macro), "yes" if run.grounded else "no")
    out.print(table)
    stats = result.stats
    out.print(f"store: {stats['micro']} micro, {stats['macro']} macro reflections; "
              f"embedding {stats['embedding']['name']} ({stats['embedding']['dimension']}-d), index {stats['index']}",
              markup=False)
