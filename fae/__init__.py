"""fae — FHIR Agent Eval: record, replay and judge LLM agents that act on FHIR servers.

The public API (docs/api.md): ``open_log``, ``query``, ``tasks``, ``plan_runs``,
``record``, ``rejudge``, ``compare``, ``replay``, ``stats``, ``write_report``, and for plugins ``register_judge``,
``Rule``, ``Verdict``, ``RunContext``, ``register_agent``, ``add_task_dir``.
Names load on first use, so ``import fae.store`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fae.api import (
        Agent,
        AgentContext,
        AgentResult,
        Comparison,
        EventLog,
        FaeError,
        RejudgeResult,
        ReplayReport,
        Rule,
        RunContext,
        Study,
        SuiteResult,
        Verdict,
        add_task_dir,
        compare,
        open_log,
        plan_runs,
        query,
        record,
        register_agent,
        register_judge,
        rejudge,
        replay,
        stats,
        tasks,
        write_report,
    )

__all__ = [
    "Agent",
    "AgentContext",
    "AgentResult",
    "Comparison",
    "EventLog",
    "FaeError",
    "RejudgeResult",
    "ReplayReport",
    "Rule",
    "RunContext",
    "SuiteResult",
    "Verdict",
    "add_task_dir",
    "compare",
    "open_log",
    "plan_runs",
    "query",
    "record",
    "register_agent",
    "register_judge",
    "rejudge",
    "replay",
    "stats",
    "Study",
    "tasks",
    "write_report",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(import_module("fae.api"), name)
    raise AttributeError(f"module 'fae' has no attribute {name!r}")
