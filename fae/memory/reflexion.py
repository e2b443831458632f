"""Turning one recorded run into reflections: an evaluator call, then a reflector call.

Both are OpenAI-compatible chat completions sent to a base URL the caller
gives — in training, the recording proxy's LLM base for the run and the
``verifier`` actor — so they land in the log beside the run they judge. The
deterministic verdict (the task's strict validator) decides success; the
evaluator's opinion is advisory, as in the reference study. The reflector
answers ``{reflection_text, micro: [{resource, operation, tip}], macro_summary,
heuristic}``; the spec-grounded reflector may first call the specs MCP server's
tools (``fae.memory.spec_tools``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from fae.memory.errors import MemoryStoreError
from fae.memory.reflection_store import MacroReflection, MicroReflection
from fae.memory.spec_tools import SpecTools, chat_with_specs

EVALUATOR_SYSTEM = (
    "You evaluate one attempt of an agent at a FHIR task. Read the task, the tool calls with "
    "their results, the final answer and the deterministic validator's verdict. Reply with JSON "
    'only: {"success": true|false, "score": 0..1, "reason": "..."}.'
)
REFLECTOR_SYSTEM = (
    "You write reflections that help the next attempt at similar FHIR tasks. Reply with JSON "
    'only: {"reflection_text": "...", "micro": [{"resource": "Slot", "operation": '
    '"create|search|read|update|delete", "tip": "..."}], "macro_summary": "...", "heuristic": "..."}.'
)
SPECS_NOTE = (
    " Before you answer you may call the FHIR R4 specification tools (search parameters, structure "
    "and data type definitions) to check what the run did against the standard."
)
OPERATIONS = ("create", "search", "read", "update", "delete")
RESULT_CHARS = 600


@dataclass(frozen=True)
class RunView:
    """What reflection needs of a recorded run."""

    run_id: str
    task_id: str
    prompt: str
    tool_calls: tuple[tuple[str, Any, Any, bool], ...]  # tool, arguments, result, is_error
    answer: str | None
    stop_reason: str | None
    passed: bool | None  # the task's strict validator; None when it cannot judge
    reasons: tuple[str, ...] = ()

    def resource_types(self) -> list[str]:
        """The FHIR resource types the run's tool calls name, in first-seen order."""
        seen: list[str] = []
        for _, arguments, _, _ in self.tool_calls:
            kind = arguments.get("resourceType") if isinstance(arguments, dict) else None
            if isinstance(kind, str) and kind not in seen:
                seen.append(kind)
        return seen


@dataclass(frozen=True)
class Reflection:
    """One run's evaluation and reflections, plus the raw answers for the record."""

    evaluation: dict[str, Any]
    micro: list[MicroReflection]
    macro: MacroReflection
    grounded: bool = False
    raw: dict[str, str] = field(default_factory=dict)


