"""A recording's configuration as one typed value: what the stack serves, how the runs go, where they run.

``fae record``'s options, ``fae.api.record``'s ``config``, an experiment file's phases and every executor
(in this process, local worker processes, Ray actors) read the same ``RecordConfig``; a worker or an actor is
handed it whole (it pickles). Grouped as httpx groups ``Timeout`` and ``Limits``: ``StackConfig`` is what one
stack needs (each worker opens its own), ``LlmConfig`` what an LLM agent needs, ``Execution`` where the runs go.
Each option is documented here once; docs/api.md shows how they are passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fae.errors import RecordError
from fae.proxy.exchange import DEFAULT_MAX_BODY_BYTES
from fae.recorder.redact import Redactor

if TYPE_CHECKING:  # paraphrases open stacks, and a stack is opened with a StackConfig
    from fae.harness.paraphrases import Paraphrase

MIB = 1024 * 1024


@dataclass(frozen=True)
class StackConfig:
    """What one recording stack serves and how it records (``fae.harness.stack.open_stack``)."""

    fhir_url: str | None = None
    """An external FHIR base instead of the embedded server (one shared store: its runs go one at a time)."""
    llm_url: str | None = None
    """An OpenAI-compatible (or Anthropic-compatible) base URL the proxy puts in front of the LLM agents' model."""
    memory_stores: Mapping[str, Path] = field(default_factory=dict)
    """Reflexion memory store directories by name, each served by its own memory MCP server (``memory:NAME``)."""
    audit_events: bool = False
    """The FHIR server keeps an AuditEvent trail (the embedded one is told to); each run's trail is read back."""
    fsync: bool = False
    """Every journal append reaches the disk before the writer answers (survives power loss; slower)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """The proxy answers 413 to a larger request body, and records that it did."""
    processes: int | None = None
    """2: the embedded FHIR and MCP servers run in a child process (two cores); 1: all in one process; None: the
    recording's default (``FAE_RECORD_PROCESSES``, else 2; 1 in a worker process)."""
    redact_headers: tuple[str, ...] = ()
    """Headers redacted besides fae's own list (Authorization, api-key, cookies, ...)."""
    redact_params: tuple[str, ...] = ()
    """Query parameters redacted besides fae's own list."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Values scrubbed wherever they appear (an API key given to the agents)."""

    def __post_init__(self) -> None:
        if self.processes not in (None, 1, 2):
            raise RecordError(f"a recording runs in 1 or 2 processes, not {self.processes}")

    def redactor(self) -> Redactor:
        """A new redactor for one stack (it learns the secrets it sees, so stacks never share one)."""
        return Redactor.with_extra(headers=self.redact_headers, query_params=self.redact_params, values=self.secrets)


@dataclass(frozen=True)
class LlmConfig:
    """What the LLM agents are built with (``fae.agents.prefixes.build_agent``)."""

    model: str | None = None
    """The model an LLM agent asks for, unless its name says ``@MODEL`` (else ``FAE_MODEL``)."""
    api_key: str | None = field(default=None, repr=False)
    """The key an LLM agent sends; scrubbed from all that is stored."""
    timeout_s: float | None = None
    """Seconds an LLM request may take."""
    max_retries: int | None = None
    """Retries of a failed LLM request."""

    def options(self) -> dict[str, Any]:
        """The keyword arguments ``build_agent`` takes, for the options that are set."""
        return {key: value for key, value in vars(self).items() if value not in (None, "")}


@dataclass(frozen=True)
class Execution:
    """Where the runs are recorded: in this process (the default), in local worker processes, or on Ray actors."""

    workers: int | None = None
    """Record in this many local worker processes, each with its own stack and log shard; None:
    ``FAE_RECORD_WORKERS``, else 1 (this process)."""
    ray: str | None = None
    """Record on Ray actors at this address (``local``, ``auto``, ``ray://HOST:PORT``)."""
    ray_actors: int | None = None
    """With ``ray``: this many actors (default: one per CPU of the cluster)."""


@dataclass(frozen=True)
class RecordConfig:
    """Everything a recording is told besides its log and its runs."""

    stack: StackConfig = StackConfig()
    llm: LlmConfig = LlmConfig()
    execution: Execution = Execution()
    concurrency: int = 4
    """Runs at once, in all (shared among workers or actors; an external FHIR server takes one at a time)."""
    resume: bool = False
    """Finish an interrupted suite: finished runs and runs that errored on the agent's own fault are kept."""
    retry_errored: bool = False
    """With ``resume``: record the runs that errored on the agent's own fault again too."""
    settle_s: float | None = None
    """The wait after the agent's last write before the read-back (default: ensure_record's)."""
    paraphrase: Paraphrase | None = None
    """Reword every prompt, one paraphrase per (task, variation), fixed before the runs
    (``fae.harness.paraphrases``)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise RecordError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.execution.workers is not None and self.execution.workers < 1:
            raise RecordError(f"--workers must be at least 1, not {self.execution.workers}")
        if self.execution.ray_actors is not None and self.execution.ray_actors < 1:
            raise RecordError(f"--ray-actors must be at least 1, not {self.execution.ray_actors}")
        if self.stack.fhir_url and self.execution.ray is not None:
            raise RecordError(
                "--ray records on the embedded FHIR server only: an external server is one shared "
                "store, so its runs go one at a time (record without --ray)"
            )
        if self.stack.fhir_url and (self.execution.workers or 1) > 1:
            raise RecordError(
                "--workers records on the embedded FHIR server only: an external server is one "
                "shared store, so its runs go one at a time (record with --workers 1)"
            )

    def stack_config(self) -> StackConfig:
        """The stack's configuration, with the LLM agents' API key among the values scrubbed from the log."""
        if not self.llm.api_key or self.llm.api_key in self.stack.secrets:
            return self.stack
        return replace(self.stack, secrets=(*self.stack.secrets, self.llm.api_key))
