"""Agents by name: a prefix registry (``gold``, ``plan:``, ``scenario:``, ``langchain:``, ``a2a:``, plugins' own)."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from fae.agents.a2a_agent import build_a2a_agent, check_a2a_spec
from fae.agents.base import Agent
from fae.agents.command import build_command_agent
from fae.agents.langchain_configs import configuration, spec_options
from fae.agents.scripted_agent import ScriptedAgent
from fae.errors import PlanError
from fae.plan import ToolStep, load_plan
from fae.tasks.scenarios import scenario_names, scenario_plan

AgentFactory = Callable[..., Agent]
"""Builds an agent from its full command-line spec (``PREFIX:REST``) and the LLM options."""

ENTRY_POINT_GROUP = "fae.agents"
_FACTORIES: dict[str, AgentFactory] = {}


def register_agent(prefix: str, factory: AgentFactory) -> None:
    """Make ``--agent PREFIX`` and ``--agent PREFIX:REST`` build agents with ``factory(spec, **llm_options)``."""
    if not prefix or ":" in prefix or prefix != prefix.strip():
        raise ValueError(f"an agent prefix is a non-empty word without ':', got {prefix!r}")
    if prefix in _FACTORIES and _FACTORIES[prefix] is not factory:
        raise ValueError(f"agent prefix {prefix!r} is registered twice")
    _FACTORIES[prefix] = factory


def _gold(spec: str, **_: Any) -> Agent:
    return ScriptedAgent(name="scripted:gold", plan=None)


def _scripted(spec: str, **_: Any) -> Agent:
    if spec != "scripted:gold":
        raise PlanError(f"unknown agent {spec!r}: the scripted agent is scripted:gold (or plan:PATH)")
    return _gold(spec)


FHIR_MCP_TOOLS = (
    "createResource",
    "searchResources",
    "getResourceById",
    "updateResource",
    "deleteResource",
    "listResourceTypes",
)
"""The tools of fae's FHIR MCP server, the only server a plan agent talks to."""


def _plan(spec: str, **_: Any) -> Agent:
    path = Path(spec.partition(":")[2])
    plan = load_plan(path)
    for index, step in enumerate(plan.steps):
        if isinstance(step, ToolStep) and step.call not in FHIR_MCP_TOOLS:
            raise PlanError(
                f"{path}: step {index + 1} calls {step.call!r}, which the FHIR MCP server does not "
                f"have (its tools: {', '.join(FHIR_MCP_TOOLS)})"
            )
    return ScriptedAgent(name=f"plan:{path.name}", plan=plan)


def _scenario(spec: str, **_: Any) -> Agent:
    name = spec.partition(":")[2]
    if name not in scenario_names():
        raise PlanError(f"unknown scenario {name!r}; the scenarios are: {', '.join(scenario_names())}")
    return ScriptedAgent(name=spec, plan=None, plan_for=lambda variation: scenario_plan(name, variation))


def _langchain(spec: str, **llm_options: Any) -> Agent:
    # LangChain and the OpenAI SDK take ~2 s to import: a recording without a LangChain agent never loads them
    from fae.agents.langchain_agent import build_langchain_agent

    return build_langchain_agent(spec, **llm_options)


for _prefix, _factory in (
    ("gold", _gold),
    ("scripted", _scripted),
    ("plan", _plan),
    ("scenario", _scenario),
    ("langchain", _langchain),
    ("a2a", build_a2a_agent),
    ("cmd", build_command_agent),
):
    register_agent(_prefix, _factory)


def agent_factories() -> dict[str, AgentFactory]:
    """Every agent prefix: fae's own, those registered in process, and installed plugins' (``fae.agents``)."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in _FACTORIES:
            continue
        try:
            register_agent(point.name, point.load())
        except Exception as exc:  # a broken plugin is named, never a traceback
            raise PlanError(f"agent plugin {point.name!r} ({point.value}) failed to load: {exc}") from None
    return dict(_FACTORIES)


def build_agent(spec: str, **llm_options: Any) -> Agent:
    """An agent from its command-line name: ``PREFIX`` or ``PREFIX:REST``, built by the prefix's factory.

    fae's prefixes: ``gold`` / ``scripted:gold`` and ``plan:PATH`` (scripted agents),
    ``scenario:NAME`` (write-verification scenarios), ``langchain:CONFIG[@MODEL]``
    with CONFIG one of baseline, specs, memory-nospec, memory-spec, memory-spec+specs
    (see docs/agents.md), ``a2a:URL`` (an agent served over A2A), ``cmd[?timeout=SECONDS]:COMMAND LINE``
    (any program). ``llm_options`` (model, api_key, timeout_s, max_retries) go to every factory; scripted
    and A2A agents ignore them, a program gets the model.
    """
    factories = agent_factories()
    _known_prefix(spec, factories)
    return factories[prefix_of(spec)](spec, **llm_options)


def prefix_of(spec: str) -> str:
    """The registry word of a spec: before its first ``:``, less options after ``?`` (``cmd?timeout=60:...``)."""
    return spec.partition(":")[0].partition("?")[0]


def _known_prefix(spec: str, factories: dict[str, AgentFactory]) -> None:
    """Refuse a name no factory takes, naming the closest agent name and every form."""
    prefix = prefix_of(spec)
    if prefix in factories and (prefix != "gold" or spec == "gold"):
        return
    forms = [_usage(name) for name in factories]
    close = difflib.get_close_matches(spec, forms + [f for f in ("gold", "scripted:gold") if f not in forms], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise PlanError(f"unknown agent {spec!r}{hint}: use one of " + ", ".join(forms))


def check_agent(spec: str) -> None:
    """Refuse an agent name before anything records: an unknown prefix, a scripted or scenario name, a plan file
    or a LangChain configuration that does not exist. The model and key are checked when the agent is built."""
    factories = agent_factories()
    _known_prefix(spec, factories)
    prefix = prefix_of(spec)
    if prefix in ("scripted", "plan", "scenario", "cmd"):
        factories[prefix](spec)  # reads a plan file, a scenario's name or a command line: nothing starts
    elif prefix == "langchain":
        config_name, _, query = spec.removeprefix("langchain:").partition("@")[0].partition("?")
        configuration(config_name)
        spec_options(spec, query)
    elif prefix == "a2a":
        check_a2a_spec(spec)


def _usage(prefix: str) -> str:
    return {
        "gold": "gold",
        "scripted": "scripted:gold",
        "plan": "plan:PATH",
        "scenario": "scenario:NAME",
        "langchain": "langchain:CONFIG[@MODEL]",
        "a2a": "a2a:URL",
        "cmd": "cmd:COMMAND LINE",
    }.get(prefix, f"{prefix}[:...]")
