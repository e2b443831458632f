"""Scripted behaviours: the next assistant move for one request, worked out from its messages alone.

A behaviour is named by the request's ``model``. The plan-following ones
(gold, mistake-recover, wrong-answer) count the tool calls already answered in
the conversation, resolve the plan's references from those answers, and reply
with the next step as one tool call or, at the end, with the answer. The role
ones (evaluator, reflector, judge) reply with JSON text derived from the
conversation, overridable by a registry entry. Faults live in the HTTP layer.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import msgspec

from fae.errors import PlanError
from fae.llm.conversation import answered_calls, conversation_text, first_user_text
from fae.llm.plan_registry import PlanEntry, PlanRegistry
from fae.plan import AnswerStep, Plan, ToolStep, lookup, resolve

GOLD = "scripted:gold"
MISTAKE_RECOVER = "scripted:mistake-recover"
WRONG_ANSWER = "scripted:wrong-answer"
GIVE_UP = "scripted:give-up"
EVALUATOR = "scripted:evaluator"
REFLECTOR = "scripted:reflector"
JUDGE = "scripted:judge"
PARAPHRASE = "scripted:paraphrase"
PLAN_MODELS = (GOLD, MISTAKE_RECOVER, WRONG_ANSWER)
SCRIPTED_MODELS = (*PLAN_MODELS, GIVE_UP, EVALUATOR, REFLECTOR, JUDGE, PARAPHRASE)

# Lead-ins the scripted paraphraser puts before the request; the request's own words are kept whole,
# so every id, code and date survives, as a careful human paraphrase would keep them.
_PARAPHRASE_LEADS = (
    "A colleague at the front desk passes this on:",
    "Could you take care of the following for me?",
    "Here is a request from the clinic team:",
    "One more item for today's list:",
)

GIVE_UP_TEXT = "I cannot complete this task: I am giving up without making any calls."

_CRUD_OPERATIONS = {
    "createResource": "create",
    "searchResources": "search",
    "getResourceById": "read",
    "updateResource": "update",
    "deleteResource": "delete",
}
_TOOL_NAME = re.compile(r"\b(" + "|".join(_CRUD_OPERATIONS) + r")\b")
_RESOURCE_TYPE = re.compile(r"""resourceType\\?["']?\s*[:=]\s*\\?["']?([A-Z][A-Za-z]+)""")
_DIAGNOSTICS = re.compile(r"""diagnostics\\?["']?\s*:\s*\\?["']([^"'\\]{1,200})""")
_FAILURE = re.compile(
    r"""severity\\?["']?\s*:\s*\\?["'](?:error|fatal)|is_?[eE]rror\\?["']?\s*:\s*true"""
    r"""|cannot complete|gave up|giving up|unable to""",
)


class ToolCall(msgspec.Struct, frozen=True):
    """One function call the assistant makes; ``arguments`` is already resolved data."""

    id: str
    name: str
    arguments: dict[str, Any]


class Reply(msgspec.Struct, frozen=True):
    """The assistant's move: a tool call, or content text (never both)."""

    content: str | None = None
    tool_call: ToolCall | None = None

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_call is not None else "stop"


class _ScriptStep(msgspec.Struct, frozen=True):
    step: ToolStep
    corrupt: bool = False


def reply_for(
    model: str,
    messages: list[dict[str, Any]],
    registry: PlanRegistry,
    *,
    forced_tool: str | None = None,
) -> Reply:
    """The next move of scripted model ``model`` in this conversation.

    Raises PlanError when a plan behaviour finds no plan for the prompt or a
    reference cannot be resolved: a harness mistake, not model behaviour.
    """
    prompt = first_user_text(messages)
    if model == GIVE_UP:
        return Reply(content=GIVE_UP_TEXT)
    if model == PARAPHRASE:
        lead = _PARAPHRASE_LEADS[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(_PARAPHRASE_LEADS)]
        return Reply(content=f"{lead} {prompt.strip()}")
    if model in PLAN_MODELS:
        entry = registry.find_plan(prompt)
        if entry is None or entry.plan is None:
            suite = " or suite task variation" if registry.fallback is not None else ""
            raise PlanError(f"no registered plan{suite} matches the first user message {prompt[:80]!r}")
        return _plan_reply(model, entry, entry.plan, messages)
    if model == EVALUATOR:
        entry = registry.find(prompt, lambda e: e.verdict is not None)
        overrides = entry.verdict if entry and entry.verdict is not None else {}
        data = {**evaluate(conversation_text(messages)), **overrides}
    elif model == REFLECTOR:
        entry = registry.find(prompt, lambda e: e.reflection is not None)
        overrides = entry.reflection if entry and entry.reflection is not None else {}
        data = {**reflect(conversation_text(messages)), **overrides}
    elif model == JUDGE:
        entry = registry.find(prompt, lambda e: e.judge is not None)
        default = {"label": "agreement", "reason": "scripted judge: no override registered"}
        data = {**default, **(entry.judge if entry and entry.judge is not None else {})}
    else:
        raise ValueError(f"{model!r} is not a scripted model")
    if forced_tool is not None:
        return Reply(tool_call=ToolCall(id=_call_id(messages, 0), name=forced_tool, arguments=data))
    return Reply(content=json.dumps(data))


def _plan_reply(model: str, entry: PlanEntry, plan: Plan, messages: list[dict[str, Any]]) -> Reply:
    script = _script(model, entry, plan)
    calls = answered_calls(messages)
    scope: dict[str, Any] = dict(entry.variables)
    for script_step, call in zip(script, calls, strict=False):  # the agent may be mid-script
        if script_step.step.save and not script_step.corrupt:
            scope[script_step.step.save] = call.result
    position = len(calls)
    if position < len(script):
        script_step = script[position]
        try:
            args = resolve(script_step.step.args, scope)
        except PlanError as exc:
            raise PlanError(f"plan {plan.name!r}, call {position + 1}: {exc}") from None
        if script_step.corrupt:
            args = _corrupt(args)
        tool_call = ToolCall(id=_call_id(messages, position), name=script_step.step.call, arguments=args)
        return Reply(tool_call=tool_call)
    answer = next((s.answer for s in plan.steps if isinstance(s, AnswerStep)), "")
    try:
        if model == WRONG_ANSWER:
            if entry.wrong_answer is not None:
                return Reply(content=str(resolve(entry.wrong_answer, scope)))
            return Reply(content=_wrong(answer, scope))
        return Reply(content=str(resolve(answer, scope)))
    except PlanError as exc:
        raise PlanError(f"plan {plan.name!r}, answer: {exc}") from None


def _script(model: str, entry: PlanEntry, plan: Plan) -> list[_ScriptStep]:
    steps = [_ScriptStep(step) for step in plan.steps if isinstance(step, ToolStep)]
    if model != MISTAKE_RECOVER:
        return steps
    if entry.mistake is not None:
        steps.insert(entry.mistake.at, _ScriptStep(entry.mistake.step))
    elif steps:
        first = steps[0].step
        steps.insert(0, _ScriptStep(ToolStep(call=first.call, args=first.args), corrupt=True))
    return steps


def _call_id(messages: list[dict[str, Any]], position: int) -> str:
    """A call id fixed by the conversation and position, different for each position."""
    digest = hashlib.sha256(first_user_text(messages).encode()).hexdigest()[:12]
    return f"call_{digest}_{position + 1}"


def _corrupt(args: Any) -> Any:
    """The default mistake: every resourceType misspelled, or a bogus one if there is none."""

    def walk(value: Any) -> tuple[Any, bool]:
        if isinstance(value, dict):
            changed = False
            out = {}
            for key, item in value.items():
                if key == "resourceType" and isinstance(item, str) and len(item) > 2:
                    out[key] = item[:-2] + item[-1] + item[-2]
                    changed = True
                else:
                    out[key], sub = walk(item)
                    changed = changed or sub
            return out, changed
        if isinstance(value, list):
            walked = [walk(item) for item in value]
            return [item for item, _ in walked], any(sub for _, sub in walked)
        return value, False

    corrupted, changed = walk(args)
    if not changed and isinstance(corrupted, dict):
        corrupted = {**corrupted, "resourceType": "NotAResource"}
    return corrupted


def _wrong(answer: str, scope: dict[str, Any]) -> str:
    """The default wrong answer: each reference replaced by a plausible but wrong id."""

    def wrong_value(match: re.Match[str]) -> str:
        found = lookup(match.group(1), scope)
        text = found if isinstance(found, str) else json.dumps(found)
        return "wrong-" + hashlib.sha256(text.encode()).hexdigest()[:8]

    replaced = re.sub(r"\$\{([A-Za-z_][\w-]*(?:\.[\w-]+)*)\}", wrong_value, answer)
    if replaced == answer:
        return "wrong-" + hashlib.sha256(answer.encode()).hexdigest()[:8]
    return replaced


def evaluate(text: str) -> dict[str, Any]:
    """The default evaluator verdict: failure when the text shows an error outcome or a give-up."""
    failure = _FAILURE.search(text)
    if failure:
        return {
            "success": False,
            "score": 0.0,
            "reason": f"the trajectory shows {failure.group(0)!r}",
        }
    return {
        "success": True,
        "score": 1.0,
        "reason": "no error outcome or give-up in the trajectory",
    }


def reflect(text: str) -> dict[str, Any]:
    """A reflection derived from the FHIR tool calls and error diagnostics the text mentions."""
    seen: dict[tuple[str, str], str | None] = {}
    matches = list(_TOOL_NAME.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        window = text[match.end() : min(end, match.end() + 2000)]
        resource = _RESOURCE_TYPE.search(window)
        diagnostics = _DIAGNOSTICS.search(window)
        key = (resource.group(1) if resource else "Resource", _CRUD_OPERATIONS[match.group(1)])
        if seen.get(key) is None:
            seen[key] = diagnostics.group(1) if diagnostics else None
    micro = []
    for (rtype, operation), said in seen.items():
        if said:
            tip = f"When you {operation} {rtype}, the server said {said!r}; fix that first."
        else:
            tip = f"When you {operation} {rtype}, send its resourceType and reuse earlier ids."
        micro.append({"resource": rtype, "operation": operation, "tip": tip})
    errors = [d for d in seen.values() if d]
    steps = ", then ".join(f"{operation} {rtype}" for rtype, operation in seen) or "no FHIR calls"
    reflection_text = f"The attempt made {len(matches)} FHIR tool calls ({steps})."
    reflection_text += f" It met {len(errors)} server errors." if errors else " It met no server errors."
    return {
        "reflection_text": reflection_text,
        "micro": micro,
        "macro_summary": f"Strategy: {steps}.",
        "heuristic": (
            "Read the OperationOutcome diagnostics and correct the request before retrying."
            if errors
            else "Look up what the task refers to before writing, and reuse the ids you found."
        ),
    }
