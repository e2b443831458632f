"""fae — FHIR Agent Eval: record, replay and judge LLM agents that act on FHIR servers.

The public API (docs/api.md): ``open_log``, ``query``, ``tasks``, ``run_specs``,
``record``, ``rejudge``, ``compare``, ``replay``, ``stats``, ``write_report``, and for plugins ``register_judge``,
``Rule``, ``Verdict``, ``RunContext``, ``register_agent``, ``add_task_dir``; a recording's configuration
``RecordConfig`` (with ``StackConfig``, ``LlmConfig``, ``Execution``).
Names load on first use, so ``import fae.store`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fae.api import *  # noqa: F403  (the names fae.api.__all__ lists, for type checkers)


def __getattr__(name: str) -> Any:
    """``fae.NAME`` is ``fae.api.NAME`` for each name ``fae.api.__all__`` lists (its one list), loaded on first use;
    ``from fae import *`` asks for ``__all__`` here too."""
    api = import_module("fae.api")
    if name == "__all__" or name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'fae' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *import_module("fae.api").__all__})
