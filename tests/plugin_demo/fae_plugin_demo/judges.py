"""The ``answer_length`` judge: is the agent's final answer short enough?"""

from __future__ import annotations

from typing import Any

from fae import Rule, Verdict, register_judge


@register_judge("answer_length", max_chars=Rule(200, "the longest answer that passes"))
def answer_length(rules: dict[str, Any]):
    """The final answer is at most max_chars characters."""
    limit = rules["max_chars"]

    def verdict(run: Any) -> Verdict:
        answer = run.transcript.answer or ""
        return Verdict(
            "short" if len(answer) <= limit else "too_long",
            len(answer) <= limit,
            {"chars": len(answer), "max_chars": limit},
        )

    return verdict
