"""The state_drift judge: fold and capture must agree; a difference names the resources."""

from __future__ import annotations

from fae.judge.context import RunContext
from fae.judge.registry import JudgeFn, Rule, Verdict, register_judge
from fae.replay.drift import state_drift


@register_judge("state_drift", ignore_types=Rule(["AuditEvent"], "resource types the server makes itself, left out"))
def state_drift_judge(rules: dict) -> JudgeFn:
    """Compare the fold of the log's writes with the state the harness read back."""
    ignored = tuple(rules["ignore_types"])

    def run(ctx: RunContext) -> Verdict:
        if ctx.captured is None:
            return Verdict("not_captured", None, {"reason": "the run has no state capture"})
        differences = state_drift(ctx.fold, ctx.captured[1], ignored)
        evidence = {"differences": differences, "fold_problems": ctx.fold.problems, "resources": len(ctx.captured[1])}
        if differences:
            return Verdict("state_drift", False, evidence)
        return Verdict("agree", True, evidence)

    return run
