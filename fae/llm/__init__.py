"""fae.llm: a local OpenAI- and Anthropic-compatible server that plays scripted behaviours over real HTTP.

No model API is reachable from the machines fae is tested on, so tests and
``fae demo`` point the LLM path (agents, evaluator, reflector, soft judge) at
this server; a real endpoint is used by changing the base URL. See docs/llm.md.
"""

from fae.llm.app import MODELS, create_app
from fae.llm.behaviours import SCRIPTED_MODELS
from fae.llm.faults import FAULT_MODELS
from fae.llm.plan_registry import PlanEntry, PlanRegistry, entry_from_dict, load_plans_dir
from fae.llm.server import LlmServer

__all__ = [
    "FAULT_MODELS",
    "MODELS",
    "SCRIPTED_MODELS",
    "LlmServer",
    "PlanEntry",
    "PlanRegistry",
    "create_app",
    "entry_from_dict",
    "load_plans_dir",
]
