"""Reflexion training (``fae train-memory``): run training tasks, judge each run, reflect, store.

For each task and variation (at most two), an agent gets at most two trials
and stops at the first that passes the task's strict validator. Every trial is
a recorded run; its evaluator and reflector calls go through the recording
proxy as the ``verifier`` actor of that run, so the log holds them too. The
reflections go to a memory store stamped with the task's fixed "now".
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx

from fae.agents.base import declared_upstreams
from fae.errors import FaeError, RecordError
from fae.harness.spec_reflector import spec_tools
from fae.memory.embeddings import DEFAULT_SPEC, Embedder, OpenAIEmbedder, embedder_from_spec, routed
from fae.memory.reflection_store import MemoryStore
from fae.memory.reflexion import RunView, reflect_run
from fae.util.limits import MAX_TRIALS, MAX_VARIATIONS

RUN_PREFIX = "train."
ACTOR = "verifier"
EMBED_ACTOR = "harness"  # the harness builds the store; the proxy knows a fixed set of actors
PROXIED = "openai:"  # an embedder of this spec is asked through the proxy, as the run it embeds for


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
    from fae.judge.rejudge import judge_run, judges_to_run
    from fae.replay.source import load_runs

    run = next(load_runs(log, [run_id]))
    rows = judge_run(run, judges_to_run("task", {"mode": "strict"}), source="capture", judged_at=now)
    verdict = rows[0]
    reasons = tuple(str(r) for r in (verdict.evidence or {}).get("reasons", []))
    return run, verdict.passed, reasons


def _add_macro(store: MemoryStore, macro: Any, embed_base: str | None) -> None:
    """Store a run's macro reflection, its embedding asked through that run's proxied URL (``embed_base``)."""
    with routed(embed_base):
        store.add_macro([macro])


def _view(run: Any, prompt: str, passed: bool | None, reasons: tuple[str, ...]) -> RunView:
    from fae.replay.transcript import fold_transcript

    transcript = fold_transcript(run)
    return RunView(
        run_id=run.run_id,
        task_id=run.task_id,
        prompt=prompt,
        tool_calls=tuple((c.tool, c.arguments, c.result, c.is_error) for c in transcript.tool_calls),
        answer=transcript.answer,
        stop_reason=transcript.stop_reason,
        passed=passed,
        reasons=reasons,
    )


async def train(
    log_path: str | Path,
    task_ids: list[str],
    *,
    store_dir: str | Path,
    llm_url: str,
    agent: str = "gold",
    variations: list[int] | None = None,
    trials: int = MAX_TRIALS,
    evaluator_model: str = "scripted:evaluator",
    reflector_model: str = "scripted:reflector",
    embedder: Embedder | None = None,
    embedder_spec: str | None = None,
    use_specs: bool = False,
    api_key: str | None = None,
    llm_options: dict[str, Any] | None = None,
    suite: str = "train-memory",
    warn: Callable[[str], None] | None = None,
    on_progress: Callable[[str, str], None] | None = None,
    experiment: str | None = None,
    phase: str | None = None,
    run_prefix: str = RUN_PREFIX,
    paraphrase: Any = None,
) -> TrainResult:
    """Train a memory store from runs of ``task_ids`` played by ``agent``; returns what happened.

    ``experiment``, ``phase`` and ``run_prefix`` name the runs of an experiment's training phase;
    ``paraphrase`` (a ``fae.harness.paraphrases.Paraphrase``) rewords each prompt the agent sees: one
    paraphrase per variation, fixed before the first run, played by every trial and shown to the reflector.
    ``embedder_spec`` names the embedding model when no ``embedder`` is given (default: the offline static
    one); an ``openai:MODEL`` endpoint is asked through the proxy, each call recorded under its run.
    """
    from fae.agents.prefixes import build_agent
    from fae.harness.config import StackConfig
    from fae.harness.paraphrases import fix_paraphrases, played_prompt
    from fae.harness.run import RunSpec, execute_run
    from fae.harness.stack import open_stack
    from fae.harness.worklist import base_run_id, render_task

    if not task_ids:
        raise FaeError("name at least one training task (--task)")
    chosen = list(dict.fromkeys(variations if variations is not None else range(MAX_VARIATIONS)))[:MAX_VARIATIONS]
    trials = max(1, min(trials, MAX_TRIALS))
    runner = build_agent(agent, **(llm_options or {}))
    rendered = {(t, v): render_task(t, v) for t in task_ids for v in chosen}
    first_now = min(r.now for r in rendered.values())
    embedding = embedder_spec or DEFAULT_SPEC
    proxied = embedder is None and embedding.startswith(PROXIED)  # its store is made once the first run names its URL
    backend = embedder or (None if proxied else embedder_from_spec(embedding))
    store = None if backend is None else MemoryStore.create(store_dir, backend, created_at=first_now.isoformat())
    results: list[TrainedRun] = []
    upstreams = declared_upstreams([runner])  # an A2A agent's server, behind the proxy like in any recording
    async with (
        open_stack(log_path, StackConfig(llm_url=llm_url), agent_upstreams=upstreams) as stack,
        httpx.AsyncClient(timeout=120) as client,
    ):
        _, existing = stack.log.query("SELECT run_id FROM runs")
        taken = {run_id for (run_id,) in existing}
        book = await fix_paraphrases(stack, rendered, paraphrase) if paraphrase is not None else None
        for (task_id, variation), task in rendered.items():
            meta = getattr(task, "meta", None)
            tags = [meta.family] if meta is not None else []
            for trial in range(trials):
                run_id = run_prefix + base_run_id(task_id, variation, agent, trial)
                if run_id in taken:
                    raise RecordError(f"the log already holds training run {run_id}; train into a new log")
                spec = RunSpec(
                    run_id=run_id,
                    task_id=task_id,
                    variation=variation,
                    agent=agent,
                    repeat=trial,
                    suite=suite,
                    experiment=experiment,
                    phase=phase,
                )
                status = await execute_run(stack, spec, task, runner, paraphrase=book)
                run, passed, reasons = _strict_verdict(stack.log, run_id, task.now)
                specs_url = None
                if use_specs:
                    specs_url = stack.extra_mcp(run_id, ACTOR).get("specs") if hasattr(stack, "extra_mcp") else None
                    if not specs_url:
                        message = "no specs MCP server in this stack; reflecting without spec grounding"
                        if warn is not None:
                            warn(f"warning: {message}")
                        else:
                            warnings.warn(message, stacklevel=2)
                llm_base = stack.llm_base(run_id, ACTOR)
                if llm_base is None:
                    raise RecordError("reflection needs an LLM URL to ask")
                async with AsyncExitStack() as opened:
                    # the spec-grounded reflector calls the specs tools it wants, through the proxy
                    specs = await opened.enter_async_context(spec_tools(specs_url)) if specs_url else None
                    reflection = await reflect_run(
                        client,
                        _view(run, played_prompt(book, task), passed, reasons),
                        llm_base=llm_base,
                        created_at=task.now.isoformat(),
                        evaluator_model=evaluator_model,
                        reflector_model=reflector_model,
                        tags=tags,
                        specs=specs,
                        api_key=api_key,
                    )
                embed_base = stack.llm_base(run_id, EMBED_ACTOR) if proxied else None
                if store is None:  # the endpoint's embedder, made at this first run's URL (its probe recorded there)
                    assert embed_base is not None  # the LLM upstream answered the reflection just now
                    made = await anyio.to_thread.run_sync(
                        partial(OpenAIEmbedder, embed_base, embedding.removeprefix(PROXIED), api_key=api_key)
                    )
                    store = MemoryStore.create(store_dir, made, created_at=first_now.isoformat())
                store.add_micro(reflection.micro)
                await anyio.to_thread.run_sync(_add_macro, store, reflection.macro, embed_base)  # a call blocks
                if on_progress is not None:
                    on_progress(run_id, status)
                results.append(
                    TrainedRun(
                        run_id,
                        task_id,
                        variation,
                        trial,
                        status,
                        passed,
                        len(reflection.micro),
                        1,
                        reflection.grounded,
                        reflection.evaluation,
                    )
                )
                if passed:
                    break
    assert store is not None  # at least one run was reflected on
    return TrainResult(store=Path(store_dir), runs=results, stats=store.stats())
