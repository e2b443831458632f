"""The LangChain agent's five configurations: which system prompt parts and which extra MCP servers.

Every configuration has the FHIR CRUD tools. The extra servers are named as
the harness names them in ``AgentContext.extra_mcp``: ``specs`` (the FHIR R4
specs server) and ``memory:STORE`` (a Reflexion memory server over the store
called STORE; ``nospec`` is trained without the specs server, ``spec`` with it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import parse_qsl

from fae.errors import FaeError

PROMPTS = Path(__file__).parent / "prompts"
SPECS = "specs"
MEMORY_NOSPEC = "memory:nospec"
MEMORY_SPEC = "memory:spec"
SPEC_OPTIONS = ("tool_choice",)
"""The options a ``langchain:`` spec takes after ``?``."""


@dataclass(frozen=True)
class Configuration:
    """A named agent configuration: system prompt parts (files in prompts/) and extra MCP servers."""

    name: str
    prompt_parts: tuple[str, ...]
    servers: tuple[str, ...]
    summary: str

    @property
    def uses_memory(self) -> bool:
        return any(server.startswith("memory:") for server in self.servers)

    def system_prompt(self) -> str:
        return "\n".join(prompt_part(part).rstrip("\n") for part in self.prompt_parts) + "\n"

    def prompt_digest(self) -> str:
        return hashlib.sha256(self.system_prompt().encode()).hexdigest()[:16]


CONFIGURATIONS: dict[str, Configuration] = {
    c.name: c
    for c in (
        Configuration("baseline", ("baseline",), (), "FHIR tools only"),
        Configuration("specs", ("baseline", "with-specs"), (SPECS,), "+ FHIR R4 specs server"),
        Configuration(
            "memory-nospec", ("baseline", "with-memory"), (MEMORY_NOSPEC,), "+ memory trained without the specs server"
        ),
        Configuration(
            "memory-spec", ("baseline", "with-memory"), (MEMORY_SPEC,), "+ memory trained with the specs server"
        ),
        Configuration(
            "memory-spec+specs",
            ("baseline", "with-specs", "with-memory"),
            (MEMORY_SPEC, SPECS),
            "+ memory trained with specs, + FHIR R4 specs server",
        ),
    )
}


@cache
def prompt_part(name: str) -> str:
    """The text of ``prompts/NAME.txt``."""
    path = PROMPTS / f"{name}.txt"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FaeError(f"system prompt part {name!r} cannot be read from {path}: {exc.strerror}") from None


def configuration(name: str) -> Configuration:
    """A configuration by name, or a FaeError listing the names."""
    try:
        return CONFIGURATIONS[name]
    except KeyError:
        raise FaeError(f"unknown LangChain configuration {name!r}: use one of {', '.join(CONFIGURATIONS)}") from None


def spec_options(spec: str, query: str) -> dict[str, str]:
    """The ``?name=value&...`` options of an agent spec; a FaeError names an unknown or repeated one."""
    options: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise FaeError(f"agent {spec}: options are ?name=value&name=value, got {query!r}") from None
    for name, value in pairs:
        if name not in SPEC_OPTIONS or name in options:
            what = "unknown" if name not in SPEC_OPTIONS else "repeated"
            raise FaeError(f"agent {spec}: {what} option {name!r} (options: {', '.join(SPEC_OPTIONS)})")
        if not value.strip():
            raise FaeError(f"agent {spec}: {name} needs a value (auto, none, required, omit or a tool's name)")
        options[name] = value.strip()
    return options
