"""Limits and defaults that CLI options state in their help, here so that stating them loads nothing.

The modules that enforce them (the training harness, the embedders, the scripted LLM server) import them
from here; `fae --help` and every command that does not use those parts skip numpy, httpx and starlette.
"""

MAX_VARIATIONS = 2
"""Variations per task that Reflexion training runs (fae.harness.training)."""

MAX_TRIALS = 2
"""Trials per variation in Reflexion training; it stops at the first that passes."""

DEFAULT_EMBEDDER_SPEC = "static"
"""The embedding backend a memory store gets when none is named (fae.memory.embeddings)."""

MAX_FAULT_DELAY_S = 300.0
"""The longest wait the scripted LLM server's fault:timeout model may be given (fae.llm.app)."""