def _clip(value: Any, limit: int = RESULT_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def trajectory_text(run: RunView) -> str:
    """The run as text an LLM reads: the task, each tool call and result, the answer, the verdict."""
    lines = ["TASK:", run.prompt.strip(), "", f"TOOL CALLS ({len(run.tool_calls)}):"]
    for number, (tool, arguments, result, is_error) in enumerate(run.tool_calls, 1):
        flag = " [error]" if is_error else ""
        lines.append(f"{number}. {tool}({_clip(arguments)}){flag}")
        lines.append(f"   -> {_clip(result)}")
    lines += ["", f"FINAL ANSWER ({run.stop_reason or 'no stop reason'}): {run.answer!r}"]
    if run.passed is None:
        lines.append("DETERMINISTIC VALIDATOR: not available")
    else:
        lines.append(f"DETERMINISTIC VALIDATOR: {'pass' if run.passed else 'fail'}")
        lines += [f"- {reason}" for reason in run.reasons[:10]]
    return "\n".join(lines)


def parse_json_reply(content: str | None) -> dict[str, Any]:
    """The JSON object in a model's reply: whole, fenced, or the first ``{...}`` in the text."""
    if not content:
        raise ValueError("the reply is empty")
    text = content.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    candidates = [text, fenced.group(1) if fenced else None, text[text.find("{") : text.rfind("}") + 1]]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError(f"no JSON object in the reply {text[:120]!r}")


async def chat(
    client: httpx.AsyncClient, llm_base: str, model: str, system: str, user: str, *, api_key: str | None = None
) -> str:
    """One chat completion; returns the reply's content. A transport or HTTP failure raises."""
    reply = await client.post(
        f"{llm_base.rstrip('/')}/chat/completions",
        headers={"authorization": f"Bearer {api_key or 'not-needed'}"},
        json={
            "model": model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        },
    )
    if reply.status_code != 200:
        raise MemoryStoreError(f"the model {model} answered HTTP {reply.status_code}: {reply.text[:200]}")
    try:
        return reply.json()["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        raise MemoryStoreError(f"the model {model} sent a body that is not a chat completion") from None


def _micro_rows(raw: Any, run: RunView, success: bool, created_at: str) -> list[MicroReflection]:
    rows = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        resource, operation, tip = item.get("resource"), item.get("operation"), item.get("tip")
        if not (isinstance(resource, str) and isinstance(operation, str) and isinstance(tip, str)):
            continue
        operation = operation.strip().lower()
        if operation not in OPERATIONS or not tip.strip():
            continue
        rows.append(
            MicroReflection(
                resource=resource.strip(),
                operation=operation,
                tip=tip.strip(),
                success=success,
                task_id=run.task_id,
                created_at=created_at,
                run_id=run.run_id,
            )
        )
    return rows


async def reflect_run(
    client: httpx.AsyncClient,
    run: RunView,
    *,
    llm_base: str,
    created_at: str,
    evaluator_model: str,
    reflector_model: str,
    tags: Sequence[str] = (),
    specs: SpecTools | None = None,
    api_key: str | None = None,
) -> Reflection:
    """Evaluate then reflect on ``run``; ``created_at`` is the caller's clock (the task's "now").

    ``specs``: the reflector may call the specs server's tools on demand (the spec-grounded reflector)."""
    trajectory = trajectory_text(run)
    evaluator_raw = await chat(client, llm_base, evaluator_model, EVALUATOR_SYSTEM, trajectory, api_key=api_key)
    try:
        evaluation = parse_json_reply(evaluator_raw)
    except ValueError as exc:
        evaluation = {"success": None, "reason": f"unreadable evaluator reply: {exc}"}
    success = run.passed if run.passed is not None else bool(evaluation.get("success"))
    reflector_input = trajectory + "\n\nEVALUATOR: " + json.dumps(evaluation, sort_keys=True)
    spec_calls: tuple = ()
    if specs is not None:
        answered = await chat_with_specs(
            client, llm_base, reflector_model, REFLECTOR_SYSTEM + SPECS_NOTE, reflector_input, specs, api_key=api_key
        )
        reflector_raw, spec_calls = answered.content, answered.calls
    else:
        reflector_raw = await chat(
            client, llm_base, reflector_model, REFLECTOR_SYSTEM, reflector_input, api_key=api_key
        )
    try:
        data = parse_json_reply(reflector_raw)
    except ValueError as exc:
        raise MemoryStoreError(f"the reflector's reply has no JSON reflection: {exc}", run_id=run.run_id) from None
    macro = MacroReflection(
        text=str(data.get("reflection_text") or ""),
        macro_summary=str(data.get("macro_summary") or ""),
        heuristic=str(data.get("heuristic") or ""),
        tags=tuple(dict.fromkeys([*tags, *run.resource_types()])),
        success=success,
        task_id=run.task_id,
        created_at=created_at,
        run_id=run.run_id,
    )
    if not (macro.text or macro.macro_summary or macro.heuristic):
        raise MemoryStoreError(
            "the reflector's reply holds no reflection text, summary or heuristic", run_id=run.run_id
        )
    return Reflection(
        evaluation=evaluation,
        micro=_micro_rows(data.get("micro"), run, success, created_at),
        macro=macro,
        grounded=bool(spec_calls),
        raw={"evaluator": evaluator_raw, "reflector": reflector_raw},
    )
