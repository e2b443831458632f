"""The task suite's validators as a judge: strict or light, over the run's final state."""

from __future__ import annotations

from fae.errors import JudgeError
from fae.judge.context import RunContext
from fae.judge.registry import JudgeFn, Rule, Verdict, register_judge

MODES = ("strict", "light")


def task_check(ctx: RunContext, mode: str):
    """The task's strict or light Check for this run (computed once per run and mode), or None."""
    key = ("task", mode)
    if key not in ctx.memo:
        found = ctx.task
        if found is None:
            ctx.memo[key] = None
        else:
            task, rendered = found
            if mode == "light" and not task.writes:
                # a read-only task's light verdict is its strict one (Task.validate_light)
                ctx.memo[key] = task_check(ctx, "strict")
                return ctx.memo[key]
            validate = task.validate_strict if mode == "strict" else task.validate_light
            ctx.memo[key] = validate(rendered, ctx.transcript.answer, ctx.state, written=ctx.agent_writes)
    return ctx.memo[key]


@register_judge(
    "task", mode=Rule("strict", "strict: values and collateral writes enforced; light: tags and fields present")
)
def task_judge(rules: dict) -> JudgeFn:
    """The task's own validator (strict or light) over the final state and the answer."""
    mode = rules["mode"]
    if mode not in MODES:
        raise JudgeError(f"rule mode of judge 'task' is strict or light, got {mode!r}")

    def run(ctx: RunContext) -> Verdict:
        check = task_check(ctx, mode)
        if check is None:
            return Verdict("not_applicable", None, {"reason": f"no task {ctx.run.task_id!r} in the suite"})
        evidence = {"reasons": list(check.reasons)}
        if check.evidence:
            evidence["checked"] = check.evidence
        return Verdict("pass" if check.passed else "fail", bool(check.passed), evidence)

    return run
